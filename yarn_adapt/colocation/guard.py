"""One cycle of the co-location guard, and what it keeps between cycles.

A cycle: follow the nodes (the journal drops what is no longer the guard's: a node
whole again, changed outside the guard, back under a new id -- each said in the audit
log) -> observe (the nodes, risk, path times and QoS from the trace store, the demand
bound) -> decide (pure, by policy) -> act (``auto`` only: each changed node through the
actuator) -> record. The service runs it on its own clock, every ``[colocation]
period_s`` (``yarn_adapt.service.guard.GuardLoop``), apart from the configurator's
round; the testbed and its benchmark run exactly this class.

By mode: ``off`` decides nothing and gives back every node the guard changed;
``recommend`` decides and records, changes nothing (the page shows what it would do);
``auto`` acts, and serves each node agent its reclaim request. Leaving ``auto`` (to
``off`` or ``recommend``), :meth:`ColocationGuard.stop` and
:meth:`ColocationGuard.give_back` (the loop's error budget) give every node back.
``auto`` is refused with ``min_visible_fraction = 0``: the guard never empties a node.

Reclaim requests (``GET /api/agent/nodes/{node}/reclaim``) come from the same
decision: what batch uses on the node above the total it now has, counted from no
lower than the floor -- never more than batch uses above the target, and with a floor
never all of it. A request asks the agent to squeeze batch containers by that much;
the guard never asks for a kill (an agent kills only where its own ``[yarn] kill``
allows it). A new amount for a node gets a new ``generation`` (milliseconds since the
epoch, so it keeps growing across restarts), logged with what it asks. A request
expires on the guard's clock: one decided more than ``reclaim_ttl_s`` ago (the cycles
stopped deciding) is no longer served, and an agent that stops hearing from the
service lets it expire after ``ttl_s`` and gives the resources back gradually.

What the tuner needs of the guard, per node -- its real capacity, what batch may see
and what is kept for the latency-critical services -- is
:meth:`ColocationGuard.allowances` (from the last cycle) and, for the capacity alone,
``actuator.journalled()`` / ``actuator.pending_nodes()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from yarn_adapt.colocation.actuate import ActOutcome, Actuator, Result
from yarn_adapt.colocation.decide import decide, reclaim_above, visible_floor
from yarn_adapt.colocation.follow import Followed, JournalChange, words
from yarn_adapt.colocation.model import (
    Action,
    GuardMode,
    GuardPlan,
    GuardSettings,
    NodeDecision,
    NodeDemand,
    NodeMemory,
    QosReading,
)
from yarn_adapt.colocation.observe import GuardObserver
from yarn_adapt.errors import InputError
from yarn_adapt.model import Node, Resources

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReclaimRequest:
    """What one node's agent is asked to hold back from batch now: batch's use above
    what it may see (``batch_used`` above ``visible``, the node's total or the floor,
    whichever is larger) -- a squeeze, never a kill order."""

    node_id: str
    generation: int
    cpu_millicores: int
    memory_mb: int
    ttl_s: float
    decided_at_s: float
    qos: QosReading | None = None
    batch_used: Resources | None = None
    visible: Resources | None = None

    def asks(self) -> str:
        """What the request asks, in words (the log line of a new generation)."""
        if self.cpu_millicores == 0 and self.memory_mb == 0:
            return f"{self.node_id}: nothing to reclaim"
        basis = ""
        if self.batch_used is not None and self.visible is not None:
            basis = f" (batch uses {words(self.batch_used)}, may see {words(self.visible)})"
        return (
            f"{self.node_id}: squeeze batch by {self.cpu_millicores} millicores / "
            f"{self.memory_mb} MB{basis}; no kill is asked"
        )

    def to_json(self) -> dict[str, object]:
        """The agent's contract (``preemption/targets.py``): its keys only -- the agent
        refuses any other."""
        body: dict[str, object] = {
            "node": self.node_id,
            "generation": self.generation,
            "reclaim": {"cpu_millicores": self.cpu_millicores, "memory_mb": self.memory_mb},
            "ttl_s": self.ttl_s,
        }
        if self.qos is not None:
            body["qos"] = _qos_json(self.qos)
        return body


def _qos_json(reading: QosReading) -> dict[str, object]:
    body: dict[str, object] = {
        "service": reading.application,
        "latency_ms": round(reading.latency_ms, 3),
        "load": round(reading.load_rps, 3),
        "measured_at": reading.measured_at_s,
    }
    if reading.target_ms is not None:
        body["target_ms"] = reading.target_ms
        body["satisfied"] = not reading.violated
    return body


@dataclass(frozen=True)
class GuardRoundReport:
    at_s: float
    mode: GuardMode
    plan: GuardPlan | None
    outcomes: Mapping[str, ActOutcome] = field(default_factory=dict)
    restored: tuple[ActOutcome, ...] = ()
    problem: str = ""  # why the risk could not be used, if it could not
    seconds: float = 0.0
    cycle: int | None = None  # the caller's number for the round (the service's cycle)

    def summary(self) -> str:
        if self.plan is None:
            back = f"; {len(self.restored)} node(s) given back" if self.restored else ""
            return f"guard {self.mode}{back}"
        slack = "; ".join(
            f"{a.application} slack {a.slack_ratio:.0%} ({a.state})" for a in self.plan.applications
        )
        changed = [
            f"{d.node_id} {d.action} to {d.target.memory_mb} MB/{d.target.vcores} vcores"
            f" ({self.outcomes[d.node_id].result if d.node_id in self.outcomes else 'not acted'})"
            for d in self.plan.changes
        ]
        acted = "; ".join(changed) if changed else "no node changes"
        problem = f" (risk: {self.problem})" if self.problem else ""
        return f"guard {self.mode}: {acted}" + (f" [{slack}]" if slack else "") + problem


@dataclass(frozen=True)
class NodeAllowance:
    """One node as the guard leaves it to the tuner after a cycle: its real capacity
    (the journalled original, else what the RM reports), the total the scheduler
    sees (what batch may be given), what is kept for the latency-critical services,
    and the demand bound the guard used."""

    node_id: str
    capacity: Resources
    total: Resources  # what the scheduler sees after the cycle
    target: Resources  # what the guard decided (acted on in auto; recommended otherwise)
    demand: NodeDemand | None
    decided_at_s: float
    mode: GuardMode

    @property
    def reserved(self) -> Resources:
        """The real capacity batch may not be given: ``capacity - total``."""
        return (self.capacity - self.total).clamped()


class GuardRecorder(Protocol):
    def record(self, round_id: int | None, report: GuardRoundReport) -> None: ...

    def audit(self, action: str, detail: str) -> None: ...


class MemoryRecorder:
    """Keeps the reports in a list (the testbed; tests)."""

    def __init__(self) -> None:
        self.reports: list[GuardRoundReport] = []
        self.audit_log: list[tuple[str, str]] = []

    def record(self, round_id: int | None, report: GuardRoundReport) -> None:
        self.reports.append(report)

    def audit(self, action: str, detail: str) -> None:
        self.audit_log.append((action, detail))


class ColocationGuard:
    def __init__(
        self,
        settings: GuardSettings,
        observer: GuardObserver,
        actuator: Actuator,
        recorder: GuardRecorder,
        *,
        mode: GuardMode = GuardMode.RECOMMEND,
        reclaim_ttl_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.observer = observer
        self.actuator = actuator
        self.recorder = recorder
        self.reclaim_ttl_s = reclaim_ttl_s
        self.clock = clock
        _check_mode(mode, settings)
        self._mode = mode
        self._memory: dict[str, NodeMemory] = {}
        self._reclaims: dict[str, ReclaimRequest] = {}
        self._lock = threading.RLock()  # rounds, mode switches and stop never interleave
        self.last_report: GuardRoundReport | None = None
        self.counts: dict[tuple[str, str], int] = {}
        self.repushes: dict[str, int] = {}  # per node: totals YARN forgot, pushed again
        # per node: at most how long its throttle was missing before it was pushed again
        # (since the last cycle that saw the node at the guard's total)
        self.repush_gap_s: dict[str, float] = {}
        self._held_seen_at_s: dict[str, float] = {}
        # when the guard last changed a node (acted or gave back): nodes read before
        # then are stale to it
        self.last_change_at_s: float | None = None

    @property
    def mode(self) -> GuardMode:
        return self._mode

    # ------------------------------------------------------------------ rounds

    def run_round(self, nodes: Sequence[Node], round_id: int | None = None) -> GuardRoundReport:
        with self._lock:
            began = time.perf_counter()
            if self._mode is GuardMode.OFF:
                report = GuardRoundReport(
                    self.clock(), self._mode, None, restored=self._give_back()
                )
            else:
                report = self._decide_and_act(nodes)
            report = replace(report, seconds=round(time.perf_counter() - began, 4), cycle=round_id)
            self.last_report = report
            self.recorder.record(round_id, report)
            return report

    def _decide_and_act(self, nodes: Sequence[Node]) -> GuardRoundReport:
        followed = self.actuator.follow(nodes)
        for change in followed:
            self._audit_followed(change)
        nodes = _as_pushed_again(nodes, followed)
        self._note_held(nodes)
        inputs = self.observer.inputs(nodes, self.actuator.journalled())
        plan = decide(inputs, self._memory, self.settings)
        restored: tuple[ActOutcome, ...] = ()
        outcomes: dict[str, ActOutcome] = {}
        if self._mode is GuardMode.AUTO:
            outcomes = self._act(plan)
            self._reclaims = self._reclaim_requests(plan, outcomes)
        else:
            restored = self._give_back()
        return GuardRoundReport(plan.decided_at_s, self._mode, plan, outcomes, restored,
                                inputs.risk_problem)  # fmt: skip

    def _act(self, plan: GuardPlan) -> dict[str, ActOutcome]:
        outcomes = self.actuator.act(plan)
        if outcomes:
            self.last_change_at_s = self.clock()
        for decision in plan.decisions:
            outcome = outcomes.get(decision.node_id)
            if outcome is None:
                continue
            self._count(str(decision.action), str(outcome.result))
            self._remember(decision, outcome, plan.decided_at_s)
            self._audit(decision, outcome)
        return outcomes

    def _remember(self, decision: NodeDecision, outcome: ActOutcome, at_s: float) -> None:
        if outcome.result is not Result.DONE:
            return
        self._held_seen_at_s[decision.node_id] = self.clock()
        before = self._memory.get(decision.node_id, NodeMemory())
        self._memory[decision.node_id] = before.after(decision, at_s)

    def _audit(self, decision: NodeDecision, outcome: ActOutcome) -> None:
        detail = (
            f"{decision.node_id}: {_amount(decision.current)} -> {_amount(decision.target)}: "
            f"{outcome.result}: {outcome.status} (why: {decision.reason})"
        )
        self.recorder.audit(f"guard {decision.action} node", detail)
        log.info("guard: %s", detail)

    def _note_held(self, nodes: Sequence[Node]) -> None:
        """When each journalled node was last seen at the total the guard set."""
        journalled = self.actuator.journalled()
        now = self.clock()
        for node in nodes:
            entry = journalled.get(node.id)
            if entry is not None and entry.last_set == node.total:
                self._held_seen_at_s[node.id] = now

    def _audit_followed(self, change: JournalChange) -> None:
        if change.followed is Followed.RM_RESTARTED:
            self.recorder.audit("guard sees a new ResourceManager", change.detail)
            return
        detail = f"{change.node_id}: {change.followed}: {change.detail}"
        if change.followed is Followed.FORGOTTEN:
            self.repushes[change.node_id] = self.repushes.get(change.node_id, 0) + 1
            held_at = self._held_seen_at_s.get(change.node_id)
            if held_at is not None:
                self.repush_gap_s[change.node_id] = round(self.clock() - held_at, 3)
            self.recorder.audit("guard pushes a forgotten total again", detail)
            return
        if change.followed is not Followed.WHOLE:
            detail += "; the journal no longer holds its old original"
        self.recorder.audit("guard journal follows node", detail)

    def _reclaim_requests(
        self, plan: GuardPlan, outcomes: Mapping[str, ActOutcome]
    ) -> dict[str, ReclaimRequest]:
        requests: dict[str, ReclaimRequest] = {}
        for decision in plan.decisions:
            if decision.action is Action.SKIP:
                continue
            request = self._reclaim_request(decision, outcomes.get(decision.node_id), plan)
            requests[decision.node_id] = request
        return requests

    def _reclaim_request(
        self, decision: NodeDecision, outcome: ActOutcome | None, plan: GuardPlan
    ) -> ReclaimRequest:
        """Batch's use above the total the node has after the round (the target once
        it is set, else the one it kept), never counted from below the floor."""
        total = decision.target if outcome is None or outcome.ok else decision.current
        floor = visible_floor(decision.capacity, self.settings)
        reclaim = reclaim_above(decision.used, total, floor)
        millicores = reclaim.vcores * self.settings.millicores_per_vcore
        previous = self._reclaims.get(decision.node_id)
        same = previous is not None and (previous.cpu_millicores, previous.memory_mb) == (
            millicores,
            reclaim.memory_mb,
        )
        request = ReclaimRequest(
            node_id=decision.node_id,
            generation=previous.generation if same and previous else int(plan.decided_at_s * 1000),
            cpu_millicores=millicores,
            memory_mb=reclaim.memory_mb,
            ttl_s=self.reclaim_ttl_s,
            decided_at_s=plan.decided_at_s,
            qos=decision.qos,
            batch_used=decision.used,
            visible=total.component_max(floor),
        )
        if not same and (previous is not None or millicores or reclaim.memory_mb):
            log.info("guard: reclaim request %d for %s", request.generation, request.asks())
        return request

    # ------------------------------------------------------------------ mode, stop

    def set_mode(self, mode: GuardMode, actor: str) -> list[ActOutcome]:
        """Switch modes; leaving ``auto`` gives every node back at once."""
        _check_mode(mode, self.settings)
        with self._lock:
            previous, self._mode = self._mode, mode
            self.recorder.audit("guard mode", f"{actor}: {previous} -> {mode}")
            return list(self._give_back()) if mode is not GuardMode.AUTO else []

    def stop(self) -> list[ActOutcome]:
        """Every node the guard changed back to its original total."""
        with self._lock:
            return list(self._give_back())

    def give_back(self, why: str) -> list[ActOutcome]:
        """Every node back now, the mode kept (the loop's error budget): the next
        cycle that succeeds decides afresh."""
        with self._lock:
            if not self.actuator.pending_nodes():
                return []
            self.recorder.audit("guard gives every node back", why)
            log.warning("guard: giving every node back: %s", why)
            return list(self._give_back())

    def close(self) -> None:
        """Release the trace store connection (the RM client belongs to the caller)."""
        self.observer.close()

    def _give_back(self) -> tuple[ActOutcome, ...]:
        self._reclaims = {}
        self._memory = {}
        if not self.actuator.pending_nodes():
            return ()
        outcomes = tuple(self.actuator.restore_all())
        self.last_change_at_s = self.clock()
        for outcome in outcomes:
            self._count("restore", str(outcome.result))
            self.recorder.audit("guard restore node", f"{outcome.node_id}: {outcome.status}")
            log.info("guard: gave back %s: %s", outcome.node_id, outcome.status)
        return outcomes

    def _count(self, action: str, result: str) -> None:
        self.counts[(action, result)] = self.counts.get((action, result), 0) + 1

    # ------------------------------------------------------------------ reading

    def reclaim_for(self, node_id: str) -> ReclaimRequest | None:
        """The node's current request (``auto`` only); None: nothing asked, or the
        last one was decided more than ``reclaim_ttl_s`` ago (the guard's clock)."""
        if self._mode is not GuardMode.AUTO:
            return None
        request = self._reclaims.get(node_id)
        if request is None or self.clock() - request.decided_at_s > self.reclaim_ttl_s:
            return None
        return request

    def allowances(self) -> dict[str, NodeAllowance]:
        """Per node of the last cycle that decided: real capacity, what the scheduler
        sees, what is kept for the services (``reserved``), the demand bound."""
        report = self.last_report
        if report is None or report.plan is None:
            return {}
        return {
            d.node_id: NodeAllowance(d.node_id, d.capacity, _effective_total(report, d),
                                     d.target, d.demand, report.at_s, report.mode)
            for d in report.plan.decisions
        }  # fmt: skip


def _as_pushed_again(nodes: Sequence[Node], followed: Sequence[JournalChange]) -> list[Node]:
    """``nodes`` with the totals of the nodes just pushed again (the list was read
    before): the decision starts from what the node has now."""
    pushed = {
        c.node_id: c.total
        for c in followed
        if c.followed is Followed.FORGOTTEN and c.total is not None
    }
    return [replace(n, total=pushed[n.id]) if n.id in pushed else n for n in nodes]


def _effective_total(report: GuardRoundReport, decision: NodeDecision) -> Resources:
    """What the scheduler sees after the cycle: the target when it was set."""
    outcome = report.outcomes.get(decision.node_id)
    return decision.target if outcome is not None and outcome.ok else decision.current


def _amount(resources: Resources) -> str:
    return f"{resources.memory_mb} MB/{resources.vcores} vcores"


def _check_mode(mode: GuardMode, settings: GuardSettings) -> None:
    """``auto`` never runs without a floor: it would empty the riskiest node."""
    if mode is GuardMode.AUTO and settings.min_visible_fraction <= 0:
        raise InputError(
            "co-location guard: mode auto needs [colocation] min_visible_fraction above 0 "
            "(0 empties the riskiest node); set it (e.g. 0.25) and restart, or stay in "
            "recommend"
        )
