"""What one evaluation's path through Algorithm 1 depended on in the configuration.

The configuration reaches the engine only through its queues' numbers (share,
ceiling, floor, weight, AM and user-limit settings) and the fair shares derived
from them, and the engine reads those numbers only in four kinds of decision: the
queue ranking, the user limit, the ceiling and the AM limit. Everything else --
event times, job order inside a queue, task durations -- follows from those
decisions and from the mix. So if another configuration (with the same mechanism
and queues) decides every decision of a recorded path the same way, given the same
state, it takes the same path and every job finishes at the same moment: its
estimate *is* the recorded one. :class:`Path` holds the decisions (each distinct
one once) and the estimate; ``Algorithm1.follows`` checks a configuration
against it, which is much cheaper than running the mix again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rules.engine import Estimate
    from rules.state import JobState

# a queue's state as the decisions read it:
# (position, used MiB, used vcores, pending MiB, pending vcores)
QueueLoad = tuple[int, int, int, int, int]
# user -> (memory held, active jobs, AM memory of active jobs)
Users = tuple[tuple[str, int, int, int], ...]
# the ranking: the asking queues' loads -> their positions in rank order
Order = tuple[tuple[QueueLoad, ...], tuple[int, ...]]
# (position, used MiB + ask, used vcores + ask, over the ceiling)
Ceiling = tuple[int, int, int, bool]
# (position, used MiB, users, job index, allowed)
UserDecision = tuple[int, int, Users, int, bool]
# (load, AM MiB, AM vcores held, users (when the AM kernel reads them), active queues
#  of the fair shares or None,
#  job index, group's used MiB and vcores, allowed)
AmDecision = tuple[QueueLoad, int, int, Users, tuple[int, ...] | None, int, tuple[int, int], bool]


@dataclass
class Telling:
    """Decisions that told a configuration off the path, most recent first."""

    orders: list[Order] = field(default_factory=list)
    ceilings: list[Ceiling] = field(default_factory=list)
    users: list[UserDecision] = field(default_factory=list)
    ams: list[AmDecision] = field(default_factory=list)


@dataclass
class Decisions:
    """Each distinct decision of one path (dicts as ordered sets), and those that
    told configurations apart (checked first)."""

    orders: dict[Order, None] = field(default_factory=dict)
    ceilings: dict[Ceiling, None] = field(default_factory=dict)
    users: dict[UserDecision, None] = field(default_factory=dict)
    ams: dict[AmDecision, None] = field(default_factory=dict)
    hot: Telling = field(default_factory=Telling)


@dataclass(frozen=True)
class Path:
    """A run's decisions, its estimate, and its jobs (the decisions name jobs by
    index; what the checks read of a job -- user, AM container -- is the same
    under every configuration)."""

    decisions: Decisions
    estimate: Estimate
    jobs: Sequence[JobState]
