"""The round, the modes, the desk and reconciliation, driven against the simulated
cluster backend (a real simulator and real files; only the tuner is stood in for)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.service.factories import (
    TOKEN,
    FixedProposer,
    settings_for,
    sim_service,
    simulated_backend,
)
from yarn_adapt.errors import ProposalStateError, YarnUnavailable
from yarn_adapt.model import Percentage
from yarn_adapt.service.demo.simcluster import SimulatedApplier
from yarn_adapt.service.loop.rounds import Backoff
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import DecisionKind, ProposalState, RoundStatus
from yarn_adapt.service.state.store import SqliteJournal
from yarn_adapt.yarn.apply import ApplyStep, unfinished
from yarn_adapt.yarn.confxml import read_capacity

S = ProposalState


def q1_capacity(service: Service) -> float:
    queue = read_capacity(Path(service.backend.target)).config.find("root.q1")
    assert queue is not None and queue.capacity is not None
    return float(queue.capacity.percent)  # type: ignore[union-attr]


def test_recommend_stores_a_proposal_and_approval_applies_it_once(tmp_path: Path) -> None:
    service = sim_service(tmp_path)
    report = service.loop.run_round()
    assert report.status is RoundStatus.DONE
    [decision] = report.decisions
    assert decision.kind is DecisionKind.PROPOSED and decision.proposal_id == 1
    assert "stored for review: predicted cluster latency 1 m 40 s → 1 m 20 s" in decision.reason
    assert q1_capacity(service) == 50.0  # recommend mode changed nothing
    assert set(report.timings_s) >= {"observe", "propose", "decide", "act", "record"}

    applied = service.desk.approve(1, "alice")
    assert applied.state is S.APPLIED, applied.note
    assert q1_capacity(service) == 70.0
    assert service.backend.cluster.config == read_capacity(Path(service.backend.target)).config  # type: ignore[attr-defined]
    with pytest.raises(ProposalStateError, match="proposal 1 is applied: only a pending"):
        service.desk.approve(1, "bob")
    with pytest.raises(ProposalStateError, match="only an approved proposal can be applied"):
        service.desk.apply(1, "bob")
    assert service.store.count_applies(1, "apply") == 1
    steps = [e.step for e in service.store.journal_entries(applied.apply_id)]
    assert steps == [
        ApplyStep.PLANNED, ApplyStep.BACKED_UP, ApplyStep.WRITTEN, ApplyStep.ACTIVATED,
        ApplyStep.VERIFIED,
    ]  # fmt: skip


def test_auto_approve_applies_in_the_round(tmp_path: Path) -> None:
    service = sim_service(tmp_path, service={"auto_approve": True})
    [decision] = service.loop.run_round().decisions
    assert decision.kind is DecisionKind.APPLIED
    assert service.store.proposal(1).state is S.APPLIED
    assert q1_capacity(service) == 70.0


def test_observe_mode_stores_and_changes_nothing(tmp_path: Path) -> None:
    service = sim_service(tmp_path, service={"mode": "observe"})
    [decision] = service.loop.run_round().decisions
    assert decision.kind is DecisionKind.OBSERVED
    assert "would propose 2 changes" in decision.reason
    assert service.store.proposals() == []
    assert q1_capacity(service) == 50.0


@pytest.mark.parametrize(
    ("q1", "kind", "state", "capacity"),
    [
        (65.0, DecisionKind.APPLIED, S.APPLIED, 65.0),
        (95.0, DecisionKind.NOT_APPLIED, S.PENDING, 50.0),  # a 45-point step is over budget
    ],
)
def test_enforce_applies_within_the_budget_only(
    tmp_path: Path, q1: float, kind: DecisionKind, state: ProposalState, capacity: float
) -> None:
    service = sim_service(tmp_path, FixedProposer(q1=q1, q2=100 - q1), service={"mode": "enforce"})
    [decision] = service.loop.run_round().decisions
    assert decision.kind is kind, decision.reason
    assert service.store.proposal(1).state is state
    assert q1_capacity(service) == capacity


def test_a_changed_group_cools_down_and_then_is_tuned_again(tmp_path: Path) -> None:
    proposer = FixedProposer()
    service = sim_service(tmp_path, proposer, service={"auto_approve": True})
    service.loop.run_round()
    proposer.q1, proposer.q2 = 60.0, 40.0
    [decision] = service.loop.run_round().decisions
    assert proposer.frozen_seen[-1] == frozenset({"root"})
    assert decision.kind is DecisionKind.COOLDOWN
    assert "root changed recently" in decision.reason


def test_small_improvements_and_quiet_intervals_are_recorded_with_their_reason(
    tmp_path: Path,
) -> None:
    proposer = FixedProposer(before_s=100.0, after_s=99.0)
    service = sim_service(tmp_path, proposer)
    assert service.loop.run_round().decisions[0].kind is DecisionKind.BELOW_THRESHOLD
    proposer.triggered = False
    [quiet] = service.loop.run_round().decisions
    assert quiet.kind is DecisionKind.NOTHING_PENDING, quiet.reason
    assert service.store.proposals() == []
    kinds = [d.kind for _, d in service.store.decisions()]
    assert kinds == [DecisionKind.NOTHING_PENDING, DecisionKind.BELOW_THRESHOLD]


def test_rounds_never_overlap(tmp_path: Path) -> None:
    service = sim_service(tmp_path)
    service.loop._busy.acquire()  # a round in progress
    try:
        report = service.loop.run_round()
    finally:
        service.loop._busy.release()
    assert report.status is RoundStatus.SKIPPED
    assert report.decisions[0].kind is DecisionKind.BUSY
    assert report.reason == "the previous round is still running"
    assert service.store.proposals() == []


class Unreachable:
    """A backend whose RM refuses connections (the live test stops a real RM)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.down = True

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def observe(self) -> object:
        if self.down:
            raise YarnUnavailable("GET http://rm:8088/ws/v1/cluster/info: connection refused")
        return self.inner.observe()  # type: ignore[attr-defined]


