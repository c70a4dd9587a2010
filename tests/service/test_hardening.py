"""The service hardened (issue 8), without a cluster: nothing over the change budget
is applied unattended; HA file mode is refused unless the file is shared; a damaged
database stops the service with one line naming the file and its backup copy; the
SQLite journal commits durably; a round records a drift between the RM and the file;
a stopping service waits for the apply in progress."""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from pathlib import Path

import pytest

from tests.service.factories import (
    TOKEN,
    FairWeights,
    FixedProposer,
    settings_for,
    sim_service,
    with_capacities,
)
from yarn_adapt.cli import main
from yarn_adapt.errors import SettingsError, StateDamaged
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.demo.replay import DemoOptions, build_demo
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.database import backup_path
from yarn_adapt.service.state.records import (
    DecisionKind,
    ProposalState,
    RoundStatus,
)
from yarn_adapt.service.state.store import Store

S = ProposalState


# --------------------------------------------------------------------------- change budget


def test_the_demo_with_auto_approve_never_applies_a_fair_change_over_the_budget(
    tmp_path: Path,
) -> None:
    options = DemoOptions(state_dir=tmp_path, scheduler="fair", serve=False, step_s=60.0)
    service = build_demo(options, FairWeights({"root.q1": 9.0, "root.q2": 1.0}))
    # q1 9 : q2 1 moves q1 from 50 to 90 points of its parent: over the 30-point budget
    before = (tmp_path / "conf" / "fair-scheduler.xml").read_bytes()

    [decision] = service.loop.run_round().decisions

    assert decision.kind is DecisionKind.NOT_APPLIED
    assert "auto-approve holds it for an operator" in decision.reason
    assert re.search(
        r"root\.q[12] share moves 40\.0 points \(budget 30 per round\)", decision.reason
    )
    [proposal] = service.store.proposals()
    assert proposal.state is S.PENDING
    assert service.store.applies() == []
    assert (tmp_path / "conf" / "fair-scheduler.xml").read_bytes() == before
    service.close()


@pytest.mark.parametrize("mode", ["enforce", "recommend"])
def test_enforce_and_auto_approve_leave_a_change_over_the_budget_to_an_operator(
    tmp_path: Path, mode: str
) -> None:
    service = sim_service(
        tmp_path,
        FixedProposer(q1=90.0, q2=10.0),  # q1 50 -> 90: 40 points
        service={"mode": mode, "auto_approve": mode == "recommend"},
    )
    [decision] = service.loop.run_round().decisions
    assert decision.kind is DecisionKind.NOT_APPLIED
    assert re.search(
        r"root\.q[12] share moves 40\.0 points \(budget 30 per round\)", decision.reason
    )
    assert [p.state for p in service.store.proposals()] == [S.PENDING]
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    assert cluster.config.find("root.q1").capacity.percent == 50.0
    service.close()


# --------------------------------------------------------------------------- HA file mode


def test_file_mode_with_two_rms_is_refused_unless_the_file_is_declared_shared(
    tmp_path: Path,
) -> None:
    two = ["http://rm1:8088", "http://rm2:8088"]
    tables = {"scheduler": {"file": str(tmp_path / "capacity-scheduler.xml")}}
    settings = settings_for(tmp_path, yarn={"rm": two}, **tables)
    with pytest.raises(SettingsError) as refused:
        YarnBackend(settings)
    message = refused.value.one_line()
    assert message.startswith('test.toml: [scheduler] via = "file" with 2 ResourceManagers')
    assert "a failover would silently revert a change" in message
    assert "shared_file = true" in message

    shared = settings_for(
        tmp_path, yarn={"rm": two}, scheduler={**tables["scheduler"], "shared_file": True}
    )
    YarnBackend(shared).close()
    YarnBackend(settings_for(tmp_path, yarn={"rm": two}, scheduler={"via": "mutation"})).close()


