"""The co-location guard's frozen data: what one observation saw per node, what the
guard remembers between rounds, and the plan it decides (one decision per node, each
with its reason).

Resources are YARN's two dimensions (:class:`~yarn_adapt.model.Resources`, memory in
MiB and vcores). A node's *capacity* is its real total -- the one journalled before
the guard first changed it, else what the RM reports; a total the guard did not set
is the node's capacity from then on (``capacity`` follows the node) -- and its
*total* is what the scheduler sees now. Everything here is plain data:
:mod:`yarn_adapt.colocation.decide` reads it without touching the RM, Redis or the
file system.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from tracing.model import RiskSnapshot
from yarn_adapt.demand.model import Demand
from yarn_adapt.model import Resources

# Batch always sees at least this share of a node (Koordinator keeps a floor for batch
# too): the riskiest node has normalised risk 1 however small its lead, so without a
# floor nu = 1 would empty it and the agent would be asked to reclaim everything batch
# runs there. A quarter leaves every node schedulable (on a 4-vcore / 4 GB node: 1
# vcore, 1 GB, YARN's default minimum allocation) while the guard can still take three
# quarters of it away from batch.
DEFAULT_MIN_VISIBLE_FRACTION = 0.25

# The raw node risk R_n (tracing/risk.py, before min-max normalising) under which a
# node is not throttled at all. R_n sums r_k = alpha WSP_k + (1 - alpha) WFP_k over the
# services on the node: WSP_k is k's share of the critical services' sojourn (the
# shares add up to 1 over the window), WFP_k the fraction of k's requests that failed.
# With the default alpha = 0.5, R_n < 0.05 is a node whose services' share of the
# critical path plus their failed fraction stays under 10 %: throttling it can buy the
# application little, while normalising would make the larger of two such crumbs
# (0.0011 against 0.0010) a risk of 1.
DEFAULT_MIN_RAW_RISK = 0.05

# The slack policy's watermarks on an application's slack, 1 - P95 / target: above the
# high one batch may see more, below the low one it must give way (Heracles grows
# batch only above 10 % slack and takes cores back below 5 %; a wider band keeps the
# guard from see-sawing on the noise of a short window's P95).
DEFAULT_LOW_SLACK_RATIO = 0.1
DEFAULT_HIGH_SLACK_RATIO = 0.25

# The slack policy's "where": a node whose self time on an application's critical
# path is below this share of the application's target never gives way for it
# (a caller's own 0.2 ms of a 20 ms target, 1 %, is not where its latency goes).
DEFAULT_MIN_PATH_FRACTION = 0.05


class GuardPolicy(StrEnum):
    """How the guard decides whether and where batch gives way."""

    SLACK = "slack"  # SLO slack decides whether, critical-path self time where and how much
    # Heracles-style: SLO slack decides whether; every node the application's critical
    # path crosses gives way by the full step (no "where", no "how much")
    SLACK_ONLY = "slack-only"
    TOPOSCH_PAPER = "toposch-paper"  # TopoSch's min-max normalised risk x nu, every round


@dataclass(frozen=True, kw_only=True)
class GuardSettings:
    """How the visibility decision behaves (``[colocation]`` in the settings file).

    ``policy`` ``slack`` (the default): each latency-critical application's slack
    (``1 - P95 / target``) decides whether batch gives way -- above
    ``high_slack_ratio`` every node may grow, below ``low_slack_ratio`` nodes are
    throttled, a miss is an emergency -- and each node's self time on the
    application's critical path, as a share of its target, decides where and how
    much: nodes below ``min_path_fraction`` never give way; the others are lowered by
    ``nu`` x that share of their capacity a step (at most ``max_step_down_fraction``),
    at most once every ``throttle_settle_s``; in an emergency nothing new becomes
    visible there at once (zero-violation) and the step comes every cycle.

    ``policy`` ``toposch-paper``: TopoSch as published. ``nu`` is the reservation
    coefficient: batch sees ``capacity * (1 - nu*R)`` of a node of normalised risk
    ``R`` (``nu*R`` clipped to [0, 1]), on nodes whose raw risk is at least
    ``min_raw_risk`` (the others are not throttled); ``zero_violation`` holds the
    nodes of an application over its target at what batch uses.

    The rest are Koordinator's safety margins, for both: a floor batch always keeps,
    a dead-band under which changes are skipped, a per-round limit on how fast
    visibility grows back, a cool-down after a decrease before it may grow, and how
    old risk data may be before the node is given back whole.
    """

    policy: GuardPolicy = GuardPolicy.SLACK
    nu: float = 1.0
    zero_violation: bool = False
    min_visible_fraction: float = DEFAULT_MIN_VISIBLE_FRACTION
    min_raw_risk: float = DEFAULT_MIN_RAW_RISK
    low_slack_ratio: float = DEFAULT_LOW_SLACK_RATIO
    high_slack_ratio: float = DEFAULT_HIGH_SLACK_RATIO
    min_path_fraction: float = DEFAULT_MIN_PATH_FRACTION
    max_step_down_fraction: float = 0.25
    throttle_settle_s: float = 15.0
    dead_band_fraction: float = 0.05
    max_step_up_fraction: float = 0.25
    cooldown_s: float = 60.0
    stale_after_s: float = 180.0
    millicores_per_vcore: int = 1000
    # The RM's yarn.scheduler.minimum-allocation-{mb,vcores}: a NodeManager that
    # registers (an RM restart, a fail-over, its own restart) with a total below it is
    # told to SHUT DOWN, so the guard never sets a total below it.
    min_total_memory_mb: int = 1024
    min_total_vcores: int = 1

    def __post_init__(self) -> None:
        problems = [
            ("policy", self.policy in tuple(GuardPolicy), " or ".join(GuardPolicy)),
            ("nu", self.nu >= 0 and math.isfinite(self.nu), "must be a number >= 0"),
            ("min_visible_fraction", 0 <= self.min_visible_fraction <= 1, "in [0, 1]"),
            ("min_raw_risk", 0 <= self.min_raw_risk < math.inf, "must be a number >= 0"),
            ("low_slack_ratio", 0 <= self.low_slack_ratio < 1, "in [0, 1)"),
            (
                "high_slack_ratio",
                self.low_slack_ratio < self.high_slack_ratio < 1,
                "must be above low_slack_ratio and below 1",
            ),
            ("min_path_fraction", 0 <= self.min_path_fraction < math.inf, "a number >= 0"),
            ("max_step_down_fraction", 0 < self.max_step_down_fraction <= 1, "in (0, 1]"),
            ("throttle_settle_s", self.throttle_settle_s >= 0, "must be 0 or more"),
            ("dead_band_fraction", 0 <= self.dead_band_fraction < 1, "in [0, 1)"),
            ("max_step_up_fraction", 0 < self.max_step_up_fraction <= 1, "in (0, 1]"),
            ("cooldown_s", self.cooldown_s >= 0, "must be 0 or more"),
            ("stale_after_s", self.stale_after_s > 0, "must be positive"),
            ("millicores_per_vcore", self.millicores_per_vcore > 0, "must be positive"),
            ("min_total_memory_mb", self.min_total_memory_mb >= 0, "must be 0 or more"),
            ("min_total_vcores", self.min_total_vcores >= 0, "must be 0 or more"),
        ]
        for name, ok, expectation in problems:
            if not ok:
                raise ValueError(f"{name}: {getattr(self, name)!r} {expectation}")


class GuardMode(StrEnum):
    """What a round does with its decisions."""

    OFF = "off"  # nothing decided; every node the guard changed is given back
    RECOMMEND = "recommend"  # decide and record (the page shows it); change nothing
    AUTO = "auto"  # decide, set the node totals, serve reclaim requests to the agents


# --------------------------------------------------------------------------- observed


@dataclass(frozen=True)
class NodeView:
    """One NodeManager as the guard sees it this round."""

    node_id: str
    host: str
    running: bool
    state: str
    capacity: Resources  # the node's real total (journalled original, else the RM's)
    total: Resources  # what the scheduler sees now
    used: Resources  # allocated to YARN containers (batch) now

    @property
    def throttled(self) -> bool:
        return self.total != self.capacity


@dataclass(frozen=True)
class NodeDemand:
    """The latency-critical applications' demand on one node: ``vcores`` and
    ``memory_mb`` are the pessimistic bound (a learner's upper confidence bound, or
    observed usage plus headroom); ``source`` says which."""

    node_id: str
    vcores: float
    memory_mb: float
    source: str
    estimate_vcores: float | None = None

    @property
    def usable(self) -> bool:
        values = (self.vcores, self.memory_mb)
        return all(math.isfinite(v) and v >= 0 for v in values)


@dataclass(frozen=True)
class LearnedApplication:
    """What the guard's learners know of one latency-critical application: its CPU
    demand (vcores) and memory demand (MB) at the upper end of its load forecast,
    each with its bounds (None before any), the feedback rounds and memory samples
    behind them, how many the guard wants (``min_rounds``), and why each is not
    used yet (``cpu_short``, ``memory_short``; None when it is)."""

    application: str
    rounds: int
    memory_samples: int
    min_rounds: int
    cpu: Demand | None
    memory: Demand | None
    cpu_short: str | None = None
    memory_short: str | None = None


@dataclass(frozen=True)
class QosReading:
    """One latency-critical application's tail latency over the risk window (its
    entry service's request spans), against its target when one is set."""

    application: str
    latency_ms: float
    percentile: float
    requests: int
    load_rps: float
    nodes: tuple[str, ...]  # where its services ran (trace hosts)
    measured_at_s: float
    target_ms: float | None = None

    @property
    def violated(self) -> bool | None:
        if self.target_ms is None or not math.isfinite(self.latency_ms):
            return None
        return self.latency_ms > self.target_ms


