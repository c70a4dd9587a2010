"""The proposal state machine (pure): which operator or service action may move a
proposal from which states to which.

::

    pending   --approve-->        approved   --begin-apply-->    applying
    applying  --succeeded-->      applied    (the RM reports the new values)
    applying  --refused-->        failed     (the RM refused; the old config runs again)
    applying  --not-started-->    approved   (the RM could not be read; nothing written)
    applying  --stale-->          superseded (the running config changed meanwhile)
    applied   --begin-rollback--> rolling-back --succeeded--> rolled-back
    rolling-back --refused-->     applied
    applying / rolling-back --rollback failed--> needs-operator
    pending / approved --reject--> rejected ; --supersede--> superseded

The store performs each transition as one ``UPDATE ... WHERE state IN (...)`` inside
a transaction, so two approvals (two browser tabs, a retried request) cannot both
win: the second finds the proposal no longer pending and gets a
:class:`~yarn_adapt.errors.ProposalStateError`.
"""

from __future__ import annotations

from enum import StrEnum

from yarn_adapt.service.state.records import ProposalState as S


class Action(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    BEGIN_APPLY = "begin-apply"
    APPLY_SUCCEEDED = "apply-succeeded"
    APPLY_REFUSED = "apply-refused"
    APPLY_NOT_STARTED = "apply-not-started"
    APPLY_STALE = "apply-stale"
    NEEDS_OPERATOR = "needs-operator"
    SUPERSEDE = "supersede"
    BEGIN_ROLLBACK = "begin-rollback"
    ROLLBACK_SUCCEEDED = "rollback-succeeded"
    ROLLBACK_REFUSED = "rollback-refused"


TRANSITIONS: dict[Action, tuple[frozenset[S], S]] = {
    Action.APPROVE: (frozenset({S.PENDING}), S.APPROVED),
    Action.REJECT: (frozenset({S.PENDING, S.APPROVED}), S.REJECTED),
    Action.BEGIN_APPLY: (frozenset({S.APPROVED}), S.APPLYING),
    Action.APPLY_SUCCEEDED: (frozenset({S.APPLYING}), S.APPLIED),
    Action.APPLY_REFUSED: (frozenset({S.APPLYING}), S.FAILED),
    Action.APPLY_NOT_STARTED: (frozenset({S.APPLYING}), S.APPROVED),
    Action.APPLY_STALE: (frozenset({S.APPLYING}), S.SUPERSEDED),
    Action.NEEDS_OPERATOR: (frozenset({S.APPLYING, S.ROLLING_BACK}), S.NEEDS_OPERATOR),
    Action.SUPERSEDE: (frozenset({S.PENDING, S.APPROVED}), S.SUPERSEDED),
    Action.BEGIN_ROLLBACK: (frozenset({S.APPLIED}), S.ROLLING_BACK),
    Action.ROLLBACK_SUCCEEDED: (frozenset({S.ROLLING_BACK}), S.ROLLED_BACK),
    Action.ROLLBACK_REFUSED: (frozenset({S.ROLLING_BACK}), S.APPLIED),
}

# What an operator reads when an action does not fit the state.
_NEEDS = {
    Action.APPROVE: "only a pending proposal can be approved",
    Action.REJECT: "only a pending or approved proposal can be rejected",
    Action.BEGIN_APPLY: "only an approved proposal can be applied",
    Action.BEGIN_ROLLBACK: "only an applied proposal can be rolled back",
    Action.SUPERSEDE: "only a pending or approved proposal can be superseded",
}


def allowed_from(action: Action) -> frozenset[S]:
    return TRANSITIONS[action][0]


def target_of(action: Action) -> S:
    return TRANSITIONS[action][1]


def can(action: Action, state: S) -> bool:
    return state in allowed_from(action)


def refusal(action: Action, proposal_id: int, state: S) -> str:
    """One line: why ``action`` does not apply to a proposal in ``state``."""
    needs = _NEEDS.get(action, f"{action} needs one of {sorted(allowed_from(action))}")
    return f"proposal {proposal_id} is {state}: {needs}"


def operator_actions(state: S) -> tuple[Action, ...]:
    """The buttons the page shows for a proposal in ``state``."""
    offered = (Action.APPROVE, Action.REJECT, Action.BEGIN_APPLY, Action.BEGIN_ROLLBACK)
    return tuple(action for action in offered if can(action, state))