def test_cli_apply_in_file_mode_with_two_rms_needs_shared_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desired = tmp_path / "capacity-scheduler.xml"
    desired.write_text(
        "<configuration><property><name>yarn.scheduler.capacity.root.queues</name>"
        "<value>default</value></property><property>"
        "<name>yarn.scheduler.capacity.root.default.capacity</name><value>100</value>"
        "</property></configuration>"
    )
    argv = ["apply", str(desired), "--rm", "http://127.0.0.1:9", "--rm", "http://127.0.0.1:10"]
    assert main([*argv, "--target", str(desired), "--state-dir", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("yarn-adapt: --via file with 2 ResourceManagers")
    assert "--shared-file" in error and error.count("\n") == 1


# --------------------------------------------------------------------------- the database


def damage(path: Path) -> None:
    """Keep the 100-byte header (and the first page) valid, overwrite the rest."""
    data = bytearray(path.read_bytes())
    for at in range(4096, len(data)):
        data[at] = (at * 7919) % 251
    path.write_bytes(bytes(data))


def filled_store(path: Path) -> Store:
    store = Store(path)
    for number in range(200):
        store.audit("test", "note", None, f"entry {number} " + "x" * 200)
    return store


def test_a_damaged_database_is_one_line_naming_the_file_and_the_backup_copy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "yarn-adapt.db"
    store = filled_store(path)
    assert store.keep_backup() == backup_path(path)
    store.close()
    damage(path)

    with pytest.raises(StateDamaged) as damaged:
        Store(path)

    message = damaged.value.one_line()
    assert message.startswith(f"{path}: the database is damaged (")
    assert f"the last good copy is {backup_path(path)}" in message
    copy = Store(backup_path(path))  # the copy is whole and readable
    assert len(copy.audit_log(limit=500)) == 200
    copy.close()


def test_a_damaged_database_without_a_copy_says_so(tmp_path: Path) -> None:
    path = tmp_path / "yarn-adapt.db"
    filled_store(path).close()
    damage(path)
    with pytest.raises(StateDamaged, match=r"no backup copy exists \(.*yarn-adapt\.db\.backup"):
        Store(path)


def test_serve_once_on_a_damaged_database_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    filled_store(state / "yarn-adapt.db").close()
    damage(state / "yarn-adapt.db")
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(
        f'[yarn]\nrm = ["http://127.0.0.1:9"]\nretries = 0\n[scheduler]\nvia = "mutation"\n'
        f'[state]\ndir = "{state}"\n[http]\nenabled = false\n'
    )
    assert main(["serve", "--config", str(config), "--once"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"yarn-adapt: {state / 'yarn-adapt.db'}: the database is damaged")
    assert error.count("\n") == 1 and "Traceback" not in error


def test_backups_rotate_and_each_round_keeps_one(tmp_path: Path) -> None:
    service = sim_service(tmp_path, service={"auto_approve": True})
    database = service.store.path
    service.loop.run_round()
    assert backup_path(database).exists()
    first = backup_path(database).read_bytes()
    service.loop.run_round()
    previous = backup_path(database).with_name(backup_path(database).name + ".1")
    assert previous.read_bytes() == first
    for copy in (backup_path(database), previous):
        check = sqlite3.connect(copy)
        assert check.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        check.close()
    service.close()


def test_every_connection_commits_durably(tmp_path: Path) -> None:
    store = Store(tmp_path / "yarn-adapt.db")
    seen: list[int] = []

    def read_in_a_thread() -> None:
        seen.append(store._db.execute("PRAGMA synchronous").fetchone()[0])

    read_in_a_thread()
    worker = threading.Thread(target=read_in_a_thread)
    worker.start()
    worker.join()
    assert seen == [2, 2]  # FULL: the WAL is fsynced at every commit
    store.close()


# --------------------------------------------------------------------------- drift


def test_a_round_records_a_drift_between_the_rm_and_the_file_and_takes_no_action(
    tmp_path: Path,
) -> None:
    service = sim_service(tmp_path, service={"auto_approve": True})
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    cluster.load(with_capacities(cluster.config, q1=60.0, q2=40.0))  # never written to the file

    report = service.loop.run_round()

    assert report.status is RoundStatus.SKIPPED
    [decision] = report.decisions
    assert decision.kind is DecisionKind.DRIFT
    assert "the RM does not run the scheduler file" in decision.reason
    assert "root.q1" in decision.reason and "no action taken" in decision.reason
    assert service.loop.status()["drift"]
    assert service.store.proposals() == []
    service.close()


# --------------------------------------------------------------------------- shutdown


def test_closing_waits_for_the_apply_in_progress_then_closes_the_database(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = sim_service(tmp_path)
    service.loop.run_round()
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    loading, release = threading.Event(), threading.Event()
    real_load = cluster.load

    def slow_load(config: object) -> None:
        loading.set()
        release.wait(10)
        real_load(config)

    cluster.load = slow_load
    approver = threading.Thread(target=service.desk.approve, args=(1, "alice"))
    approver.start()
    assert loading.wait(10)
    threading.Timer(0.5, release.set).start()
    with caplog.at_level(logging.WARNING, logger="yarn_adapt.service.service"):
        service.close()
    approver.join()
    assert "waiting up to 150 s for the apply in progress (p1-" in caplog.text
    assert "the apply in progress has finished" in caplog.text
    reopened = Service.build(service.settings, service.backend, FixedProposer(), token=TOKEN)
    assert reopened.store.proposal(1).state is S.APPLIED
    reopened.close()


def test_an_apply_outlasting_the_grace_is_left_to_its_journal_not_cut_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = sim_service(tmp_path, service={"shutdown_grace_s": 0.2})
    service.loop.run_round()
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    loading, release = threading.Event(), threading.Event()
    real_load = cluster.load

    def slow_load(config: object) -> None:
        loading.set()
        release.wait(10)
        real_load(config)

    cluster.load = slow_load
    results = []
    approver = threading.Thread(target=lambda: results.append(service.desk.approve(1, "alice")))
    approver.start()
    assert loading.wait(10)
    with caplog.at_level(logging.ERROR, logger="yarn_adapt.service.service"):
        service.close()
    assert "still running after 0.2 s; exiting without closing the database" in caplog.text
    release.set()
    approver.join()
    [record] = results  # the database was not closed under it
    assert record.state is S.APPLIED
    service.store.close()
