"""What the console keeps per round beside the decisions (frozen records): each
queue's usage, each group's realized mean job latency, every scheduler
configuration that ran (a *version*), and where a proposal came from when an
operator asked for it (a revert to an earlier version).

The loop records them (:meth:`~yarn_adapt.service.loop.rounds.TuningLoop.record_series`);
the page and the API read them to draw the charts and the version history.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueUsage:
    """One queue as one observation saw it. Percentages are of the whole cluster
    (0-100); ``guaranteed_percent`` is the configured guarantee (Capacity: the
    absolute capacity; Fair: the steady share its weights give), ``None`` where
    the configuration does not say it as a share."""

    queue: str
    used_percent: float
    guaranteed_percent: float | None
    pending_containers: int
    running_apps: int
    pending_apps: int


@dataclass(frozen=True)
class UsageSample:
    round_id: int
    at: float
    usage: QueueUsage


@dataclass(frozen=True)
class GroupLatencySample:
    """A group's realized mean job latency over the jobs that finished between the
    previous observation and this round's (``None``: none finished)."""

    round_id: int
    at: float
    group: str
    jobs: int
    mean_s: float | None


@dataclass(frozen=True)
class ConfigVersion:
    """A scheduler configuration that ran, first seen at ``seen_at``: who made it
    run (an apply's actor, or ``outside yarn-adapt`` when a round found a file
    nobody here wrote) and why."""

    id: int
    seen_at: float
    sha256: str
    xml: str
    actor: str
    why: str
    proposal_id: int | None = None
    apply_id: str = ""
    round_id: int | None = None


@dataclass(frozen=True)
class ProposalOrigin:
    """A proposal an operator asked for instead of the tuner: ``kind`` is
    ``revert`` (to ``version_id``)."""

    proposal_id: int
    kind: str
    version_id: int | None
    detail: str = ""