def test_while_the_rm_is_unreachable_no_action_is_taken_and_rounds_back_off(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path, backoff={"initial_s": 5.0, "max_s": 12.0})
    backend = Unreachable(simulated_backend(tmp_path))
    service = Service.build(settings, backend, FixedProposer(), token=TOKEN)  # type: ignore[arg-type]
    delays = []
    for _ in range(3):
        report = service.loop.run_round()
        assert report.status is RoundStatus.SKIPPED
        assert report.decisions[0].kind is DecisionKind.RM_UNAVAILABLE
        delays.append(service.loop.next_delay_s())
    assert delays == [5.0, 10.0, 12.0]
    assert "the RM is unreachable; no action taken" in report.reason
    assert str(service.loop.status()["rm_problem"]).startswith("the RM is unreachable")
    assert service.store.proposals() == []
    backend.down = False
    assert service.loop.run_round().status is RoundStatus.DONE
    assert service.loop.next_delay_s() == settings.service.interval_s


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = Backoff(initial_s=10, max_s=60)
    assert [backoff.failed("x") for _ in range(5)] == [10, 20, 40, 60, 60]
    backoff.succeeded()
    assert backoff.failures == 0 and backoff.reason == ""


class Crash(BaseException):
    """The process dying: not an Exception, so nothing in the service catches it."""


def test_a_crash_between_write_and_activation_is_finished_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = sim_service(tmp_path)
    service.loop.run_round()

    def crash(self: SimulatedApplier, apply_id: str, desired: object) -> None:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(SimulatedApplier, "_activate", crash)
        with pytest.raises(Crash):
            service.desk.approve(1, "alice")
    assert service.store.proposal(1).state is S.APPLYING
    [interrupted] = unfinished(SqliteJournal(service.store))
    assert interrupted.step is ApplyStep.WRITTEN
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    assert cluster.config.find("root.q1").capacity.percent == 50.0  # written, never loaded
    service.store.close()

    restarted = Service.build(service.settings, service.backend, FixedProposer(), token=TOKEN)
    done = restarted.start()
    assert any("interrupted after written" in line for line in done)
    assert restarted.store.proposal(1).state is S.APPLIED
    assert cluster.config.find("root.q1").capacity.percent == 70.0
    assert unfinished(SqliteJournal(restarted.store)) == []
    assert restarted.store.count_applies(1, "apply") == 1


def test_a_restart_keeps_the_history(tmp_path: Path) -> None:
    service = sim_service(tmp_path, service={"auto_approve": True})
    service.loop.run_round()
    service.close()
    again = Service.build(service.settings, service.backend, FixedProposer(), token=TOKEN)
    assert [p.state for p in again.store.proposals()] == [S.APPLIED]
    assert [a.result for a in again.store.applies()] == ["applied"]
    assert again.store.rounds()[0].decisions[0].kind is DecisionKind.APPLIED


