"""What the service decides, stores and shows: frozen records, no behaviour beyond
small derived properties.

A :class:`Suggestion` is what a proposer hands the service (the tuner's proposal in
the service's terms); a :class:`ProposalRecord` is a suggestion stored for review,
with its state; a :class:`Decision` is what a round did and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from yarn_adapt.model import SchedulerConfig
from yarn_adapt.yarn.confxml import ConfigChange


@dataclass(frozen=True)
class GroupPrediction:
    """Predicted mean job latency of one group (a parent queue and its leaves)
    under the running configuration and under the proposed one."""

    group: str
    before_s: float
    after_s: float
    jobs: int = 0
    # The evidence behind the prediction (shown on the proposal's page): the jobs
    # that triggered the group (at most EVIDENCE_JOBS ids), the band the proposed
    # latency lies in when every task runs as much shorter / longer as the task-time
    # model typically errs, and the estimator that made the task times.
    job_ids: tuple[str, ...] = ()
    after_low_s: float | None = None
    after_high_s: float | None = None
    estimator: str = ""
    # What the prediction is checked against and how sure it is: the ids of every
    # job it is about (the group's jobs in progress when the tuner looked, whose
    # mean latency, submission to finish, it predicts), where the interval
    # [after_low_s, after_high_s] comes from ("comparator samples", "model error"),
    # the best setting the tuner found even when it kept the running one (None when
    # unknown), and the gain the gates asked of this group (0 when not judged).
    population: tuple[str, ...] = ()
    interval_source: str = ""
    found_s: float | None = None
    required_gain: float = 0.0

    def __post_init__(self) -> None:
        # stored as JSON, read back as a list
        object.__setattr__(self, "job_ids", tuple(self.job_ids))
        object.__setattr__(self, "population", tuple(self.population))

    @property
    def improvement(self) -> float:
        """Relative reduction, 0.25 = 25 % faster; 0 when nothing is known."""
        return relative_improvement(self.before_s, self.after_s)


def relative_improvement(before_s: float, after_s: float) -> float:
    """Relative latency reduction; 1.0 when jobs that would starve now finish, 0.0
    when either side is unknown."""
    if math.isnan(before_s) or math.isnan(after_s) or before_s <= 0:
        return 0.0
    if math.isinf(before_s):
        return 1.0 if math.isfinite(after_s) else 0.0
    if math.isinf(after_s):
        return -1.0
    return (before_s - after_s) / before_s


@dataclass(frozen=True)
class ObjectiveChange:
    """A proposer's own objective (higher is better), e.g. Cilantro's predicted
    social welfare, under the running and the proposed configuration."""

    name: str
    before: float
    after: float

    @property
    def improvement(self) -> float:
        if not (math.isfinite(self.before) and math.isfinite(self.after)):
            return 0.0
        return (self.after - self.before) / max(abs(self.before), 1e-9)

    def describe(self) -> str:
        return f"{self.name} {self.before:.3f} -> {self.after:.3f} ({self.improvement:+.1%})"


@dataclass(frozen=True)
class Suggestion:
    """A proposer's answer: the configuration it proposes, its predictions and the
    reason for each change. ``triggered`` are the groups that were re-tuned.
    ``objective``: a proposer that optimises something other than mean job latency
    states it here, and the gates judge the suggestion by it."""

    config: SchedulerConfig
    groups: tuple[GroupPrediction, ...]
    cluster_before_s: float
    cluster_after_s: float
    reasons: tuple[str, ...] = ()
    triggered: tuple[str, ...] = ()
    objective: ObjectiveChange | None = None

    @property
    def improvement(self) -> float:
        if self.objective is not None:
            return self.objective.improvement
        return relative_improvement(self.cluster_before_s, self.cluster_after_s)


class ProposalState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    APPLYING = "applying"
    APPLIED = "applied"
    REJECTED = "rejected"
    FAILED = "failed"
    SUPERSEDED = "superseded"
    ROLLING_BACK = "rolling-back"
    ROLLED_BACK = "rolled-back"
    NEEDS_OPERATOR = "needs-operator"


@dataclass(frozen=True)
class ProposalRecord:
    """A stored proposal. ``base_xml`` is the scheduler file as it was when the
    proposal was made, ``proposed_xml`` the file the proposal would write (the XML
    diff is between the two); ``changes`` the per-queue property diff."""

    id: int
    created_at: float
    updated_at: float
    state: ProposalState
    round_id: int | None
    target: str
    base_xml: str
    proposed_xml: str
    changes: tuple[ConfigChange, ...]
    groups: tuple[GroupPrediction, ...]
    cluster_before_s: float
    cluster_after_s: float
    reasons: tuple[str, ...]
    gate: str = ""
    apply_id: str = ""
    note: str = ""

    @property
    def improvement(self) -> float:
        return relative_improvement(self.cluster_before_s, self.cluster_after_s)


class DecisionKind(StrEnum):
    OBSERVED = "observed"  # observe mode: what would have been proposed
    PROPOSED = "proposed"  # stored for review
    APPLIED = "applied"
    NOT_APPLIED = "not-applied"  # enforce mode: a gate held it back for an operator
    NO_CHANGE = "no-change"  # the tuner proposes what runs already
    BELOW_THRESHOLD = "below-threshold"
    COOLDOWN = "cooldown"
    NOTHING_TRIGGERED = "nothing-triggered"  # older rounds: no group was triggered
    NO_NEW_SUBMISSIONS = "no-new-submissions"  # no job submitted in the interval
    NOTHING_PENDING = "nothing-pending"  # jobs came, but all finished before the round
    INSUFFICIENT_EVIDENCE = "insufficient-evidence"  # too few jobs behind a move
    OSCILLATION_GUARD = "oscillation-guard"  # undoes a recent change without the gain
    RM_UNAVAILABLE = "rm-unavailable"
    BUSY = "busy"  # the previous round was still running
    DRIFT = "drift"  # the RM does not run the scheduler file; no action taken
    FAILED = "failed"
    GUARD = "guard"  # what the co-location guard did this round


@dataclass(frozen=True)
class Decision:
    kind: DecisionKind
    reason: str
    proposal_id: int | None = None
    group: str = ""


class RoundStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    SKIPPED = "skipped"  # the RM could not be read, or a round was still running
    FAILED = "failed"


@dataclass(frozen=True)
class RoundReport:
    id: int
    started_at: float
    status: RoundStatus
    decisions: tuple[Decision, ...] = ()
    timings_s: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    @property
    def proposal_ids(self) -> tuple[int, ...]:
        return tuple(d.proposal_id for d in self.decisions if d.proposal_id is not None)


@dataclass(frozen=True)
class ApplyRecord:
    """One attempt to make the RM run a configuration (an apply or a rollback)."""

    id: int
    proposal_id: int
    apply_id: str
    kind: str  # "apply" | "rollback"
    actor: str
    started_at: float
    finished_at: float | None
    result: str
    detail: str
    config_xml: str
    reason: str = ""  # why the operator asked for it ("" for the service's own)


@dataclass(frozen=True)
class RealizedLatency:
    """The mean job latency a group showed in one interval after an apply, beside
    what the proposal predicted for it."""

    proposal_id: int
    group: str
    interval: int
    window_start_ms: int
    window_end_ms: int
    jobs: int
    mean_s: float | None
    predicted_s: float


@dataclass(frozen=True)
class PredictionError:
    """One proposal's prediction for one group checked on the same population: the
    jobs it was about, once they finished (``finished`` of ``jobs``). ``config`` is
    "proposed" when the proposal was applied before they were measured (its
    ``after_s`` is checked), "running" when it was not (its ``before_s`` is: the
    configuration that ran). ``error`` = |predicted - realised| / realised."""

    proposal_id: int
    group: str
    config: str
    predicted_s: float
    low_s: float | None
    high_s: float | None
    realised_s: float
    jobs: int
    finished: int
    window_start_s: float
    window_end_s: float
    error: float

    @property
    def inside(self) -> bool | None:
        """Whether the realised latency fell inside the prediction's interval."""
        if self.low_s is None or self.high_s is None:
            return None
        return self.low_s <= self.realised_s <= self.high_s