@dataclass(frozen=True)
class RequestTally:
    """One entry service's requests (its root spans) that ended in
    ``(since_us, until_us]``: how many, and how many took at most its latency
    target (``within_target`` is 0 when it has no target). Successive reads tally
    disjoint intervals, so each request is counted once."""

    service: str
    requests: int
    within_target: int
    target_ms: float | None
    since_us: int
    until_us: int
    hosts: tuple[str, ...] = ()  # where its traces ran

    @property
    def seconds(self) -> float:
        return max(0.0, (self.until_us - self.since_us) / 1e6)


@dataclass(frozen=True)
class GuardInputs:
    """Everything one round of the guard decides from.

    ``risk`` is ``None`` when the trace store could not be read (``risk_problem``
    says why). ``node_hosts`` maps a trace host to the node id it stands for, for
    hosts that are not a node id themselves (see :func:`risk_key`).
    """

    now_s: float
    nodes: tuple[NodeView, ...]
    risk: RiskSnapshot | None
    risk_problem: str = ""
    demands: tuple[NodeDemand, ...] = ()
    qos: tuple[QosReading, ...] = ()
    node_hosts: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_hosts", MappingProxyType(dict(self.node_hosts)))

    def demand_of(self, node_id: str) -> NodeDemand | None:
        return next((d for d in self.demands if d.node_id == node_id), None)


