"""Where the agent's isolation meets Algorithm 2's squeeze: the stricter of the two.

A batch cgroup's files are set by two controllers. Algorithm 2 (:mod:`preemption.reclaim`)
gives one container a limit, which the backend translates into file values
(:meth:`~preemption.cgroups.base.CgroupBackend.desired_values`). The isolation loop
(:mod:`preemption.isolation`) puts :class:`Caps` on batch: a CFS quota from the
suppress loop, a low CPU weight for batch, a memory cap under memory pressure, and
optionally a cpuset without the services' CPUs. :func:`capped` takes the squeeze's
values and tightens each file by its cap; nothing else combines the two, so the
effective limit is always the stricter one:

===========================  ===================================================
``cpu.cfs_quota_us`` (v1)    min(squeeze, cap × period); ``-1`` is unlimited
``cpu.max`` (v2)             the same on the quota field; ``max`` is unlimited
``cpu.shares`` (v1)          min(squeeze, original × weight_fraction), never < 2
``cpu.weight`` (v2)          min(squeeze, original × weight_fraction), never < 1
``memory.soft_limit_in_bytes``  min(squeeze, cap): reclaimed first (v1)
``memory.high`` (v2)         min(squeeze, cap), and as every ``memory.high`` the
                             agent writes, never below usage + headroom nor above
                             its original (:func:`~preemption.cgroups.base.hard_limit_bytes`)
``cpuset.cpus`` (v2)         the cap's CPU list (only when one is set)
===========================  ===================================================

Which version's files are in ``values`` decides which rules apply (the simulator's
backend writes v1 files too). Pure: the values in, the values out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from preemption.cgroups.base import (
    MIB,
    MemoryPolicy,
    Usage,
    hard_limit_bytes,
    page_aligned,
    quota_us,
)

V1_LOWEST_SHARES = 2  # the kernel's minimum cpu.shares
V2_LOWEST_WEIGHT = 1  # the kernel's minimum cpu.weight
UNLIMITED_V1 = -1


@dataclass(frozen=True)
class Caps:
    """What the isolation loop asks of one batch cgroup (None: nothing of that kind).

    ``cpu_millicores`` is a CFS quota no looser than this; ``weight_fraction`` a CPU
    weight no higher than the original times this; ``memory_mb`` a soft limit (v1) or
    ``memory.high`` (v2) no higher than this; ``cpus`` a cpuset (v2).
    """

    cpu_millicores: int | None = None
    weight_fraction: float | None = None
    memory_mb: int | None = None
    cpus: str | None = None

    @property
    def empty(self) -> bool:
        return self == NO_CAPS


NO_CAPS = Caps()


def lowered_weight(original: int, fraction: float, lowest: int) -> int:
    """Batch's CPU weight: the original times ``fraction``, never below the kernel's
    minimum ``lowest`` nor above the original (e.g. YARN's 1024 per vcore x 0.002 =
    about 2 per vcore, YARN's own weight for opportunistic containers)."""
    return max(lowest, min(original, round(original * fraction)))


def tighter_quota_us(current: int, cap: int) -> int:
    """The stricter of two CFS quotas in µs, ``-1`` (or any negative) meaning none."""
    if current < 0:
        return cap
    return min(current, cap)


def quota_ratio(values: Mapping[str, str]) -> float:
    """The CPUs a group's CFS quota allows (quota / period); infinite when unlimited."""
    if "cpu.cfs_quota_us" in values:
        quota = int(values["cpu.cfs_quota_us"])
        period = int(values.get("cpu.cfs_period_us", "100000"))
    elif "cpu.max" in values:
        text, _, period_text = values["cpu.max"].partition(" ")
        quota = UNLIMITED_V1 if text == "max" else int(text)
        period = int(period_text or "100000")
    else:
        return math.inf
    return math.inf if quota < 0 else quota / period


def capped(
    values: Mapping[str, str],
    originals: Mapping[str, str],
    usage: Usage,
    caps: Caps,
    policy: MemoryPolicy,
) -> dict[str, str]:
    """``values`` (the squeeze's file values) tightened by ``caps``."""
    out = dict(values)
    if caps.empty:
        return out
    if "cpu.cfs_quota_us" in out:
        _cap_v1(out, originals, caps)
    if "cpu.max" in out:
        _cap_v2(out, originals, usage, caps, policy)
    return out


def _cap_v1(out: dict[str, str], originals: Mapping[str, str], caps: Caps) -> None:
    if caps.cpu_millicores is not None:
        period = int(originals.get("cpu.cfs_period_us", "100000"))
        cap = quota_us(caps.cpu_millicores, period)
        out["cpu.cfs_quota_us"] = str(tighter_quota_us(int(out["cpu.cfs_quota_us"]), cap))
    if caps.weight_fraction is not None and "cpu.shares" in out:
        low = lowered_weight(int(originals["cpu.shares"]), caps.weight_fraction, V1_LOWEST_SHARES)
        out["cpu.shares"] = str(min(int(out["cpu.shares"]), low))
    if caps.memory_mb is not None and "memory.soft_limit_in_bytes" in out:
        soft = min(int(out["memory.soft_limit_in_bytes"]), page_aligned(caps.memory_mb * MIB))
        out["memory.soft_limit_in_bytes"] = str(soft)


def _cap_v2(
    out: dict[str, str],
    originals: Mapping[str, str],
    usage: Usage,
    caps: Caps,
    policy: MemoryPolicy,
) -> None:
    if caps.cpu_millicores is not None:
        quota, _, period_text = out["cpu.max"].partition(" ")
        period = int(period_text or "100000")
        current = UNLIMITED_V1 if quota == "max" else int(quota)
        tighter = tighter_quota_us(current, quota_us(caps.cpu_millicores, period))
        out["cpu.max"] = f"{tighter} {period}"
    if caps.weight_fraction is not None and "cpu.weight" in out:
        low = lowered_weight(int(originals["cpu.weight"]), caps.weight_fraction, V2_LOWEST_WEIGHT)
        out["cpu.weight"] = str(min(int(out["cpu.weight"]), low))
    if caps.memory_mb is not None and "memory.high" in out:
        high = _tighter_high(out["memory.high"], originals, usage, caps.memory_mb, policy)
        out["memory.high"] = high
    if caps.cpus is not None:
        out["cpuset.cpus"] = caps.cpus


def _tighter_high(
    current: str, originals: Mapping[str, str], usage: Usage, cap_mb: int, policy: MemoryPolicy
) -> str:
    """``memory.high`` no higher than the cap, by the one rule every ``memory.high`` of
    the agent follows: never below usage + headroom, never above the original."""
    original = originals.get("memory.high", "max")
    ceiling = None if original == "max" else int(original)
    cap = page_aligned(hard_limit_bytes(cap_mb, usage.memory_bytes, ceiling, policy))
    if ceiling is not None and cap >= ceiling:
        return current
    return str(cap) if current == "max" else str(min(int(current), cap))
