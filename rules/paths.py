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
one once) and the estimate; :class:`rules.judging.PathJudge` checks a configuration
against it, which is much cheaper than running the mix again.

The decisions are named tuples: hashable (a path keeps each distinct one once) and
as cheap to build as the state they copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeVar

if TYPE_CHECKING:
    from rules.state import Estimate, JobState, QueueState

T = TypeVar("T")
# named tuples built without their keyword-checking __new__ (recording is hot)
_new = tuple.__new__
HOT_KEPT = 8


class QueueLoad(NamedTuple):
    """A queue's state as the decisions read it."""

    position: int
    used_mem: int
    used_vc: int
    pending_mem: int
    pending_vc: int


class UserHolding(NamedTuple):
    """One user of a queue: memory held, active jobs, AM memory of its active jobs,
    and its jobs that ask for containers (which make it an active user)."""

    user: str
    memory: int
    active: int
    am: int
    asking: int


Users = tuple[UserHolding, ...]


class Order(NamedTuple):
    """The asking queues' loads, and their positions in rank order."""

    loads: tuple[QueueLoad, ...]
    order: tuple[int, ...]


class Ceiling(NamedTuple):
    """Whether a queue asking for more went over its ceiling."""

    position: int
    asked_mem: int
    asked_vc: int
    over: bool


class UserDecision(NamedTuple):
    """Whether a job's user was within its user limit."""

    position: int
    used_mem: int
    users: Users
    job: int
    allowed: bool


class AmDecision(NamedTuple):
    """Whether a job's AM was within the AM limit: the queue's load and AM use, its
    users (when the AM kernel reads them), the active queues of the fair shares
    (``None``: no fair shares), the group's used memory and vcores."""

    load: QueueLoad
    am_mem: int
    am_vc: int
    users: Users
    shares_of: tuple[int, ...] | None
    job: int
    used: tuple[int, int]
    allowed: bool


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


# --------------------------------------------------------------------------- state


def load_of(queue: QueueState) -> QueueLoad:
    return _new(
        QueueLoad,
        (queue.position, queue.used_mem, queue.used_vc, queue.pending_mem, queue.pending_vc),
    )


def loaded(queue: QueueState, load: QueueLoad) -> QueueState:
    """``queue`` with the state ``load`` recorded."""
    _, queue.used_mem, queue.used_vc, queue.pending_mem, queue.pending_vc = load
    return queue


def users_of(queue: QueueState) -> Users:
    return tuple(_new(UserHolding, (user, *held)) for user, held in queue.users.items())


def users_dict(users: Users) -> dict[str, list[int]]:
    return {u.user: [u.memory, u.active, u.am, u.asking] for u in users}


def remember(hot: list[T], decision: T) -> bool:
    """Keep a decision that told a configuration apart; False (it did not follow)."""
    if decision not in hot:
        hot.insert(0, decision)
        del hot[HOT_KEPT:]
    return False