@dataclass(frozen=True)
class NodeMemory:
    """What the guard remembers of a node between rounds."""

    last_lowered_at_s: float | None = None
    last_changed_at_s: float | None = None

    def after(self, decision: NodeDecision, at_s: float) -> NodeMemory:
        """What to remember once ``decision`` was carried out at ``at_s``."""
        lowered = decision.action is Action.LOWER or not decision.current.fits_in(decision.target)
        return NodeMemory(
            last_lowered_at_s=at_s if lowered else self.last_lowered_at_s,
            last_changed_at_s=at_s,
        )


# --------------------------------------------------------------------------- decided


class SlackState(StrEnum):
    """Where an application's slack (``1 - P95 / target``) stands; a node takes the
    most urgent state of the applications whose critical path it carries."""

    GROW = "grow"  # above the high watermark: batch may see more, step by step
    HOLD = "hold"  # between the watermarks: nothing changes
    THROTTLE = "throttle"  # below the low watermark: batch gives way where the path runs
    EMERGENCY = "emergency"  # over the target: nothing new for batch there, at once


@dataclass(frozen=True)
class AppSlack:
    """One latency-critical application (its entry service) against its target."""

    application: str
    latency_ms: float  # the percentile over the SLO window
    percentile: float
    target_ms: float
    requests: int
    state: SlackState

    @property
    def slack_ratio(self) -> float:
        """``1 - latency / target``: 1 is idle, 0 at the target, below 0 a miss."""
        return 1.0 - self.latency_ms / self.target_ms


