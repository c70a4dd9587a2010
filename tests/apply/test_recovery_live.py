"""Recovery on the real mini YARN (Capacity Scheduler, file store): the CLI's own
journal and ``yarn-adapt recover`` after a crash between the refresh and the
verification, and a scheduler file in ISO-8859-1 with a non-ASCII comment that
every restore must give back byte for byte."""

from __future__ import annotations

import getpass
import random
from dataclasses import replace
from pathlib import Path

import pytest

from yarn_adapt.bench.crash_harness import PATHS, CrashHarness, Trial
from yarn_adapt.cli import main
from yarn_adapt.errors import RollbackFailed
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import CapacitySchedulerConfig, Percentage
from yarn_adapt.yarn.apply import (
    ApplySettings,
    ApplyStep,
    FileApplier,
    JournalEntry,
    JsonlJournal,
    PollSettings,
    RefreshCommand,
    mismatches,
    unfinished,
)
from yarn_adapt.yarn.apply import file_applier as file_applier_module
from yarn_adapt.yarn.confxml import read_capacity
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient


class Crash(BaseException):
    """The process dying: not an Exception, so nothing in the applier catches it."""


class CrashAfter(JsonlJournal):
    """The CLI's journal, in a process that dies once ``step`` is on disk."""

    def __init__(self, path: Path, step: ApplyStep) -> None:
        super().__init__(path)
        self.step = step

    def record(self, entry: JournalEntry) -> None:
        super().record(entry)
        if entry.step is self.step:
            raise Crash


def with_capacities(config: CapacitySchedulerConfig, **percent: float) -> CapacitySchedulerConfig:
    for name, value in percent.items():
        queue = config.find(f"root.{name}")
        assert queue is not None
        config = config.with_queue(replace(queue, capacity=Percentage(value)))
    return config


def test_recover_after_a_crash_between_the_refresh_and_the_verification_says_applied(
    capacity_cluster: MiniCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's headline bug: the new file was in place and refreshed, yet
    ``recover`` printed ``rolled-back`` because the ACTIVATED entry had no hash."""
    state = tmp_path / "state"
    target = capacity_cluster.scheduler_xml_path
    desired = with_capacities(read_capacity(target).config, default=20, a=50, b=30)
    settings = ApplySettings(state_dir=state, verify=PollSettings(timeout_s=20.0))
    journal = CrashAfter(settings.default_journal().path, ApplyStep.ACTIVATED)
    with ResourceManagerClient(capacity_cluster.rm_url, HttpSettings(user=getpass.getuser())) as rm:
        refresh = RefreshCommand(tuple(capacity_cluster.refresh_command))
        with pytest.raises(Crash):
            FileApplier(target, rm, refresh, settings, journal).apply(desired)
        assert [e.step for e in unfinished(journal)] == [ApplyStep.ACTIVATED]
        assert all(e.old_sha256 and e.new_sha256 and e.backup for e in journal.entries()[1:])

        common = ["--rm", capacity_cluster.rm_url, "--state-dir", str(state)]
        refresh_text = " ".join(capacity_cluster.refresh_command)
        assert main(["recover", *common, "--refresh-command", refresh_text]) == 0
        [line] = capsys.readouterr().out.splitlines()
        assert line.startswith(f"{journal.entries()[0].apply_id}: {target}: verified")
        assert "the RM runs the new configuration" in line
        assert mismatches(desired, rm.scheduler()) == []
        assert read_capacity(target).config == desired
        assert main(["recover", *common]) == 0
        assert capsys.readouterr().out == (
            "nothing to recover: no interrupted applies, no node or queue the guard changed\n"
        )


LATIN1_CAPACITY = (
    '<?xml version="1.0" encoding="ISO-8859-1"?>\n'
    "<!-- Files d'attente réglées à la main par l'équipe données (ÿ) -->\n"
    "<configuration>\n"
    "  <property><name>yarn.scheduler.capacity.maximum-am-resource-percent</name>"
    "<value>0.5</value></property>\n"
    "  <property><name>yarn.scheduler.capacity.node-locality-delay</name>"
    "<value>-1</value></property>\n"
    "  <property><name>yarn.scheduler.capacity.root.queues</name>"
    "<value>default,a,b</value></property>\n"
    "  <property><name>yarn.scheduler.capacity.root.default.capacity</name>"
    "<value>40</value></property>\n"
    "  <property><name>yarn.scheduler.capacity.root.a.capacity</name>"
    "<value>30</value></property>\n"
    "  <property><name>yarn.scheduler.capacity.root.b.capacity</name>"
    "<value>30</value></property>\n"
    "</configuration>\n"
).encode("iso-8859-1")


def test_a_latin1_scheduler_file_comes_back_byte_for_byte_after_refusals_and_crashes(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    """The backup used to be read back as UTF-8: the rollback died with a raw
    UnicodeDecodeError, the refused configuration stayed and the proposal was stuck
    in ``applying``. The trial's check compares the file with its bytes before."""
    capacity_cluster.scheduler_xml_path.write_bytes(LATIN1_CAPACITY)
    try:
        assert capacity_cluster.refresh_queues().returncode == 0
        harness = CrashHarness(PATHS["file+refresh"], capacity_cluster, tmp_path, random.Random(3))

        # The child's own rollback restores the backup (where the UnicodeDecodeError
        # was), then it is killed before the refresh; recovery refreshes and checks.
        restored = harness.run(Trial("lagging", kill_after=ApplyStep.RESTORED))

        assert restored.consistent, restored.problems
        assert (restored.truth, restored.outcome) == ("old", "failed")
        assert capacity_cluster.scheduler_xml_path.read_bytes() == LATIN1_CAPACITY
    finally:  # the cluster's own reset reads its file as UTF-8
        capacity_cluster.write_scheduler_xml(capacity_cluster.spec.initial_scheduler_xml)


class TamperAfterBackup(JsonlJournal):
    """A journal in a process whose backup is overwritten behind its back."""

    def record(self, entry: JournalEntry) -> None:
        super().record(entry)
        if entry.step is ApplyStep.BACKED_UP:
            Path(entry.backup).write_bytes(b"<configuration/>\n")


def test_a_restore_that_cannot_be_trusted_is_rollback_failed_in_one_line(
    capacity_cluster: MiniCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(file_applier_module, "raise_if_invalid", lambda *a, **k: None)
    target = capacity_cluster.scheduler_xml_path
    refused = with_capacities(read_capacity(target).config, default=60)  # sums to 120
    settings = ApplySettings(state_dir=tmp_path / "state", verify=PollSettings(timeout_s=10.0))
    journal = TamperAfterBackup(settings.default_journal().path)
    with ResourceManagerClient(capacity_cluster.rm_url, HttpSettings(user=getpass.getuser())) as rm:
        refresh = RefreshCommand(tuple(capacity_cluster.refresh_command))
        with pytest.raises(RollbackFailed) as failed:
            FileApplier(target, rm, refresh, settings, journal).apply(refused)
    message = failed.value.one_line()
    assert message == (
        f"{target}: the backup {journal.entries()[-1].backup} does not hold the previous "
        "configuration (its sha256 differs from the journal's)"
    )
    assert failed.value.exit_code == 5
    assert journal.entries()[-1].step is ApplyStep.UNRESOLVED
    assert read_capacity(target).config == refused  # left for the operator, not overwritten
