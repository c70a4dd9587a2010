"""The tuning round and the schedule that repeats it.

One round, each step timed::

    observe -> reconcile (at the first round, and whenever an apply is left open;
      then observe again if it settled one) -> drift check -> measure realized
      latency -> propose (triggered groups, minus those cooling down) -> decide
      (gates) -> act (the mode's actuator) -> record

The co-location guard is not a step of it: it runs on its own clock
(:class:`~yarn_adapt.service.guard.GuardLoop`), so a drift, a failing tuner or a
skipped round never holds it up, and its failures never reach this loop.

The drift check compares what the RM reports (``/scheduler``) with the scheduler
file: when they differ (a failover to an RM reading another file, a hand edit that
was never refreshed), the round records a ``drift`` decision naming the difference
and takes no action, because every proposal assumes the file is what runs. After a
round that reached the RM, the database is copied (:meth:`Store.keep_backup`).

A round never overlaps another (a non-blocking lock; a round that finds it held is
recorded as skipped). When the RM cannot be read -- down, every address a standby,
too slow -- the round takes no action, records why, and the next one comes after an
exponential backoff instead of the interval. Every decision is stored with its reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from yarn_adapt.errors import YarnAdaptError, YarnError, YarnStandby
from yarn_adapt.service.backend import ClusterBackend, FinishedJob, Observed
from yarn_adapt.service.loop.actuators import Actuator, Plan
from yarn_adapt.service.loop.gates import annotated
from yarn_adapt.service.loop.hysteresis import (
    Verdict,
    changes_by_group,
    cooling_groups,
    gate_settings,
    group_moves,
    judge,
)
from yarn_adapt.service.loop.reconcile import needs_reconcile, reconcile
from yarn_adapt.service.metrics import ServiceMetrics
from yarn_adapt.service.proposers.checking import check_proposal, group_histories
from yarn_adapt.service.proposers.realized import latency_by_group, submitted_since
from yarn_adapt.service.proposers.seam import Proposer
from yarn_adapt.service.settings import Settings
from yarn_adapt.service.state.records import (
    Decision,
    DecisionKind,
    GroupHistory,
    ProposalRecord,
    ProposalState,
    RealizedLatency,
    RecentChange,
    RoundReport,
    RoundStatus,
    Suggestion,
)
from yarn_adapt.service.state.series import GroupLatencySample
from yarn_adapt.service.state.store import Store
from yarn_adapt.service.state.usage import usage_of
from yarn_adapt.service.state.versions import note_running
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.yarn.confxml import diff_configs

log = logging.getLogger(__name__)

RECENT_APPLIES = 50
"""The oscillation guard looks at most this many applies back."""
FINISHED_KEPT = 20_000
"""Finished jobs remembered (by id) to check predictions whose jobs end rounds apart."""


def _groups(verdict: Verdict) -> frozenset[str]:
    return frozenset(hold.group for hold in verdict.held)


@dataclass
class Backoff:
    """Consecutive failures to read the RM and the delay they call for."""

    initial_s: float
    max_s: float
    failures: int = 0
    reason: str = ""

    def failed(self, reason: str) -> float:
        self.failures += 1
        self.reason = reason
        return self.delay_s()

    def succeeded(self) -> None:
        self.failures, self.reason = 0, ""

    def delay_s(self) -> float:
        return float(min(self.max_s, self.initial_s * 2.0 ** max(0, self.failures - 1)))


@dataclass
class StepTimer:
    timings_s: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.timings_s[name] = round(time.perf_counter() - began, 4)


class RoundSkipped(Exception):
    """Internal: the round ends early with a recorded decision."""

    def __init__(self, decision: Decision, status: RoundStatus) -> None:
        super().__init__(decision.reason)
        self.decision = decision
        self.status = status


class TuningLoop:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        backend: ClusterBackend,
        proposer: Proposer,
        actuator: Actuator,
        metrics: ServiceMetrics,
        *,
        clock: Callable[[], float] = time.time,
        in_flight: Callable[[], frozenset[str]] = frozenset,
    ) -> None:
        self.settings = settings
        self.store = store
        self.backend = backend
        self.proposer = proposer
        self.actuator = actuator
        self.metrics = metrics
        self.clock = clock
        self.in_flight = in_flight
        self.drift: tuple[str, ...] = ()
        self.backoff = Backoff(settings.backoff.initial_s, settings.backoff.max_s)
        self.reconciled = False
        self.last_round: RoundReport | None = None
        self.next_round_at: float | None = None
        self._busy = threading.Lock()
        self._last_taken_ms: int | None = None
        self._previous_taken_ms: int | None = None
        self._finished: dict[str, FinishedJob] = {}  # by id, for checking predictions

    # ------------------------------------------------------------------ schedule

    def run_forever(self, stop: threading.Event) -> None:
        """Rounds every interval (or after the backoff) until ``stop`` is set."""
        while not stop.is_set():
            self.run_round()
            delay = self.next_delay_s()
            self.next_round_at = self.clock() + delay
            stop.wait(delay)

    def next_delay_s(self) -> float:
        if self.backoff.failures:
            return self.backoff.delay_s()
        return self.settings.service.interval_s

    # ------------------------------------------------------------------ one round

    def run_round(self) -> RoundReport:
        if not self._busy.acquire(blocking=False):
            return self._skipped_overlap()
        try:
            report = self._round()
        finally:
            self._busy.release()
        self.last_round = report
        return report

    def _skipped_overlap(self) -> RoundReport:
        reason = "the previous round is still running"
        round_id = self.store.begin_round(self.clock())
        decision = Decision(DecisionKind.BUSY, reason)
        self.store.record_decision(round_id, decision)
        self.store.finish_round(round_id, RoundStatus.SKIPPED, reason, {})
        self.metrics.rounds.labels(status=str(RoundStatus.SKIPPED)).inc()
        return RoundReport(round_id, self.clock(), RoundStatus.SKIPPED, (decision,), {}, reason)

    def _round(self) -> RoundReport:
        started = self.clock()
        round_id = self.store.begin_round(started)
        timer = StepTimer()
        began = time.perf_counter()
        try:
            decisions, status = self._steps(round_id, started, timer), RoundStatus.DONE
        except RoundSkipped as skipped:
            decisions, status = [skipped.decision], skipped.status
        except YarnAdaptError as exc:  # the tuner or the store refused: record, go on
            log.error("round %d failed: %s", round_id, exc.one_line())
            decisions, status = self._failed(exc.one_line())
        except Exception as exc:  # a bug: keep its traceback in the log, keep serving
            log.exception("round %d failed unexpectedly", round_id)
            decisions, status = self._failed(f"unexpected {type(exc).__name__}: {exc}")
        with timer.step("record"):
            for decision in decisions:
                log.info("round %d: %s: %s", round_id, decision.kind, decision.reason)
                self.store.record_decision(round_id, decision)
                self.metrics.decisions.labels(kind=str(decision.kind)).inc()
        reason = "; ".join(d.reason for d in decisions)
        self.store.finish_round(round_id, status, reason, timer.timings_s)
        if status is not RoundStatus.FAILED and self.backoff.failures == 0:
            self.store.keep_backup()
        self._count(status, time.perf_counter() - began, timer)
        return RoundReport(round_id, started, status, tuple(decisions), timer.timings_s, reason)

    def _failed(self, why: str) -> tuple[list[Decision], RoundStatus]:
        self.metrics.failure("round")
        return [Decision(DecisionKind.FAILED, " ".join(why.split()))], RoundStatus.FAILED

    def _count(self, status: RoundStatus, seconds: float, timer: StepTimer) -> None:
        self.metrics.rounds.labels(status=str(status)).inc()
        self.metrics.round_seconds.labels(status=str(status)).observe(seconds)
        for step, step_seconds in timer.timings_s.items():
            self.metrics.step_seconds.labels(step=step).observe(step_seconds)

    def _steps(self, round_id: int, started: float, timer: StepTimer) -> list[Decision]:
        with timer.step("observe"):
            observed = self._observe()
        with timer.step("reconcile"):
            if self._reconcile_if_needed():
                # an interrupted apply was finished or rolled back: read what runs now
                observed = self._observe()
        self._check_drift(observed)
        with timer.step("measure"):
            self._measure_realized(observed, started)
            self.record_series(round_id, started, observed)
        cooling = cooling_groups(
            self.store.last_change_per_group(), started, self.settings.tuning.cooldown_s
        )
        with timer.step("propose"):
            suggestion = self.proposer.propose(observed, frozenset(cooling))
        if suggestion is None:
            return [self._untriggered(observed)]
        with timer.step("decide"):
            history = self._group_history(observed)
            plan, verdict = self._decide(round_id, observed, suggestion, cooling, history)
        held: list[Decision] = []
        if plan is None and verdict.held and set(verdict.changed_groups) - _groups(verdict):
            # some groups are held back by their own gates: the others may still move
            held = [Decision(h.kind, h.reason, group=h.group) for h in verdict.held]
            frozen = frozenset(cooling) | _groups(verdict)
            with timer.step("propose-again"):
                suggestion = self.proposer.propose(observed, frozen)
            if suggestion is None:
                return held
            with timer.step("decide-again"):
                plan, verdict = self._decide(round_id, observed, suggestion, cooling, history)
        if plan is None:
            assert verdict.kind is not None
            if verdict.held and not held:
                return [Decision(h.kind, h.reason, group=h.group) for h in verdict.held]
            return [*held, Decision(verdict.kind, verdict.reason)]
        with timer.step("act"):
            acted = self.actuator.act(plan)
        if acted.kind is DecisionKind.APPLIED:
            self._note_version(round_id)
        return [*held, acted]

    def _untriggered(self, observed: Observed) -> Decision:
        """No group was re-tuned: say whether jobs came at all. Jobs that were
        submitted and finished between two rounds leave nothing for a new setting
        to change (the tuner predicts the jobs still in progress)."""
        # the first round has no last one: every finished job the backend reports
        since = self._previous_taken_ms if self._previous_taken_ms is not None else -1
        when = "since the last round" if since >= 0 else "before this first round"
        came = submitted_since(observed.finished, observed.config, since)
        if not came:
            return Decision(DecisionKind.NO_NEW_SUBMISSIONS, f"no job was submitted {when}")
        counts = ", ".join(f"{group} {count}" for group, count in sorted(came.items()))
        reason = (
            f"{sum(came.values())} job(s) submitted {when} ({counts}) all finished before "
            "this round looked: nothing in progress for a new setting to change"
        )
        return Decision(DecisionKind.NOTHING_PENDING, reason)

    def _group_history(self, observed: Observed) -> dict[str, GroupHistory]:
        """The gates' view of each group: its checked predictions and the changes
        applied to it within the oscillation window."""
        now = self.clock()
        window = self.settings.tuning.oscillation_window_s
        recent: list[tuple[str, RecentChange]] = []
        for apply in self.store.applies(limit=RECENT_APPLIES):
            if apply.kind != "apply" or apply.result != "applied" or apply.finished_at is None:
                continue
            if now - apply.finished_at > window:
                continue
            proposal = self.store.proposal(apply.proposal_id)
            for group, own in changes_by_group(proposal.changes, observed.config).items():
                recent += [(group, RecentChange(proposal.id, apply.finished_at, c)) for c in own]
        return group_histories(self.store.prediction_errors(), recent)

    def _observe(self) -> Observed:
        try:
            observed = self.backend.observe()
        except YarnError as exc:
            raise self._rm_unavailable(exc) from exc
        self.backoff.succeeded()
        self.metrics.rm_available.set(1)
        return observed

    def _rm_unavailable(self, exc: YarnError) -> RoundSkipped:
        what = "every RM is a standby" if isinstance(exc, YarnStandby) else "the RM is unreachable"
        delay = self.backoff.failed(f"{what}: {exc.one_line()}")
        self.metrics.rm_available.set(0)
        self.metrics.failure("rm-unavailable")
        reason = f"{what}; no action taken; next try in {delay:g} s ({exc.one_line()})"
        log.warning("round skipped: %s", reason)
        return RoundSkipped(Decision(DecisionKind.RM_UNAVAILABLE, reason), RoundStatus.SKIPPED)

    def _reconcile_if_needed(self) -> bool:
        """Settle interrupted applies (never one running in this process) before
        anything new is proposed or applied; whether there was one to settle."""
        busy = self.in_flight()
        if self.reconciled and not needs_reconcile(self.store, busy):
            return False
        settled = reconcile(self.store, self.backend, busy)
        self.reconciled = True
        return bool(settled)

    def _check_drift(self, observed: Observed) -> None:
        """The RM must run the scheduler file for a proposal to make sense; while an
        apply runs in this process the two legitimately differ for a moment."""
        if self.in_flight():
            return
        self.drift = observed.drift
        if not observed.drift:
            return
        more = f" (and {len(observed.drift) - 1} more)" if len(observed.drift) > 1 else ""
        reason = (
            f"the RM does not run the scheduler file ({self.backend.target}): "
            f"{observed.drift[0]}{more}; no action taken until they agree"
        )
        log.warning("round: %s", reason)
        self.metrics.failure("drift")
        raise RoundSkipped(Decision(DecisionKind.DRIFT, reason), RoundStatus.SKIPPED)

    def _decide(
        self,
        round_id: int,
        observed: Observed,
        suggestion: Suggestion,
        cooling: dict[str, float],
        history: dict[str, GroupHistory],
    ) -> tuple[Plan | None, Verdict]:
        changes = tuple(diff_configs(observed.config, suggestion.config))
        gates = gate_settings(self.settings.tuning)
        moves = group_moves(observed.config, suggestion.config)
        suggestion = replace(suggestion, groups=annotated(suggestion.groups, history, gates, moves))
        verdict = judge(
            suggestion, changes, observed.config, cooling, self.settings.tuning,
            history=history, now=self.clock(),
        )  # fmt: skip
        if not verdict.propose:
            return None, verdict
        draft = self._draft(round_id, observed, suggestion, verdict)
        return Plan(suggestion, verdict, draft), verdict

    def _draft(
        self, round_id: int, observed: Observed, suggestion: Suggestion, verdict: Verdict
    ) -> ProposalRecord:
        return ProposalRecord(
            id=0,
            created_at=0.0,
            updated_at=0.0,
            state=ProposalState.PENDING,
            round_id=round_id,
            target=self.backend.target,
            base_xml=observed.text,
            proposed_xml=observed.render(suggestion.config),
            changes=tuple(diff_configs(observed.config, suggestion.config)),
            groups=suggestion.groups,
            cluster_before_s=suggestion.cluster_before_s,
            cluster_after_s=suggestion.cluster_after_s,
            reasons=suggestion.reasons,
            gate="" if verdict.auto_apply else verdict.reason,
        )

    # ------------------------------------------------------------------ realized

    def _measure_realized(self, observed: Observed, started: float) -> None:
        """One more interval of realized latency for the configuration running now,
        until ``[realized] intervals`` are recorded. The window is from the previous
        observation to this one (the first starts just before the apply)."""
        previous, self._last_taken_ms = self._last_taken_ms, observed.taken_ms
        self._previous_taken_ms = previous
        self._check_predictions(observed)
        running = self.store.latest_applied()
        if running is None or not self._applied_before(running, started):
            return
        measured = self.store.intervals_measured(running.id)
        if measured >= self.settings.realized.intervals:
            return
        interval_ms = int(self.settings.service.interval_s * 1000)
        window = (previous or observed.taken_ms - interval_ms, observed.taken_ms)
        groups = {g.group: g.after_s for g in running.groups}
        by_group = latency_by_group(observed.finished, observed.config, window, groups)
        for group, latency in by_group.items():
            self.store.record_realized(
                RealizedLatency(
                    running.id, group, measured + 1, *window, latency.jobs, latency.mean_s,
                    groups[group],
                )
            )  # fmt: skip

    def _check_predictions(self, observed: Observed) -> None:
        """Check each recent proposal's predictions whose populations finished."""
        for job in observed.finished:
            self._finished[job.id] = job
        if len(self._finished) > FINISHED_KEPT:
            for stale in list(self._finished)[: len(self._finished) - FINISHED_KEPT]:
                del self._finished[stale]
        for proposal in self.store.unchecked_proposals():
            applied = self.store.was_applied(proposal.id)
            for checked in check_proposal(proposal, self._finished, applied):
                self.store.record_prediction_error(checked)

    def _applied_before(self, proposal: ProposalRecord, started: float) -> bool:
        applies = self.store.applies(limit=1, proposal_id=proposal.id)
        finished = applies[0].finished_at if applies else None
        return finished is not None and finished < started

    # ------------------------------------------------------------------ console series

    def record_series(self, round_id: int, started: float, observed: Observed) -> None:
        """What the console draws: each queue's usage, each group's realized mean
        job latency since the previous observation, and the configuration version
        (recorded when it differs from the last one)."""
        previous = getattr(self, "_series_taken_ms", None)
        self._series_taken_ms = observed.taken_ms
        self.store.record_usage(round_id, started, usage_of(observed.view, observed.config))
        interval_ms = int(self.settings.service.interval_s * 1000)
        window = (previous or observed.taken_ms - interval_ms, observed.taken_ms)
        groups = [g.parent for g in groups_of(observed.config)] or ["root"]
        by_group = latency_by_group(observed.finished, observed.config, window, groups)
        self.store.record_group_latency(
            [
                GroupLatencySample(round_id, started, group, latency.jobs, latency.mean_s)
                for group, latency in by_group.items()
            ]
        )
        note_running(self.store, observed.document, at=started, round_id=round_id)

    def _note_version(self, round_id: int) -> None:
        try:
            note_running(self.store, self.backend.document(), round_id=round_id)
        except YarnAdaptError as exc:  # the next round records it
            log.warning("cannot read the configuration just applied: %s", exc.one_line())

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, object]:
        last = self.last_round
        return {
            "mode": str(self.settings.service.mode),
            "interval_s": self.settings.service.interval_s,
            "rm_available": self.backoff.failures == 0,
            "rm_problem": self.backoff.reason,
            "consecutive_failures": self.backoff.failures,
            "drift": list(self.drift),
            "next_round_at": self.next_round_at,
            "last_round": None
            if last is None
            else {
                "id": last.id,
                "status": str(last.status),
                "reason": last.reason,
                "timings_s": last.timings_s,
            },
        }
