"""Cluster-level search: split the cluster's containers between groups (Algorithm 3).

Each group comes with its best latency ``L*(o_i, r)`` at a few candidate resource
levels ``r`` between its lower bound (an AM container per job plus scheduling
constraints) and its upper bound (demand saturation). The value of giving a group
``k`` containers above its lower bound is the latency reduction (Eqn. 4)::

    LR(o_i, k) = L*(o_i, r_lower_i) - L*(o_i, r_lower_i + k)

and ``V[i, r]``, the largest total reduction of the first ``i`` groups using at most
``r`` extra containers, obeys Eqn. (5)::

    V[i, r] = max over candidate k <= r of  LR(o_i, k) + V[i - 1, r - k]

(``k = 0`` is the paper's "no extra resource to group i" branch). As in Algorithm 3,
the row for group ``i`` only runs to ``r_sum_i = min(r_sum_{i-1} + span_i, r_alloc)``
with ``span_i = r_upper_i - r_lower_i``, which keeps the table small when groups'
demands are small next to the cluster.

One row is a max-plus convolution of the previous row with the group's values,
computed with numpy one candidate level at a time: ``O(K_i * r_sum_i)`` for ``K_i``
candidate levels, ``O(m * r_sum^2)`` in the worst case (every level a candidate) as
Proposition 3.2 says. The result is exact over the candidate levels given; it needs
no monotonicity of ``L*``. Ties go to fewer containers, so extra containers that
reduce nothing stay unallocated (the caller decides where spare capacity goes).

The objective is Eqn. (3): the sum over groups of each group's average job latency.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from yarn_adapt.errors import InputError


class InfeasibleLowerBounds(InputError):
    """The groups' lower bounds need more containers than the cluster has."""


@dataclass(frozen=True)
class GroupCurve:
    """``L*(o_i, r)`` of one group at its candidate levels (containers, ascending).

    ``levels[0]`` is the lower bound and ``levels[-1]`` the upper bound."""

    name: str
    levels: tuple[int, ...]
    latencies: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.levels or len(self.levels) != len(self.latencies):
            raise ValueError(f"group {self.name!r}: levels and latencies must pair up")
        if any(b <= a for a, b in itertools.pairwise(self.levels)):
            raise ValueError(f"group {self.name!r}: levels must strictly increase")
        if self.levels[0] < 0:
            raise ValueError(f"group {self.name!r}: negative lower bound {self.levels[0]}")

    @property
    def lower(self) -> int:
        return self.levels[0]

    @property
    def upper(self) -> int:
        return self.levels[-1]

    def latency_at(self, containers: int) -> float:
        """``L*`` at a candidate level."""
        return self.latencies[self.levels.index(containers)]


@dataclass(frozen=True)
class ClusterAllocation:
    """Algorithm 3's answer: containers and ratio per group, and the predicted total."""

    names: tuple[str, ...]
    containers: tuple[int, ...]
    ratios: tuple[float, ...]
    predicted_total_latency: float
    latency_reduction: float
    unallocated: int


def best_cluster_allocation(curves: Sequence[GroupCurve], total: int) -> ClusterAllocation:
    """Algorithm 3: the containers per group that minimise the sum of ``L*``."""
    lowers = sum(curve.lower for curve in curves)
    spare = total - lowers
    if spare < 0:
        raise InfeasibleLowerBounds(
            f"the groups' lower bounds need {lowers} containers but the cluster has {total}"
        )
    table = _reduction_table(curves, spare)
    extras = _backtrack(curves, table)
    return _allocation(curves, extras, total)


@dataclass(frozen=True)
class _Row:
    """One group's DP row: the best reduction and the chosen level for each ``r``."""

    values: np.ndarray
    choice: np.ndarray


def _reduction_table(curves: Sequence[GroupCurve], spare: int) -> list[_Row]:
    rows: list[_Row] = []
    previous = np.zeros(1)
    for curve in curves:
        row = _convolve(previous, _extras(curve), _reductions(curve), spare)
        rows.append(row)
        previous = row.values
    return rows


def _extras(curve: GroupCurve) -> np.ndarray:
    return np.asarray(curve.levels, dtype=np.int64) - curve.lower


def _reductions(curve: GroupCurve) -> np.ndarray:
    latencies: np.ndarray = np.asarray(curve.latencies, dtype=float)
    reductions: np.ndarray = latencies[0] - latencies
    return reductions


def _convolve(previous: np.ndarray, extras: np.ndarray, gains: np.ndarray, spare: int) -> _Row:
    """``V[i, r] = max_k gains[k] + V[i-1, r - extras[k]]`` for ``r <= r_sum_i``.

    ``previous`` covers ``0..r_sum_{i-1}``; past its end it stays at its last value
    (it is "the best with at most r", so it never decreases)."""
    width = min(len(previous) - 1 + int(extras[-1]), spare) + 1
    base = np.full(width, previous[-1])
    base[: len(previous)] = previous[:width]
    values = base.copy()  # level 0: no extra container, gains[0] == 0
    choice = np.zeros(width, dtype=_index_dtype(len(extras)))
    for index in range(1, len(extras)):
        _relax(values, choice, base, int(extras[index]), float(gains[index]), index)
    return _Row(values, choice)


def _relax(
    values: np.ndarray, choice: np.ndarray, base: np.ndarray, extra: int, gain: float, index: int
) -> None:
    if extra >= len(values):
        return
    candidate = base[: len(values) - extra] + gain
    current = values[extra:]
    better = candidate > current  # strict: ties keep fewer containers
    np.maximum(current, candidate, out=current)
    np.putmask(choice[extra:], better, index)


def _index_dtype(levels: int) -> type[np.unsignedinteger]:
    return np.uint8 if levels <= 256 else np.uint16 if levels <= 65536 else np.uint32


def _backtrack(curves: Sequence[GroupCurve], rows: Sequence[_Row]) -> list[int]:
    """Algorithm 3 lines 13-18: walk the choices back from the last group."""
    extras: list[int] = [0] * len(curves)
    budget = len(rows[-1].values) - 1 if rows else 0
    for i in range(len(curves) - 1, -1, -1):
        r = min(budget, len(rows[i].values) - 1)
        extras[i] = int(_extras(curves[i])[rows[i].choice[r]])
        budget = r - extras[i]
    return extras


def _allocation(
    curves: Sequence[GroupCurve], extras: Sequence[int], total: int
) -> ClusterAllocation:
    containers = tuple(c.lower + e for c, e in zip(curves, extras, strict=True))
    latencies = [c.latency_at(n) for c, n in zip(curves, containers, strict=True)]
    baseline = sum(c.latencies[0] for c in curves)
    return ClusterAllocation(
        names=tuple(c.name for c in curves),
        containers=containers,
        ratios=tuple(n / total if total else 0.0 for n in containers),
        predicted_total_latency=float(sum(latencies)),
        latency_reduction=float(baseline - sum(latencies)),
        unallocated=total - sum(containers),
    )
