"""The Capacity Scheduler's queue configuration (what capacity-scheduler.xml says).

Fields are ``None`` when the file leaves the property unset, so a parse/write round
trip keeps "unset" apart from "set to the default"; ``effective_*`` accessors apply
YARN's defaults (CapacitySchedulerConfiguration) for decision code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from yarn_adapt.model.queue_tree import QueueNode, QueueTree
from yarn_adapt.model.resources import Resources

CAPACITY_PREFIX = "yarn.scheduler.capacity."
DEFAULT_MAXIMUM_AM_RESOURCE_PERCENT = 0.1
DEFAULT_USER_LIMIT_FACTOR = 1.0
DEFAULT_MINIMUM_USER_LIMIT_PERCENT = 100.0
DEFAULT_ORDERING_POLICY = "fifo"
LEAF_ORDERING_POLICIES = frozenset(
    {"fifo", "fair", "fifo-with-partitions", "fifo-for-pending-apps"}
)
PARENT_ORDERING_POLICIES = frozenset({"utilization", "priority-utilization"})


class QueueState(StrEnum):
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    DRAINING = "DRAINING"


class CapacityMode(StrEnum):
    PERCENTAGE = "percentage"
    ABSOLUTE = "absolute"
    WEIGHT = "weight"


@dataclass(frozen=True)
class Percentage:
    """Capacity as a percentage (0-100) of the parent's."""

    percent: float

    mode = CapacityMode.PERCENTAGE

    def __str__(self) -> str:
        return _format_number(self.percent)


@dataclass(frozen=True)
class AbsoluteCapacity:
    """Capacity as an absolute amount, ``[memory=10240,vcores=12]``. Other resource
    types (``yarn.io/gpu=1``) are kept in ``others`` in the order written."""

    resources: Resources
    others: tuple[tuple[str, str], ...] = ()

    mode = CapacityMode.ABSOLUTE

    def __str__(self) -> str:
        parts = [f"memory={self.resources.memory_mb}", f"vcores={self.resources.vcores}"]
        parts += [f"{name}={value}" for name, value in self.others]
        return "[" + ",".join(parts) + "]"


@dataclass(frozen=True)
class Weight:
    """Capacity as a weight among siblings, ``2w`` (Hadoop 3.4+)."""

    weight: float

    mode = CapacityMode.WEIGHT

    def __str__(self) -> str:
        return _format_number(self.weight) + "w"


Capacity = Percentage | AbsoluteCapacity | Weight

_ABSOLUTE_RE = re.compile(r"^\[(?P<body>[^\]]*)\]$")
_WEIGHT_RE = re.compile(r"^(?P<number>[0-9]*\.?[0-9]+)w$")


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def parse_capacity(text: str) -> Capacity:
    """Parse a ``capacity`` / ``maximum-capacity`` value. ``-1`` means 100 percent.

    Raises ``ValueError`` naming what is wrong; callers add the queue and property.
    """
    value = text.strip()
    absolute = _ABSOLUTE_RE.match(value)
    if absolute:
        return _parse_absolute(absolute.group("body"))
    weight = _WEIGHT_RE.match(value)
    if weight:
        return Weight(float(weight.group("number")))
    try:
        percent = float(value)
    except ValueError:
        raise ValueError(
            f"not a percentage, weight (Nw) or [memory=..,vcores=..]: {text!r}"
        ) from None
    if percent == -1:
        return Percentage(100.0)
    return Percentage(percent)


def _parse_absolute(body: str) -> AbsoluteCapacity:
    memory: int | None = None
    vcores: int | None = None
    others: list[tuple[str, str]] = []
    for item in filter(None, (part.strip() for part in body.split(","))):
        name, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"absolute capacity entry without '=': {item!r}")
        name, raw = name.strip(), raw.strip()
        if name in ("memory", "memory-mb"):
            memory = _parse_memory_mb(raw)
        elif name == "vcores":
            vcores = int(raw)
        else:
            others.append((name, raw))
    if memory is None or vcores is None:
        raise ValueError(f"absolute capacity needs memory and vcores: [{body}]")
    return AbsoluteCapacity(Resources(memory, vcores), tuple(others))


_MEMORY_UNITS = {"": 1, "m": 1, "mi": 1, "g": 1024, "gi": 1024, "t": 1024 * 1024, "ti": 1024 * 1024}


def _parse_memory_mb(raw: str) -> int:
    match = re.fullmatch(r"([0-9]+)\s*([a-zA-Z]*)", raw)
    if not match or match.group(2).lower().removesuffix("b") not in _MEMORY_UNITS:
        raise ValueError(f"memory amount not understood: {raw!r}")
    return int(match.group(1)) * _MEMORY_UNITS[match.group(2).lower().removesuffix("b")]


@dataclass(frozen=True)
class CapacityQueue(QueueNode):
    """One queue of the Capacity Scheduler tree. ``path`` is the full dotted path
    (``root.eng.batch``). ``other_properties`` keeps every per-queue property the
    model does not know (suffix after the queue path, value), in file order."""

    path: str
    capacity: Capacity | None = None
    maximum_capacity: Capacity | None = None
    user_limit_factor: float | None = None
    minimum_user_limit_percent: float | None = None
    ordering_policy: str | None = None
    state: QueueState | None = None
    maximum_am_resource_percent: float | None = None
    children: tuple[CapacityQueue, ...] = ()
    other_properties: tuple[tuple[str, str], ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def effective_state(self) -> QueueState:
        return self.state or QueueState.RUNNING

    @property
    def effective_user_limit_factor(self) -> float:
        return (
            DEFAULT_USER_LIMIT_FACTOR if self.user_limit_factor is None else self.user_limit_factor
        )

    @property
    def effective_minimum_user_limit_percent(self) -> float:
        if self.minimum_user_limit_percent is None:
            return DEFAULT_MINIMUM_USER_LIMIT_PERCENT
        return self.minimum_user_limit_percent

    @property
    def effective_ordering_policy(self) -> str:
        if self.ordering_policy:
            return self.ordering_policy
        return DEFAULT_ORDERING_POLICY if self.is_leaf else "utilization"

    def other(self, suffix: str) -> str | None:
        return next((v for k, v in self.other_properties if k == suffix), None)


@dataclass(frozen=True)
class CapacitySchedulerConfig(QueueTree[CapacityQueue]):
    """A whole capacity-scheduler.xml: the queue tree plus every property that is not
    a known queue's (``yarn.scheduler.capacity.maximum-am-resource-percent``,
    resource calculator, node-locality-delay, ...), in file order."""

    root: CapacityQueue
    global_properties: tuple[tuple[str, str], ...] = field(default=())

    def find_leaf_by_name(self, name: str) -> CapacityQueue | None:
        """A leaf by full path or by its short name (YARN accepts either when unique)."""
        exact = self.find(name)
        if exact is not None:
            return exact
        matches = [q for q in self.leaves() if q.name == name]
        return matches[0] if len(matches) == 1 else None

    def global_value(self, name: str) -> str | None:
        key = name if name.startswith(CAPACITY_PREFIX) else CAPACITY_PREFIX + name
        return next((v for k, v in self.global_properties if k == key), None)

    @property
    def maximum_am_resource_percent(self) -> float:
        raw = self.global_value("maximum-am-resource-percent")
        return DEFAULT_MAXIMUM_AM_RESOURCE_PERCENT if raw is None else float(raw)

    def effective_am_percent(self, queue: CapacityQueue) -> float:
        if queue.maximum_am_resource_percent is not None:
            return queue.maximum_am_resource_percent
        return self.maximum_am_resource_percent
