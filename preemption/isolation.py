"""Isolation of latency-critical work from batch on one node: the decisions, pure.

Algorithm 2 (:mod:`preemption.reclaim`) squeezes batch when something asks it to (the
guard's reclaim request, a standalone target, the QoS model). These rules protect the
services on the node by themselves, every interval, whatever the guard does (after
Koordinator's CPU suppress and memory QoS, and YARN's own CPU weights):

* **Priority.** Batch's CPU weight is its original times ``weight_fraction``
  (:func:`~preemption.cgroups.caps.lowered_weight`): the agent's own hierarchy, which
  holds only the batch containers it adopted, against its siblings (process-tree
  mode), or each listed batch container against the other containers under YARN's
  hierarchy (LinuxContainerExecutor cgroups). Never a latency-critical container.
* **Suppress** (:func:`batch_budget`, :func:`next_quota`): batch's CPU budget is
  ``capacity x target_utilisation - (node use - batch use) - reserve``, never below
  ``floor_millicores``; the quota follows the budget down at once, up by at most
  ``max_increase_fraction`` of the node per interval, and a change under
  ``dead_band_fraction`` of the node is not made. It is one CFS quota on the agent's
  hierarchy, or split over the listed batch containers by their vcores
  (:func:`split_quota`).
* **Memory** (:func:`under_pressure`): when the node's available memory falls below
  ``pressure_available_fraction`` of its total, batch is capped at what it holds
  (soft limit on v1, ``memory.high`` on v2, never below usage + headroom), until it is
  back above the threshold plus ``release_margin_fraction``; configured service
  cgroups (v2) get ``memory.low`` at their usage meanwhile.
* **Eviction** (:func:`memory_victim`): only with kills allowed (``[yarn] kill``), only
  after batch was capped and the pressure lasted ``grace_period_s``, one container at
  a time (the one holding the most memory), one per ``cooldown_s``.

Units: CPU in millicores, memory in MiB, times in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

MIN_CONTAINER_MILLICORES = 10  # the kernel's 1 ms of quota per 100 ms period


@dataclass(frozen=True, kw_only=True)
class PrioritySettings:
    enabled: bool = True
    weight_fraction: float = 0.002
    service_cpus: frozenset[int] = frozenset()  # empty: batch's cpuset is left alone

    def problems(self) -> Iterator[str]:
        if not 0.0 < self.weight_fraction <= 1.0:
            yield f"weight_fraction must be in (0, 1], got {self.weight_fraction}"


@dataclass(frozen=True, kw_only=True)
class SuppressSettings:
    enabled: bool = True
    target_utilisation: float = 0.65
    reserve_millicores: int = 0
    floor_millicores: int = 200
    max_increase_fraction: float = 0.10
    dead_band_fraction: float = 0.01
    cpus: frozenset[int] = frozenset()  # empty: every CPU of /proc/stat

    def problems(self) -> Iterator[str]:
        if not 0.0 < self.target_utilisation <= 1.0:
            yield f"target_utilisation must be in (0, 1], got {self.target_utilisation}"
        if self.reserve_millicores < 0:
            yield f"reserve_millicores must be >= 0, got {self.reserve_millicores}"
        if self.floor_millicores < MIN_CONTAINER_MILLICORES:
            yield (
                f"floor_millicores must be >= {MIN_CONTAINER_MILLICORES} (the kernel's "
                f"smallest quota), got {self.floor_millicores}"
            )
        if not 0.0 < self.max_increase_fraction <= 1.0:
            yield f"max_increase_fraction must be in (0, 1], got {self.max_increase_fraction}"
        if not 0.0 <= self.dead_band_fraction < self.max_increase_fraction:
            yield "dead_band_fraction must be >= 0 and below max_increase_fraction"


@dataclass(frozen=True, kw_only=True)
class MemorySettings:
    enabled: bool = True
    pressure_available_fraction: float = 0.10
    release_margin_fraction: float = 0.02
    service_cgroups: tuple[str, ...] = ()

    def problems(self) -> Iterator[str]:
        if not 0.0 < self.pressure_available_fraction < 1.0:
            yield (
                "pressure_available_fraction must be in (0, 1), got "
                f"{self.pressure_available_fraction}"
            )
        if not 0.0 <= self.release_margin_fraction < 1.0 - self.pressure_available_fraction:
            yield "release_margin_fraction must be >= 0 and leave the threshold below 1"


# ----------------------------------------------------------------- suppress


@dataclass(frozen=True)
class CpuUse:
    """One interval's CPU use on the node: all of it (``/proc/stat``) and batch's
    (its cgroups' own counters), against the node's ``capacity``."""

    capacity_millicores: int
    node_millicores: float
    batch_millicores: float

    @property
    def not_batch_millicores(self) -> float:
        return max(0.0, self.node_millicores - self.batch_millicores)


def batch_budget(use: CpuUse, settings: SuppressSettings) -> int:
    """Koordinator's suppress formula: what batch may use now, never below the floor
    nor above the node."""
    budget = (
        use.capacity_millicores * settings.target_utilisation
        - use.not_batch_millicores
        - settings.reserve_millicores
    )
    floor = min(settings.floor_millicores, use.capacity_millicores)
    return min(use.capacity_millicores, max(floor, math.floor(budget)))


@dataclass(frozen=True)
class QuotaStep:
    """The quota to apply (millicores), the budget it follows and how it moved:
    ``first``, ``decrease``, ``increase``, ``increase-bounded`` or ``dead-band``."""

    quota_millicores: int
    budget_millicores: int
    change: str

    @property
    def changed(self) -> bool:
        return self.change != "dead-band"


def next_quota(
    previous: int | None, budget: int, capacity: int, settings: SuppressSettings
) -> QuotaStep:
    """Down at once, up by at most ``max_increase_fraction`` of the node per interval;
    a move under ``dead_band_fraction`` of the node is not made."""
    if previous is None:
        return QuotaStep(budget, budget, "first")
    delta = budget - previous
    if abs(delta) < settings.dead_band_fraction * capacity:
        return QuotaStep(previous, budget, "dead-band")
    if delta < 0:
        return QuotaStep(budget, budget, "decrease")
    step = math.floor(settings.max_increase_fraction * capacity)
    if delta > step:
        return QuotaStep(previous + step, budget, "increase-bounded")
    return QuotaStep(budget, budget, "increase")


def split_quota(quota: int, weights: Mapping[str, int]) -> dict[str, int]:
    """The quota shared by weight (vcores), each share at least the kernel's minimum."""
    total = sum(max(1, weight) for weight in weights.values())
    if total == 0:
        return {}
    return {
        key: max(MIN_CONTAINER_MILLICORES, quota * max(1, weight) // total)
        for key, weight in weights.items()
    }


# ----------------------------------------------------------------- memory


@dataclass(frozen=True)
class MemoryInfo:
    """The node's memory now (``/proc/meminfo``), in MiB."""

    total_mb: int
    available_mb: int


def under_pressure(was: bool, memory: MemoryInfo, settings: MemorySettings) -> bool:
    """Pressure below the threshold; it ends only above the threshold plus the margin."""
    threshold = settings.pressure_available_fraction * memory.total_mb
    if was:
        threshold += settings.release_margin_fraction * memory.total_mb
    return memory.available_mb < threshold


@dataclass(frozen=True)
class EvictionState:
    """When the pressure began (batch capped), the last eviction, and the containers
    asked to go that are still listed."""

    pressure_since_s: float | None = None
    last_eviction_s: float | None = None
    evicting: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class EvictionRules:
    enabled: bool = False  # [yarn] kill allows kills
    grace_period_s: float = 60.0
    cooldown_s: float = 30.0


@dataclass(frozen=True)
class MemoryHolder:
    container_id: str
    application_id: str
    memory_bytes: int


def track_pressure(
    state: EvictionState, pressure: bool, now_s: float, present: frozenset[str]
) -> EvictionState:
    """Pressure's start kept while it lasts; evicted containers forgotten once gone."""
    since = (state.pressure_since_s or now_s) if pressure else None
    return EvictionState(since, state.last_eviction_s, state.evicting & present)


def memory_victim(
    state: EvictionState, now_s: float, holders: Sequence[MemoryHolder], rules: EvictionRules
) -> MemoryHolder | None:
    """The batch container to evict now, if any: kills allowed, batch capped for the
    grace period under pressure, the cool-down over; the one holding most memory."""
    if not rules.enabled or state.pressure_since_s is None:
        return None
    if now_s - state.pressure_since_s < rules.grace_period_s:
        return None
    if state.last_eviction_s is not None and now_s - state.last_eviction_s < rules.cooldown_s:
        return None
    candidates = [h for h in holders if h.container_id not in state.evicting]
    if not candidates:
        return None
    return max(candidates, key=lambda h: (h.memory_bytes, h.container_id))


# ----------------------------------------------------------------- CPU lists


def parse_cpu_list(text: str) -> frozenset[int]:
    """A cpuset list (``"0-3,6"``) -> CPU numbers; ``ValueError`` naming what is wrong."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{part!r} is not a CPU number or range (e.g. 0-3,6)")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"{part!r}: the range ends before it starts")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def cpu_list(cpus: frozenset[int]) -> str:
    """CPU numbers -> a cpuset list, ranges merged (``{0, 1, 2, 6}`` -> ``"0-2,6"``)."""
    ranges: list[str] = []
    ordered = sorted(cpus)
    start = previous = None
    for cpu in [*ordered, None]:
        if cpu is not None and previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None and previous is not None:
            ranges.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    return ",".join(ranges)
