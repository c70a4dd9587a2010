"""What a round does with a proposal that passed the gates, by mode. The mode picks
the actuator once, at start (:func:`actuator_for`); nothing else in the service asks
which mode it runs in.

- :class:`ObserveOnly` -- records what it would propose; stores and changes nothing.
- :class:`Recommend` -- stores the proposal for an operator (read-only toward the
  cluster); with ``auto_approve`` it approves it at once, as the demo does, but
  only when it fits the change budget.
- :class:`Enforce` -- stores it and applies it through the real applier when the
  change budget allows; otherwise it waits for an operator, with the reason.

Nothing over the change budget is ever applied unattended: both auto-approve and
enforce leave such a proposal pending, with the budget it exceeds as its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from yarn_adapt.service.loop.desk import ProposalDesk
from yarn_adapt.service.loop.hysteresis import Verdict
from yarn_adapt.service.metrics import ServiceMetrics
from yarn_adapt.service.settings import Mode
from yarn_adapt.service.state.records import (
    Decision,
    DecisionKind,
    ProposalRecord,
    ProposalState,
    Suggestion,
)
from yarn_adapt.service.state.store import Store


@dataclass(frozen=True)
class Plan:
    """A suggestion that passed the gates, and the proposal record it becomes."""

    suggestion: Suggestion
    verdict: Verdict
    draft: ProposalRecord


class Actuator(Protocol):
    def act(self, plan: Plan) -> Decision: ...


class ObserveOnly:
    def act(self, plan: Plan) -> Decision:
        return Decision(
            DecisionKind.OBSERVED,
            f"would propose {len(plan.draft.changes)} changes ({plan.verdict.reason}); "
            "observe mode changes nothing",
        )


class Recommend:
    def __init__(
        self, store: Store, desk: ProposalDesk, metrics: ServiceMetrics, auto_approve: bool
    ) -> None:
        self.store = store
        self.desk = desk
        self.metrics = metrics
        self.auto_approve = auto_approve

    def act(self, plan: Plan) -> Decision:
        proposal = store_proposal(self.store, self.metrics, plan)
        if not self.auto_approve:
            return Decision(
                DecisionKind.PROPOSED, f"stored for review: {plan.verdict.reason}", proposal.id
            )
        if not plan.verdict.auto_apply:
            reason = f"auto-approve holds it for an operator: {plan.verdict.reason}"
            return Decision(DecisionKind.NOT_APPLIED, reason, proposal.id)
        return approved(self.desk, proposal, "auto-approve", plan.verdict.reason)


class Enforce:
    def __init__(self, store: Store, desk: ProposalDesk, metrics: ServiceMetrics) -> None:
        self.store = store
        self.desk = desk
        self.metrics = metrics

    def act(self, plan: Plan) -> Decision:
        proposal = store_proposal(self.store, self.metrics, plan)
        if not plan.verdict.auto_apply:
            reason = f"waits for an operator: {plan.verdict.reason}"
            return Decision(DecisionKind.NOT_APPLIED, reason, proposal.id)
        return approved(self.desk, proposal, "service (enforce)", plan.verdict.reason)


def store_proposal(store: Store, metrics: ServiceMetrics, plan: Plan) -> ProposalRecord:
    proposal = store.create_proposal(plan.draft, plan.verdict.changed_groups)
    metrics.proposals.inc()
    return proposal


def approved(desk: ProposalDesk, proposal: ProposalRecord, actor: str, why: str) -> Decision:
    result = desk.approve(proposal.id, actor)
    if result.state is ProposalState.APPLIED:
        return Decision(DecisionKind.APPLIED, f"applied by {actor}: {why}", proposal.id)
    why_not = f"{actor} could not apply it ({result.state}): {result.note}"
    return Decision(DecisionKind.FAILED, why_not, proposal.id)


def actuator_for(
    mode: Mode, store: Store, desk: ProposalDesk, metrics: ServiceMetrics, *, auto_approve: bool
) -> Actuator:
    actuators: dict[Mode, Actuator] = {
        Mode.OBSERVE: ObserveOnly(),
        Mode.RECOMMEND: Recommend(store, desk, metrics, auto_approve),
        Mode.ENFORCE: Enforce(store, desk, metrics),
    }
    return actuators[mode]