def test_rollback_restores_what_the_proposal_replaced(tmp_path: Path) -> None:
    service = sim_service(tmp_path, service={"auto_approve": True})
    service.loop.run_round()
    rolled = service.desk.rollback(1, "alice")
    assert rolled.state is S.ROLLED_BACK
    assert q1_capacity(service) == 50.0
    with pytest.raises(ProposalStateError, match="only the configuration running now"):
        service.desk.rollback(1, "alice")


def test_a_proposal_made_against_another_configuration_is_not_applied(tmp_path: Path) -> None:
    service = sim_service(tmp_path)
    service.loop.run_round()
    target = Path(service.backend.target)
    document = read_capacity(target)
    queue = document.config.find("root.q1")
    assert queue is not None
    target.write_text(
        document.render(
            document.config.with_queue(replace(queue, maximum_capacity=Percentage(90.0)))
        )
    )  # fmt: skip  (an operator edited the file meanwhile)
    result = service.desk.approve(1, "alice")
    assert result.state is S.SUPERSEDED
    assert "the running configuration changed" in result.note
    assert [a.result for a in service.store.applies()] == ["not-started"]
    assert q1_capacity(service) == 50.0


def test_realized_latency_is_measured_after_an_apply(tmp_path: Path) -> None:
    service = sim_service(
        tmp_path, FixedProposer(population=True), service={"auto_approve": True},
        realized={"intervals": 2}, tuning={"min_jobs": 1},
    )  # fmt: skip
    service.loop.run_round()  # proposes and applies
    for _ in range(4):
        service.loop.run_round()
    last_round = service.store.rounds(limit=1)[0].started_at
    measured = service.store.realized(1)
    assert [m.interval for m in measured] == [1, 2]
    assert all(m.group == "root" and m.predicted_s == 80.0 for m in measured)
    assert sum(m.jobs for m in measured) > 0
    assert all(m.mean_s is None or m.mean_s > 0 for m in measured)
    exposition = service.metrics.exposition().decode()
    # the realised gauge is the page's figure: proposal 1's own jobs, all finished
    [checked] = service.store.prediction_errors(1)
    assert (
        f'yarn_adapt_realized_latency_seconds{{group="root"}} {checked.realised_s!r}' in exposition
    )
    assert 'yarn_adapt_realized_predicted_latency_seconds{group="root"} 80.0' in exposition
    assert 'yarn_adapt_predicted_latency_seconds{config="proposed",group="root"} 80.0' in exposition
    assert "yarn_adapt_latest_proposal_id 1.0" in exposition
    assert 'yarn_adapt_queue_configured_capacity_ratio{queue="root.q1"} 0.7' in exposition
    assert 'yarn_adapt_failures_total{kind="rollback-failed"} 0.0' in exposition  # from zero
    assert 'yarn_adapt_build_info{version="' in exposition
    assert "yarn_adapt_pending_proposals 0.0" in exposition
    assert "proposal=" not in exposition  # no unbounded label
    [stamp] = re.findall(r"^yarn_adapt_last_round_timestamp_seconds (\S+)$", exposition, re.M)
    assert float(stamp) == pytest.approx(last_round, abs=1e-3)
    latest = service.store.latest_usage()
    assert latest is not None and [u.queue for u in latest[2]] == ["root", "root.q1", "root.q2"]
    for usage in latest[2]:  # one series per queue of the tree, nothing else
        used = f'yarn_adapt_queue_used_capacity_ratio{{queue="{usage.queue}"}}'
        waiting = f'yarn_adapt_queue_pending_containers{{queue="{usage.queue}"}}'
        assert f"{used} {usage.used_percent / 100.0!r}\n" in exposition
        assert f"{waiting} {float(usage.pending_containers)!r}\n" in exposition
    for family in ("queue_used_capacity_ratio", "queue_pending_containers"):
        labels = re.findall(rf"^yarn_adapt_{family}{{(.*)}} ", exposition, re.MULTILINE)
        assert labels == [f'queue="{q}"' for q in ("root", "root.q1", "root.q2")]


class BrokenProposer:
    def propose(self, observed: object, frozen: frozenset[str]) -> None:
        raise ZeroDivisionError("division by zero")


def test_a_failing_tuner_fails_the_round_not_the_service(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    service = Service.build(settings, simulated_backend(tmp_path), BrokenProposer(), token=TOKEN)
    report = service.loop.run_round()
    assert report.status is RoundStatus.FAILED
    assert report.decisions[0].reason == "unexpected ZeroDivisionError: division by zero"
    exposition = service.metrics.exposition().decode()
    assert 'yarn_adapt_failures_total{kind="round"} 1.0' in exposition
    assert service.store.rounds()[0].status is RoundStatus.FAILED
