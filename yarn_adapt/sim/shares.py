"""Dividing an amount among queues: the Fair Scheduler's weighted fair shares and the
Capacity Scheduler preemption policy's ideal assignment."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .state import QueueNode

_EPSILON = 1e-9
_BISECTIONS = 64


def fair_shares(
    weights: Sequence[float],
    minimums: Sequence[float],
    maximums: Sequence[float],
    total: float,
) -> list[float]:
    """ComputeFairShares: find the ratio R with ``sum(clamp(w * R, min, max))`` equal
    to ``min(total, sum(max))`` and give each ``clamp(w * R, min, max)``, floored to a
    whole unit as YARN does (the search stops once the floored shares add up). A
    schedulable with weight 0 gets its minimum."""
    fixed = [minimums[i] if weights[i] <= 0 else None for i in range(len(weights))]
    taken = sum(f for f in fixed if f is not None)
    free = [i for i, f in enumerate(fixed) if f is None]
    target = min(max(total - taken, 0.0), sum(maximums[i] for i in free))

    def share(i: int, ratio: float) -> float:
        return float(math.floor(_clamp(weights[i] * ratio, minimums[i], maximums[i])))

    def used(ratio: float) -> float:
        return sum(share(i, ratio) for i in free)

    high = 1.0
    while used(high) < target and high < 1e18:
        high *= 2
    low = 0.0
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        planned = used(middle)
        if planned == target:
            high = middle
            break
        low, high = (middle, high) if planned < target else (low, middle)
    return [share(i, high) if f is None else f for i, f in enumerate(fixed)]


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def proportional_fill(
    amount: float, wanted: Sequence[float], weights: Sequence[float]
) -> list[float]:
    """Give ``amount`` out in proportion to ``weights``, never more than a queue
    wants; what a satisfied queue leaves goes round again to the others."""
    given = [0.0] * len(wanted)
    open_ = [i for i, w in enumerate(wanted) if w > _EPSILON]
    left = amount
    while left > _EPSILON and open_:
        weight_sum = sum(weights[i] for i in open_)
        spent = 0.0
        for i in open_:
            part = weights[i] / weight_sum if weight_sum > 0 else 1.0 / len(open_)
            step = min(left * part, wanted[i] - given[i])
            given[i] += step
            spent += step
        left -= spent
        open_ = [i for i in open_ if wanted[i] - given[i] > _EPSILON]
        if spent <= _EPSILON:
            break
    return given


def ideal_shares(root: QueueNode, total: float) -> dict[str, float]:
    """Ideal memory per queue: each parent's ideal split among its children by
    guarantee, capped by what each uses plus asks for and its maximum."""
    ideal = {root.path: min(total, _wanted(root))}
    _split(root, ideal)
    return ideal


def _split(parent: QueueNode, ideal: dict[str, float]) -> None:
    children = parent.children
    if not children:
        return
    given = proportional_fill(
        ideal[parent.path], [_wanted(c) for c in children], [c.guar_mem for c in children]
    )
    for child, amount in zip(children, given, strict=True):
        ideal[child.path] = amount
        _split(child, ideal)


def _wanted(queue: QueueNode) -> float:
    return min(queue.max_mem, float(queue.used_mem + queue.pending_mem))
