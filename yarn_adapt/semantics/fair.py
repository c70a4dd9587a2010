"""Fair Scheduler decisions (Hadoop 3.4.3, package
``org.apache.hadoop.yarn.server.resourcemanager.scheduler.fair``).

Amounts are MiB and vcores. The comparators are written as sort keys: sorting by
the key orders schedulables as YARN's comparator does (their last tie-breaks, the
start time -- 0 for every queue -- and the name, are the caller's ``position``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

COMPUTE_FAIR_SHARES_ITERATIONS = 25  # policies.ComputeFairShares
ONE_MB = 1.0  # FairSharePolicy.ONE_MB: the least min share a ratio divides by
_RATIO_LIMIT = 1e18  # YARN's doubling stops at Long.MAX_VALUE


def fair_shares(
    weights: Sequence[float],
    minimums: Sequence[float],
    maximums: Sequence[float],
    total: float,
    *,
    iterations: int = COMPUTE_FAIR_SHARES_ITERATIONS,
) -> list[float]:
    """ComputeFairShares.computeSharesInternal (instantaneous shares of the active
    schedulables passed in; an inactive one's share is 0 and is the caller's).

    Shares, minimums and maximums are whole units (YARN's are longs: fractional
    bounds, say a percentage of the cluster, are floored). A schedulable whose
    maximum is 0 gets 0 and one of weight 0 its minimum (getFairShareIfFixed); the
    rest share ``min(total - fixed, sum of their maximums)``: find ``R`` (doubling,
    then ``iterations`` bisection steps, stopping early when the floored shares add
    up exactly) and give each ``floor(clamp(weight x R, min, max))``
    (computeShare casts to long)."""
    minimums = [float(math.floor(m)) if math.isfinite(m) else m for m in minimums]
    maximums = [float(math.floor(m)) if math.isfinite(m) else m for m in maximums]
    fixed: list[float | None] = [
        0.0 if maximums[i] <= 0 else (max(minimums[i], 0.0) if weights[i] <= 0 else None)
        for i in range(len(weights))
    ]
    free = [i for i, f in enumerate(fixed) if f is None]
    if not free:
        return [f or 0.0 for f in fixed]
    taken = sum(f for f in fixed if f is not None)
    target = min(max(total - taken, 0.0), sum(maximums[i] for i in free))

    def share(i: int, ratio: float) -> float:
        return float(math.floor(min(max(weights[i] * ratio, minimums[i]), maximums[i])))

    def used(ratio: float) -> float:
        return sum(share(i, ratio) for i in free)

    high = 1.0
    while used(high) < target and high < _RATIO_LIMIT:
        high *= 2.0
    low = 0.0
    for _ in range(iterations):
        middle = (low + high) / 2.0
        planned = used(middle)
        if planned == target:
            high = middle
            break
        low, high = (middle, high) if planned < target else (low, middle)
    return [share(i, high) if f is None else f for i, f in enumerate(fixed)]


def max_am_share_allows(
    *,
    am_used: tuple[float, float],
    am_request: tuple[float, float],
    fair_share: tuple[float, float],
    max_share: tuple[float, float],
    available: tuple[float, float],
    max_am_share: float,
) -> bool:
    """FSLeafQueue.canRunAppAM: the queue's AM usage plus this AM must fit
    ``computeMaxAMResource`` -- its fair share (a resource whose share is 0 falls
    back to ``min(cluster available, maxResources)``) x maxAMShare, rounded up
    (Resources.multiplyAndRoundUp); maxAMShare -1 disables the check."""
    if abs(max_am_share + 1.0) < 1e-4:
        return True
    for i in (0, 1):
        base = fair_share[i] or min(available[i], max_share[i])
        if am_used[i] + am_request[i] > math.ceil(base * max_am_share):
            return False
    return True


def fair_share_key(
    *,
    used: float,
    demand: float,
    min_share: float,
    weight: float,
    position: int,
) -> tuple[float, float, float, float]:
    """FairSharePolicy.FairShareComparator, on memory: schedulables with demand first
    (compareDemand); then those below ``min(minShare, demand)`` (needy), by usage /
    that minimum (at least 1 MB); the others by usage / weight, a zero weight after
    every positive one (compareFairShareUsage); then start time and name
    (``position``)."""
    no_demand = 1.0 if demand <= 0 else 0.0
    minimum = min(min_share, demand)
    if used < minimum:
        return (no_demand, 0.0, used / max(minimum, ONE_MB), float(position))
    ratio = used / weight if weight > 0 else math.inf
    return (no_demand, 1.0, ratio, float(position))


def drf_key(
    *,
    used: tuple[float, float],
    min_share: tuple[float, float],
    cluster: tuple[float, float],
    weight: float,
    position: int,
) -> tuple[float, float, float, float]:
    """DominantResourceFairnessPolicy.DominantResourceFairnessComparator2 (memory
    and vcores): a schedulable is needy when its usage of its *dominant* resource
    (the larger share of the cluster; memory on a tie) is below its min share of
    that resource -- not capped by demand, unlike FairSharePolicy; needy ones first,
    ordered by usage / min share of the dominant resource, then of the other; the
    rest by cluster share / weight of the dominant resource, then of the other (a
    weight of 0 puts a schedulable holding anything after every other: YARN's
    division gives Infinity; holding nothing, first, where YARN's 0 / 0 is NaN and
    compares equal to anything); then start time and name (``position``).
    (YARN's compare tests the second schedulable's neediness on the *first*
    one's usage, ``resourceInfo1[dominant2]``, which makes the comparator
    asymmetric; a sort key cannot follow that, and this key uses each one's own.)"""
    shares = (
        used[0] / cluster[0] if cluster[0] else 0.0,
        used[1] / cluster[1] if cluster[1] else 0.0,
    )
    dominant = 1 if shares[1] > shares[0] else 0
    other = 1 - dominant
    if used[dominant] < min_share[dominant]:
        return (
            0.0,
            _ratio(used[dominant], min_share[dominant]),
            _ratio(used[other], min_share[other]),
            float(position),
        )
    return (
        1.0,
        _ratio(shares[dominant], weight),
        _ratio(shares[other], weight),
        float(position),
    )


def _ratio(value: float, base: float) -> float:
    if base > 0:
        return value / base
    return math.inf if value > 0 else 0.0


def drf_app_key(
    *, used: tuple[float, float], cluster: tuple[float, float], start: float, index: int
) -> tuple[float, float, float, int]:
    """DominantResourceFairnessComparator2 between apps of a leaf (min share 0,
    weight 1): the dominant cluster share, then the other, then start time."""
    shares = (
        used[0] / cluster[0] if cluster[0] else 0.0,
        used[1] / cluster[1] if cluster[1] else 0.0,
    )
    dominant = 1 if shares[1] > shares[0] else 0
    return (shares[dominant], shares[1 - dominant], start, index)


# --------------------------------------------------------------------------- limits


def fits_max_share(
    used_mem: float,
    used_vc: float,
    request_mem: float,
    request_vc: float,
    max_mem: float,
    max_vc: float,
) -> bool:
    """FSQueue.fitsInMaxShare for one queue: its usage plus the container stays
    within its maxResources on every resource (the caller asks it of the leaf and
    each ancestor, as fitsInMaxShare recurses to the parent). Plain numbers: the
    simulator asks it for every app it considers."""
    return used_mem + request_mem <= max_mem and used_vc + request_vc <= max_vc


def can_app_be_runnable(
    user_running: int, user_max: float, queues: Sequence[tuple[int, float]]
) -> bool:
    """MaxRunningAppsEnforcer.canAppBeRunnable: the user runs fewer apps than its
    maxRunningApps (``userMaxAppsDefault``) and the leaf and every ancestor, given
    as (running apps, maxRunningApps), run fewer than theirs."""
    if user_running >= user_max:
        return False
    return all(running < most for running, most in queues)


# --------------------------------------------------------------------------- heartbeats

UNLIMITED_ASSIGNMENTS = 1 << 30


def heartbeat_assignments(*, assign_multiple: bool, max_assign: int, dynamic: bool) -> int:
    """FairScheduler.shouldContinueAssigning as a count: one container per node
    heartbeat unless ``assignmultiple``; then ``maxassign`` (0 or less: no count
    limit), or no count limit with ``dynamic.max.assign`` (the amount limit of
    :func:`keep_assigning` applies instead)."""
    if not assign_multiple:
        return 1
    if dynamic or max_assign <= 0:
        return UNLIMITED_ASSIGNMENTS
    return max_assign


def keep_assigning(granted: tuple[float, float], start_free: tuple[float, float]) -> bool:
    """FairScheduler.shouldContinueAssigning with ``dynamic.max.assign``: a heartbeat
    goes on while what it granted fits in half of what the node had unallocated
    when it began (Resources.fitsIn; "equal to" allows one container more)."""
    return granted[0] <= start_free[0] * 0.5 and granted[1] <= start_free[1] * 0.5
