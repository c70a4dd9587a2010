"""The agent's frozen data: what the decision code reads and returns.

Everything here is plain data built once at the edges (cgroup files, /proc, the RM,
the service) and never changed. Units: CPU in millicores (1000 = one core, the unit
of a CFS quota of one period per period), memory in MiB, times in seconds since the
epoch (``time.time()``, or the simulator's clock).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from preemption.errors import ReclaimRequestError

# container_[e<epoch>_]<cluster ts>_<app seq>_<attempt>_<container seq> (YARN's ContainerId).
# Matched whole (fullmatch: "$" would accept a trailing newline) and ASCII digits only
# ("\d" also takes other scripts' digits, which YARN never writes).
CONTAINER_ID = re.compile(r"container_(?:e[0-9]+_)?([0-9]+)_([0-9]+)_([0-9]+)_([0-9]+)")


@dataclass(frozen=True, order=True)
class Amount:
    """An amount of CPU (millicores) and memory (MiB); may be negative in arithmetic."""

    cpu_millicores: int = 0
    memory_mb: int = 0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.cpu_millicores + other.cpu_millicores, self.memory_mb + other.memory_mb)

    def __sub__(self, other: Amount) -> Amount:
        return Amount(self.cpu_millicores - other.cpu_millicores, self.memory_mb - other.memory_mb)

    def clamped(self) -> Amount:
        """Negative dimensions raised to zero."""
        return Amount(max(self.cpu_millicores, 0), max(self.memory_mb, 0))

    def min(self, other: Amount) -> Amount:
        return Amount(
            min(self.cpu_millicores, other.cpu_millicores), min(self.memory_mb, other.memory_mb)
        )

    def max(self, other: Amount) -> Amount:
        return Amount(
            max(self.cpu_millicores, other.cpu_millicores), max(self.memory_mb, other.memory_mb)
        )

    @property
    def is_zero(self) -> bool:
        return self.cpu_millicores == 0 and self.memory_mb == 0

    @property
    def any_positive(self) -> bool:
        return self.cpu_millicores > 0 or self.memory_mb > 0

    def covers(self, other: Amount) -> bool:
        """True when both dimensions are at least ``other``'s."""
        return self.cpu_millicores >= other.cpu_millicores and self.memory_mb >= other.memory_mb

    def __str__(self) -> str:
        return f"{self.cpu_millicores}m CPU, {self.memory_mb} MiB"


NOTHING = Amount()


def sum_amounts(amounts: Iterable[Amount]) -> Amount:
    total = NOTHING
    for amount in amounts:
        total = total + amount
    return total


class TaskKind(StrEnum):
    """What a container is to the agent: only ``batch`` is ever squeezed."""

    BATCH = "batch"
    LATENCY_CRITICAL = "latency-critical"
    APPLICATION_MASTER = "application-master"


class Locality(StrEnum):
    """Whether a task reads its input on this node (NLTF's key)."""

    LOCAL = "local"
    NON_LOCAL = "non-local"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ContainerRef:
    """A YARN container id, parsed."""

    container_id: str
    application_id: str
    attempt: int
    sequence: int

    @classmethod
    def parse(cls, container_id: str) -> ContainerRef:
        match = CONTAINER_ID.fullmatch(container_id)
        if match is None:
            raise ValueError(f"not a YARN container id: {container_id!r}")
        cluster_ts, app_seq, attempt, sequence = match.groups()
        application_id = f"application_{cluster_ts}_{int(app_seq):04d}"
        return cls(container_id, application_id, int(attempt), int(sequence))

    @property
    def is_application_master(self) -> bool:
        """YARN gives an attempt's AM the first container of that attempt."""
        return self.sequence == 1


def is_container_id(text: str) -> bool:
    return CONTAINER_ID.fullmatch(text) is not None


@dataclass(frozen=True)
class BatchTask:
    """A batch container as the reclaim decision sees it.

    ``baseline`` is what the container could use before the agent touched it (its
    YARN allocation, or what it was using if more, up to the node's CPUs); ``limit``
    is the limit in force now. ``reclaimed = baseline - limit``.
    """

    container_id: str
    application_id: str
    started_at_s: float
    baseline: Amount
    limit: Amount
    locality: Locality = Locality.UNKNOWN

    @property
    def reclaimed(self) -> Amount:
        return (self.baseline - self.limit).clamped()

    def elapsed_s(self, now_s: float) -> float:
        return max(0.0, now_s - self.started_at_s)


@dataclass(frozen=True)
class TaskSample:
    """One reading of a task's health, for the aliveness check.

    ``cpu_usage_ns`` and ``oom_kills`` are cumulative counters (cpuacct.usage /
    cpu.stat usage_usec; memory.oom_control / memory.events). ``progress`` is the
    MapReduce attempt's progress in [0, 1] when the AM or JobHistory reported it.
    """

    at_s: float
    alive: bool
    cpu_usage_ns: int
    oom_kills: int = 0
    progress: float | None = None
    exiting: bool = False  # not alive because its processes exited, none stopped


@dataclass(frozen=True)
class QosSignal:
    """The latency-critical service's state as the service (or a local probe) saw it.

    ``satisfied`` None means unknown: the agent then works from the reclaim amount
    alone. ``load`` and ``latency_ms`` feed the QoS model's training samples.
    """

    service: str = ""
    satisfied: bool | None = None
    latency_ms: float | None = None
    target_ms: float | None = None
    load: float | None = None
    measured_at_s: float | None = None


@dataclass(frozen=True)
class ReclaimTarget:
    """How much batch CPU and memory this node must hold back now (a desired state,
    not an increment: asking twice never reclaims twice).

    ``generation`` increases with each new decision of the service; ``expires_at_s``
    is when the agent stops trusting it (the service went quiet) and gives the
    resources back gradually.
    """

    reclaim: Amount
    generation: int = 0
    qos: QosSignal = QosSignal()
    source: str = "standalone"
    expires_at_s: float | None = None

    def expired(self, now_s: float) -> bool:
        return self.expires_at_s is not None and now_s >= self.expires_at_s


NO_TARGET = ReclaimTarget(reclaim=NOTHING, source="none")


def amount_from_json(raw: object, where: str) -> Amount:
    """``{"cpu_millicores": int, "memory_mb": int}`` (either may be missing) -> Amount."""
    if not isinstance(raw, dict):
        raise ReclaimRequestError(where, f"expected an object, got {type(raw).__name__}")
    unknown = set(raw) - {"cpu_millicores", "memory_mb"}
    if unknown:
        raise ReclaimRequestError(where, f"unknown keys {sorted(unknown)}")
    cpu = _non_negative_int(raw.get("cpu_millicores", 0), f"{where}.cpu_millicores")
    memory = _non_negative_int(raw.get("memory_mb", 0), f"{where}.memory_mb")
    return Amount(cpu, memory)


def _non_negative_int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReclaimRequestError(where, f"expected a number, got {value!r}")
    if value != value or value < 0 or value > 10**9:  # NaN, negative, absurd
        raise ReclaimRequestError(where, f"out of range: {value!r}")
    return int(value)