@dataclass(frozen=True)
class NodePath:
    """One application's critical path on one node: the mean self time per request
    its spans there spent on it, and that as a share of the application's target."""

    application: str
    self_ms: float
    target_ms: float
    state: SlackState  # the application's
    slack_ratio: float  # the application's

    @property
    def share(self) -> float:
        return self.self_ms / self.target_ms


class Action(StrEnum):
    LOWER = "lower"  # less visible to batch than now
    RAISE = "raise"  # more visible, not yet the whole node
    RESTORE = "restore"  # back to the node's full capacity
    HOLD = "hold"  # keep what the scheduler sees now
    SKIP = "skip"  # the node cannot be acted on (not RUNNING)


@dataclass(frozen=True)
class NodeDecision:
    """The guard's decision for one node: the total the scheduler should see
    (``target``), what batch would ideally see before the safety steps
    (``wanted``), how much of batch's current use the node agent should reclaim,
    and why."""

    node_id: str
    capacity: Resources
    current: Resources
    target: Resources
    wanted: Resources
    used: Resources
    reclaim: Resources
    action: Action
    reason: str
    risk: float | None = None  # toposch-paper: normalised; slack: the largest path share
    reserved_fraction: float | None = None  # nu*R clipped to [0, 1] (toposch-paper)
    demand: NodeDemand | None = None
    qos: QosReading | None = None
    state: SlackState | None = None  # slack: the node's (its most urgent application's)
    paths: tuple[NodePath, ...] = ()  # slack: each application's path on the node

    @property
    def changes(self) -> bool:
        return self.target != self.current

    @property
    def reserved(self) -> Resources:
        """What batch may not see of the node's real capacity after this decision
        (kept for the latency-critical services)."""
        return (self.capacity - self.target).clamped()

    def reclaim_millicores(self, millicores_per_vcore: int) -> int:
        return self.reclaim.vcores * millicores_per_vcore


@dataclass(frozen=True)
class GuardPlan:
    decided_at_s: float
    decisions: tuple[NodeDecision, ...]
    policy: GuardPolicy = GuardPolicy.SLACK
    applications: tuple[AppSlack, ...] = ()  # slack: every application with a target

    def decision(self, node_id: str) -> NodeDecision | None:
        return next((d for d in self.decisions if d.node_id == node_id), None)

    @property
    def changes(self) -> tuple[NodeDecision, ...]:
        return tuple(d for d in self.decisions if d.changes)

    def summary(self) -> str:
        if not self.decisions:
            return "no nodes"
        return "; ".join(f"{d.node_id}: {d.action} ({d.reason})" for d in self.decisions)


@dataclass(frozen=True)
class RiskReading:
    """What the guard read of the traces for one round: the risk snapshot (or why there
    is none), the services' QoS, and the requests counted since the previous read."""

    snapshot: RiskSnapshot | None
    qos: tuple[QosReading, ...] = ()
    problem: str = ""  # why there is no snapshot, or a warning about the one there is
    tallies: tuple[RequestTally, ...] = ()  # requests since the previous read
