"""The proposal state machine, and the store that enforces it in SQL transactions."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from yarn_adapt.errors import ProposalNotFound, ProposalStateError, SettingsError
from yarn_adapt.service.state.records import GroupPrediction, ProposalRecord, ProposalState
from yarn_adapt.service.state.schema import SCHEMA_VERSION
from yarn_adapt.service.state.statemachine import TRANSITIONS, Action, can, operator_actions
from yarn_adapt.service.state.store import SqliteJournal, Store
from yarn_adapt.yarn.apply import ApplyStep, JournalEntry, unfinished
from yarn_adapt.yarn.confxml import ChangeKind, ConfigChange

S = ProposalState


def draft(**overrides: object) -> ProposalRecord:
    values: dict[str, object] = {
        "id": 0,
        "created_at": 0.0,
        "updated_at": 0.0,
        "state": S.PENDING,
        "round_id": None,
        "target": "/etc/hadoop/capacity-scheduler.xml",
        "base_xml": "<configuration/>",
        "proposed_xml": "<configuration><!-- new --></configuration>",
        "changes": (ConfigChange(ChangeKind.CHANGED, "root.a", "capacity", "40", "60"),),
        "groups": (GroupPrediction("root", 100.0, 70.0, 4),),
        "cluster_before_s": 100.0,
        "cluster_after_s": 70.0,
        "reasons": ("a is short of containers",),
    }
    values.update(overrides)
    return ProposalRecord(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "state.db")


@pytest.mark.parametrize(
    ("action", "allowed"),
    [
        (Action.APPROVE, {S.PENDING}),
        (Action.REJECT, {S.PENDING, S.APPROVED}),
        (Action.BEGIN_APPLY, {S.APPROVED}),
        (Action.BEGIN_ROLLBACK, {S.APPLIED}),
        (Action.SUPERSEDE, {S.PENDING, S.APPROVED}),
    ],
)
def test_each_operator_action_is_allowed_only_from_its_states(
    action: Action, allowed: set[ProposalState]
) -> None:
    assert {state for state in S if can(action, state)} == allowed


def test_final_states_offer_no_action() -> None:
    for state in (S.REJECTED, S.FAILED, S.SUPERSEDED, S.ROLLED_BACK, S.NEEDS_OPERATOR):
        assert operator_actions(state) == ()
        assert not any(can(action, state) for action in TRANSITIONS)


def test_a_proposal_round_trips_through_the_store(store: Store) -> None:
    stored = store.create_proposal(draft(), ["root"])
    assert stored.id > 0 and stored.state is S.PENDING
    again = store.proposal(stored.id)
    assert again.changes == draft().changes
    assert again.groups == draft().groups
    assert again.reasons == draft().reasons
    assert [e.action for e in store.audit_log(proposal_id=stored.id)] == ["propose"]


def test_approving_twice_is_refused_with_the_state_named(store: Store) -> None:
    stored = store.create_proposal(draft(), ["root"])
    store.transition(stored.id, Action.APPROVE, "alice")
    with pytest.raises(ProposalStateError, match=r"proposal 1 is approved: only a pending"):
        store.transition(stored.id, Action.APPROVE, "bob")
    actions = [e.action for e in store.audit_log(proposal_id=stored.id)]
    assert actions.count("approve") == 1


def test_an_unknown_proposal_is_named(store: Store) -> None:
    with pytest.raises(ProposalNotFound, match=r"no proposal 42"):
        store.transition(42, Action.APPROVE, "alice")
    assert str(ProposalNotFound("no proposal 42")) == "no proposal 42"


def test_concurrent_approvals_let_exactly_one_win(store: Store) -> None:
    stored = store.create_proposal(draft(), ["root"])
    results: list[str] = []
    barrier = threading.Barrier(8)

    def approve(who: int) -> None:
        barrier.wait()
        try:
            store.transition(stored.id, Action.APPROVE, f"op{who}")
            results.append("won")
        except ProposalStateError:
            results.append("refused")

    threads = [threading.Thread(target=approve, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["refused"] * 7 + ["won"]


def test_a_new_proposal_supersedes_the_pending_ones(store: Store) -> None:
    first = store.create_proposal(draft(), ["root"])
    second = store.create_proposal(draft(), ["root"])
    assert store.proposal(first.id).state is S.SUPERSEDED
    assert store.proposal(second.id).state is S.PENDING


def test_begin_apply_moves_the_state_and_opens_the_apply_together(store: Store) -> None:
    stored = store.create_proposal(draft(), ["root"])
    with pytest.raises(ProposalStateError):
        store.begin_apply(stored.id, Action.BEGIN_APPLY, "p1-x", "alice", "<x/>")
    assert store.applies() == []  # refused transition: no apply row either
    store.transition(stored.id, Action.APPROVE, "alice")
    store.begin_apply(stored.id, Action.BEGIN_APPLY, "p1-x", "alice", "<x/>")
    assert [a.apply_id for a in store.unfinished_applies()] == ["p1-x"]
    done = store.end_apply("p1-x", "applied", "ok", Action.APPLY_SUCCEEDED, "alice")
    assert done.state is S.APPLIED and done.apply_id == "p1-x"
    assert store.latest_applied() == done
    assert "root" in store.last_change_per_group()


def test_the_journal_keeps_each_step_and_finds_unfinished_applies(store: Store) -> None:
    journal = SqliteJournal(store)
    for step in (ApplyStep.PLANNED, ApplyStep.BACKED_UP, ApplyStep.WRITTEN):
        journal.record(JournalEntry("a1", step, "file+RefreshCommand", "/x", new_sha256="abc"))
    journal.record(JournalEntry("a2", ApplyStep.PLANNED, "file+RefreshCommand", "/x"))
    journal.record(JournalEntry("a2", ApplyStep.VERIFIED, "file+RefreshCommand", "/x"))
    reopened = SqliteJournal(Store(store.path))
    assert [(e.apply_id, e.step) for e in unfinished(reopened)] == [("a1", ApplyStep.WRITTEN)]
    assert reopened.store.unfinished_journal_applies() == ["a1"]
    assert reopened.entries()[0].new_sha256 == "abc"


def test_the_schema_is_versioned_and_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    assert Store(path).schema_version == SCHEMA_VERSION
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.close()
    newer = SCHEMA_VERSION + 1
    with pytest.raises(SettingsError, match=rf"state\.db: schema version {newer} is newer"):
        Store(path)


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_text("this is not sqlite\n" * 100)
    with pytest.raises(SettingsError, match=r"state\.db: not a usable SQLite database"):
        Store(path)


def test_the_database_runs_in_wal_mode(store: Store) -> None:
    connection = sqlite3.connect(store.path)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