@dataclass(frozen=True)
class AuditEntry:
    at: float
    actor: str
    action: str
    proposal_id: int | None
    detail: str
    reason: str = ""  # the operator's own words, when they gave some

    @property
    def kind(self) -> AuditKind:
        return audit_kind(self.action)


class AuditKind(StrEnum):
    """What part of the service an audit entry is about: one log, four kinds."""

    PROPOSAL = "proposal"  # the configurator's: propose, approve, reject, apply, rollback
    DRIFT = "drift"  # the scheduler file changed outside the service (reconcile)
    GUARD = "guard"  # the co-location guard: node totals, its mode, RM restarts
    ACCESS = "access"  # operator and agent tokens issued or revoked


def audit_kind(action: str) -> AuditKind:
    """The kind of an entry by its action (every action the service writes has one)."""
    if action.startswith("guard"):
        return AuditKind.GUARD
    if action == "reconcile":
        return AuditKind.DRIFT
    if action.endswith(" token"):
        return AuditKind.ACCESS
    return AuditKind.PROPOSAL


@dataclass(frozen=True, kw_only=True)
class OperatorTokenRecord:
    """A named operator's token as stored: never the token, only its digest
    (:mod:`yarn_adapt.service.web.operators`)."""

    token_id: str
    name: str
    sha256: str = field(repr=False)
    issued_at: float
    issued_by: str


@dataclass(frozen=True, kw_only=True)
class AgentTokenRecord:
    """One node's token as stored: never the token, only its digest."""

    token_id: str
    node: str
    sha256: str = field(repr=False)
    issued_at: float
    issued_by: str


@dataclass(frozen=True)
class RecentChange:
    """A change applied at ``at`` (the clock the gates judge ``now`` in)."""

    proposal_id: int
    at: float
    change: ConfigChange


@dataclass(frozen=True)
class GroupHistory:
    """What earlier rounds say about a group: its checked predictions' relative
    errors (oldest first) and the changes applied to it recently."""

    errors: tuple[float, ...] = ()
    recent: tuple[RecentChange, ...] = ()
