"""Apply journal, lock and refresh command: the parts that need no cluster."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from yarn_adapt.errors import ApplyInProgress, SettingsError
from yarn_adapt.yarn.apply import (
    ActivationFailed,
    ApplyLock,
    ApplyStep,
    JournalEntry,
    JsonlJournal,
    RefreshCommand,
    unfinished,
)
from yarn_adapt.yarn.apply.activation import refusal_message
from yarn_adapt.yarn.apply.backup import BackupStore

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "rm"


def entry(apply_id: str, step: ApplyStep) -> JournalEntry:
    return JournalEntry(
        apply_id=apply_id, step=step, applier="file+RefreshCommand", target="/x.xml"
    )


def test_second_lock_is_refused_with_the_holder(tmp_path: Path) -> None:
    with ApplyLock(tmp_path / "apply.lock"), pytest.raises(ApplyInProgress, match=r"pid \d+"):
        ApplyLock(tmp_path / "apply.lock").__enter__()
    with ApplyLock(tmp_path / "apply.lock"):
        pass  # released: can be taken again


def test_unfinished_applies_are_found_after_a_restart(tmp_path: Path) -> None:
    journal = JsonlJournal(tmp_path / "journal.jsonl")
    for step in (
        ApplyStep.PLANNED,
        ApplyStep.BACKED_UP,
        ApplyStep.WRITTEN,
        ApplyStep.ACTIVATED,
        ApplyStep.VERIFIED,
    ):
        journal.record(entry("done", step))
    for step in (ApplyStep.PLANNED, ApplyStep.BACKED_UP, ApplyStep.WRITTEN):
        journal.record(entry("crashed", step))
    reopened = JsonlJournal(tmp_path / "journal.jsonl")
    assert [(e.apply_id, e.step) for e in unfinished(reopened)] == [("crashed", ApplyStep.WRITTEN)]


def test_a_torn_last_line_is_ignored_but_damage_elsewhere_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = JsonlJournal(path)
    journal.record(entry("a", ApplyStep.WRITTEN))
    with path.open("a") as stream:
        stream.write('{"apply_id": "b", "st')
    assert [e.apply_id for e in journal.entries()] == ["a"]
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(SettingsError, match=r"journal.jsonl:1: unreadable journal entry"):
        journal.entries()


def test_refusal_message_is_the_rm_reason_without_stack_frames() -> None:
    stderr = (RECORDED / "capacity-refresh-refused.stderr.txt").read_text()
    message = refusal_message(stderr, 255)
    assert message.startswith(
        "exit 255: refreshQueues: java.io.IOException: Failed to re-init queues"
    )
    assert "Illegal capacity sum of 1.2" in message
    assert "\n" not in message and " at org." not in message


def test_refresh_command_failures_become_activation_failures() -> None:
    with pytest.raises(ActivationFailed, match="refresh command not found"):
        RefreshCommand(("/nonexistent/yarn", "rmadmin", "-refreshQueues")).activate()
    script = (
        "import sys; sys.stderr.write('refreshQueues: java.io.IOException: no\\n'); sys.exit(3)"
    )
    with pytest.raises(ActivationFailed, match=r"exit 3: refreshQueues: java\.io\.IOException: no"):
        RefreshCommand((sys.executable, "-c", script)).activate()
    RefreshCommand((sys.executable, "-c", "pass")).activate()


def test_backups_are_timestamped_copies_and_pruned(tmp_path: Path) -> None:
    source = tmp_path / "capacity-scheduler.xml"
    store = BackupStore(tmp_path / "backups", keep=3)
    for number in range(5):
        source.write_text(f"<configuration>{number}</configuration>")
        copy = store.save(source, source.read_bytes())
        assert copy.read_text() == source.read_text()
    kept = store.backups_of(source.name)
    assert len(kept) == 3
    assert kept[-1].read_text() == "<configuration>4</configuration>"
