"""Dividing an amount among queues: the Capacity Scheduler preemption policy's ideal
assignment. (The Fair Scheduler's fair shares are
:func:`yarn_adapt.semantics.fair.fair_shares`.)"""

from __future__ import annotations

from collections.abc import Sequence

from .state import QueueNode

_EPSILON = 1e-9


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
