"""Every applier against a real ResourceManager (Hadoop 3.4.3 mini cluster).

Each test leaves the cluster to the baseline fixture, which restores the initial
scheduler configuration and node sizes afterwards.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from yarn_adapt.cli import main
from yarn_adapt.errors import (
    ApplyNotVerified,
    ApplyRejected,
    ConfigValidationError,
    YarnUnavailable,
)
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import (
    AppState,
    CapacitySchedulerConfig,
    FairSchedulerConfig,
    Percentage,
    Resources,
)
from yarn_adapt.yarn.apply import (
    ApplyResult,
    ApplySettings,
    ApplyStep,
    FileApplier,
    MemoryJournal,
    MutationApplier,
    NodeResourceApplier,
    NodeResourceTarget,
    PollSettings,
    RefreshCommand,
    WaitForReload,
    mismatches,
    unfinished,
)
from yarn_adapt.yarn.apply import file_applier as file_applier_module
from yarn_adapt.yarn.apply import interrupted as interrupted_applies
from yarn_adapt.yarn.apply import mutation_applier as mutation_applier_module
from yarn_adapt.yarn.confxml import read_capacity, read_fair, render_capacity
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient


@pytest.fixture
def rm(request: pytest.FixtureRequest) -> Iterator[ResourceManagerClient]:
    cluster = _cluster_of(request)
    with ResourceManagerClient(cluster.rm_url, HttpSettings(user=getpass.getuser())) as client:
        yield client


def _cluster_of(request: pytest.FixtureRequest) -> MiniCluster:
    for name in ("capacity_cluster", "capacity_memory_cluster", "fair_cluster"):
        if name in request.fixturenames:
            cluster: MiniCluster = request.getfixturevalue(name)
            return cluster
    raise AssertionError("test uses no cluster")


def settings(tmp_path: Path, timeout_s: float = 30.0) -> ApplySettings:
    return ApplySettings(
        state_dir=tmp_path / "state", verify=PollSettings(timeout_s=timeout_s, interval_s=0.3)
    )


def with_capacities(config: CapacitySchedulerConfig, **percent: float) -> CapacitySchedulerConfig:
    for name, value in percent.items():
        queue = config.find(f"root.{name}")
        assert queue is not None
        config = config.with_queue(replace(queue, capacity=Percentage(value)))
    return config


def capacity_applier(
    cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path, **kw: object
) -> tuple[FileApplier, MemoryJournal]:
    journal = MemoryJournal()
    activation = kw.pop("activation", RefreshCommand(tuple(cluster.refresh_command)))
    applier = FileApplier(
        cluster.scheduler_xml_path, rm, activation, settings(tmp_path, **kw), journal
    )  # type: ignore[arg-type]
    return applier, journal


def reported_capacities(rm: ResourceManagerClient) -> dict[str, float | None]:
    return {q.path: q.capacity for q in rm.scheduler().queues() if q.path != "root"}


# ------------------------------------------------------------ capacity: file + refreshQueues


def test_file_refresh_applies_and_the_rm_reports_it_then_does_nothing_twice(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path
) -> None:
    applier, journal = capacity_applier(capacity_cluster, rm, tmp_path)
    current = read_capacity(capacity_cluster.scheduler_xml_path).config
    desired = with_capacities(current, default=20, a=50, b=30)

    outcome = applier.apply(desired)

    assert outcome.result is ApplyResult.APPLIED
    assert reported_capacities(rm) == {"root.default": 20.0, "root.a": 50.0, "root.b": 30.0}
    assert outcome.backup is not None and read_capacity(outcome.backup).config == current
    assert [e.step for e in journal.entries()][-1] is ApplyStep.VERIFIED
    again = applier.apply(desired)
    assert again.result is ApplyResult.ALREADY_APPLIED
    assert capacity_cluster.scheduler_xml_path.read_text() == outcome.plan.payload


def test_a_config_the_validator_rejects_is_never_written(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path
) -> None:
    applier, journal = capacity_applier(capacity_cluster, rm, tmp_path)
    before = capacity_cluster.scheduler_xml_path.read_bytes()
    current = read_capacity(capacity_cluster.scheduler_xml_path).config
    broken = with_capacities(current, default=60)  # 60 + 30 + 30 = 120

    with pytest.raises(
        ConfigValidationError, match=r"root\.capacity: children's capacities add up to 120"
    ):
        applier.apply(broken)

    assert capacity_cluster.scheduler_xml_path.read_bytes() == before
    assert journal.entries() == []
    assert not (tmp_path / "state" / "backups").exists()


def test_a_config_forced_past_validation_is_refused_by_the_rm_and_the_backup_restored(
    capacity_cluster: MiniCluster,
    rm: ResourceManagerClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(file_applier_module, "raise_if_invalid", lambda *a, **k: None)
    applier, journal = capacity_applier(capacity_cluster, rm, tmp_path)
    before = capacity_cluster.scheduler_xml_path.read_bytes()
    current = read_capacity(capacity_cluster.scheduler_xml_path).config
    broken = with_capacities(current, default=60)

    with pytest.raises(ApplyRejected, match=r"Illegal capacity sum of 1\.2") as refused:
        applier.apply(broken)

    assert "restored" in str(refused.value)
    assert capacity_cluster.scheduler_xml_path.read_bytes() == before
    assert mismatches(current, rm.scheduler()) == []
    assert [e.step for e in journal.entries()][-1] is ApplyStep.ROLLED_BACK


def test_without_a_refresh_the_change_is_not_verified_and_rolled_back(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path
) -> None:
    applier, _ = capacity_applier(
        capacity_cluster, rm, tmp_path, activation=WaitForReload(), timeout_s=3.0
    )
    before = capacity_cluster.scheduler_xml_path.read_bytes()
    current = read_capacity(capacity_cluster.scheduler_xml_path).config

    with pytest.raises(
        ApplyNotVerified, match=r"root\.default capacity: RM reports 40\.0, expected 20\.0"
    ):
        applier.apply(with_capacities(current, default=20, a=50))

    assert capacity_cluster.scheduler_xml_path.read_bytes() == before
    assert mismatches(current, rm.scheduler()) == []


class SimulatedCrash(BaseException):
    """Stands for the process dying: not an Exception, so nothing catches it."""


class CrashOnActivate:
    def describe(self) -> str:
        return "crash"

    def activate(self) -> None:
        raise SimulatedCrash


def test_a_crash_between_write_and_refresh_is_finished_at_recovery(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path
) -> None:
    crashing, journal = capacity_applier(
        capacity_cluster, rm, tmp_path, activation=CrashOnActivate()
    )
    current = read_capacity(capacity_cluster.scheduler_xml_path).config
    desired = with_capacities(current, default=30, a=40)
    with pytest.raises(SimulatedCrash):
        crashing.apply(desired)
    interrupted = unfinished(journal)
    assert [e.step for e in interrupted] == [ApplyStep.WRITTEN]
    assert mismatches(current, rm.scheduler()) == []  # the RM never saw it

    refresh = RefreshCommand(tuple(capacity_cluster.refresh_command))
    restarted = FileApplier(
        capacity_cluster.scheduler_xml_path, rm, refresh, settings(tmp_path), journal
    )
    [history] = interrupted_applies(journal)
    assert restarted.recover(history) is ApplyStep.VERIFIED
    assert mismatches(desired, rm.scheduler()) == []
    assert unfinished(journal) == []


def test_an_unreachable_rm_stops_the_apply_before_anything_is_written(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    before = capacity_cluster.scheduler_xml_path.read_bytes()
    current = read_capacity(capacity_cluster.scheduler_xml_path).config
    with ResourceManagerClient("http://127.0.0.1:9", HttpSettings(retries=0)) as dead:
        refresh = RefreshCommand(tuple(capacity_cluster.refresh_command))
        applier = FileApplier(
            capacity_cluster.scheduler_xml_path, dead, refresh, settings(tmp_path), MemoryJournal()
        )
        with pytest.raises(YarnUnavailable):
            applier.apply(with_capacities(current, default=20, a=50))
    assert capacity_cluster.scheduler_xml_path.read_bytes() == before


def test_node_resource_update_shows_in_nodes(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path
) -> None:
    node_id = rm.nodes()[0].id
    applier = NodeResourceApplier(rm, settings(tmp_path), MemoryJournal())
    target = NodeResourceTarget(node_id, Resources(4096, 4))

    assert applier.apply(target).result is ApplyResult.APPLIED
    assert rm.node(node_id).total == Resources(4096, 4)
    assert rm.cluster_metrics().total == Resources(4096, 4)
    assert applier.apply(target).result is ApplyResult.ALREADY_APPLIED


# --------------------------------------------------------------------------- CLI


def test_cli_apply_dry_run_changes_nothing_then_apply_does(
    capacity_cluster: MiniCluster,
    rm: ResourceManagerClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = read_capacity(capacity_cluster.scheduler_xml_path)
    desired_file = tmp_path / "desired.xml"
    desired_file.write_text(
        render_capacity(with_capacities(document.config, default=10, a=60), document)
    )
    before = capacity_cluster.scheduler_xml_path.read_bytes()
    refresh = " ".join(capacity_cluster.refresh_command)
    common = [
        "--rm", capacity_cluster.rm_url, "--target", str(capacity_cluster.scheduler_xml_path),
        "--refresh-command", refresh, "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip

    assert main(["apply", str(desired_file), "--dry-run", *common]) == 0
    plan = capsys.readouterr().out
    assert "root.default  capacity  40 -> 10" in plan and "refreshQueues" in plan
    assert capacity_cluster.scheduler_xml_path.read_bytes() == before

    assert main(["apply", str(desired_file), *common]) == 0
    assert capsys.readouterr().out.startswith("applied:")
    assert reported_capacities(rm)["root.default"] == 10.0


def wait_for_finished(rm: ResourceManagerClient, name: str, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        apps = [a for a in rm.apps() if a.name == name]
        if apps and all(a.state.is_terminal for a in apps):
            assert all(a.state is AppState.FINISHED for a in apps), apps
            return
        time.sleep(1)
    raise AssertionError(f"{name} did not finish")


def test_cli_observe_shows_queues_nodes_apps_and_jobhistory_jobs_with_tasks(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    capacity_cluster.submit_mr_sleep_job("a", maps=2, reduces=1, map_ms=500, reduce_ms=500)
    capacity_cluster.submit_sleep_app("b", containers=1, sleep_s=30, name="observed-sleep")
    wait_for_finished(rm, "Sleep job")
    job_id = "job_" + next(a.id for a in rm.apps() if a.name == "Sleep job").removeprefix(
        "application_"
    )
    capacity_cluster.wait_for_history_job(job_id)

    assert (
        main(["observe", "--rm", capacity_cluster.rm_url, "--history", capacity_cluster.jhs_url])
        == 0
    )
    shown = capsys.readouterr().out
    assert "capacity 30% (max 100%)" in shown and "\n    a  RUNNING" in shown
    assert rm.nodes()[0].id in shown
    assert "observed-sleep" in shown and "RUNNING" in shown
    job_line = next(line for line in shown.splitlines() if job_id in line)
    assert "SUCCEEDED" in job_line and "2/2" in job_line and "1/1" in job_line and "3 (" in job_line

    assert (
        main(
            [
                "observe",
                "--json",
                "--rm",
                capacity_cluster.rm_url,
                "--history",
                capacity_cluster.jhs_url,
            ]
        )
        == 0
    )
    assert '"ha_state": "ACTIVE"' in capsys.readouterr().out


# --------------------------------------------------------------------------- capacity: mutation API


def running_store_config(applier: MutationApplier) -> CapacitySchedulerConfig:
    return applier.running_config()


def test_mutation_api_applies_and_the_rm_reports_it(
    capacity_memory_cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path
) -> None:
    applier = MutationApplier(rm, settings(tmp_path), MemoryJournal())
    current = applier.running_config()
    desired = with_capacities(current, default=20, a=45, b=35)
    queue_a = desired.find("root.a")
    assert queue_a is not None
    desired = desired.with_queue(replace(queue_a, user_limit_factor=2.0))

    outcome = applier.apply(desired)

    assert outcome.result is ApplyResult.APPLIED
    assert "<update-queue>" in outcome.plan.payload
    assert mismatches(desired, rm.scheduler()) == []
    assert applier.apply(desired).result is ApplyResult.ALREADY_APPLIED


def test_mutation_the_rm_refuses_leaves_it_on_the_old_settings(
    capacity_memory_cluster: MiniCluster,
    rm: ResourceManagerClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mutation_applier_module, "raise_if_invalid", lambda *a, **k: None)
    applier = MutationApplier(rm, settings(tmp_path), MemoryJournal())
    current = applier.running_config()

    with pytest.raises(ApplyRejected, match="Illegal capacity sum"):
        applier.apply(with_capacities(current, default=70))

    assert applier.running_config() == current
    assert mismatches(current, rm.scheduler()) == []


# ------------------------------------------------------------ fair: allocation file reload


def fair_applier(
    cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path, timeout_s: float
) -> FileApplier:
    return FileApplier(
        cluster.scheduler_xml_path,
        rm,
        WaitForReload(),
        settings(tmp_path, timeout_s),
        MemoryJournal(),
    )


def test_fair_allocation_file_is_reloaded_and_verified(
    fair_cluster: MiniCluster, rm: ResourceManagerClient, tmp_path: Path
) -> None:
    config: FairSchedulerConfig = read_fair(fair_cluster.scheduler_xml_path).config
    a, b = config.find("root.a"), config.find("root.b")
    assert a is not None and b is not None
    desired = config.with_queue(replace(a, weight=2.0)).with_queue(
        replace(b, scheduling_policy="fifo")
    )

    outcome = fair_applier(fair_cluster, rm, tmp_path, timeout_s=40).apply(desired)

    assert outcome.result is ApplyResult.APPLIED
    status = rm.scheduler()
    assert mismatches(desired, status) == []
    queue_b = status.find("root.b")
    assert queue_b is not None and queue_b.scheduling_policy == "fifo"


def test_fair_file_the_scheduler_refuses_is_rolled_back(
    fair_cluster: MiniCluster,
    rm: ResourceManagerClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(file_applier_module, "raise_if_invalid", lambda *a, **k: None)
    config: FairSchedulerConfig = read_fair(fair_cluster.scheduler_xml_path).config
    before = fair_cluster.scheduler_xml_path.read_bytes()
    a = config.find("root.a")
    assert a is not None
    refused = config.with_queue(
        replace(a, scheduling_policy="bogus")
    )  # SchedulingPolicy.parse refuses it

    with pytest.raises(ApplyNotVerified, match="restored"):
        fair_applier(fair_cluster, rm, tmp_path, timeout_s=25).apply(refused)

    assert fair_cluster.scheduler_xml_path.read_bytes() == before
    assert mismatches(config, rm.scheduler()) == []
