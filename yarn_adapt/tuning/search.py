"""Group-level search: Recursive Random Search (RRS) and exhaustive search over a grid.

A group's configuration space is a finite grid, quantized at the required
granularity: dimension ``j`` has ``dimensions[j].size`` values (a quantized capacity
or weight, or a policy choice). Ordered dimensions have a meaningful neighbourhood;
categorical ones (a scheduling policy) do not. The search sees only value indices and
an objective that maps a batch of points to latencies (lower is better); what a point
means is the space's business. Granularities below are shares of the whole grid.

RRS as AdaptiveConfig §3.3.3 uses it (after Ye & Kalyanaraman, SIGMETRICS 2003):

* Sampling ``n`` points uniformly from a region puts at least one of them in the
  region's best share ``g`` with probability ``1 - (1 - g)**n``; so
  ``n = ln(1 - p) / ln(1 - g)`` samples reach confidence ``p``.
* Iteration 0 samples the whole space at the initial granularity ``g0``. Each next
  iteration realigns the region on the best point so far and shrinks the region's
  volume and the granularity by the scaling factor ``gamma``, so the relative
  granularity (and ``n``) stays the same while the absolute one becomes
  ``g0 * gamma**t``.
* The search stops after the last iteration whose granularity is not finer than the
  required ``gt``: ``x = floor(log_gamma(gt / g0)) + 1`` iterations.

Proposition 3.1 counts ``n * x`` samples; the paper's example (``g = g0 = 1/27``,
``gt = 1/270``, ``p = 0.99``, ``gamma = 0.5``) gives ``122.03 * 4 = 488``. Samples are
whole numbers here, so an iteration takes ``ceil(n)`` of them (123; 492 in all) and
the confidence is never below ``p``. Inside an iteration points are drawn without
replacement (never less likely to hit the best share than with replacement), and
every point is evaluated once: repeated points across iterations come from a memo, so
``evaluations`` (distinct comparator calls) is at most ``samples``. A caller that
knows some points must score alike (say, two policies the rules map to the same
mechanism) passes a ``key``; points sharing a key are evaluated once.

When the whole grid is no larger than the samples RRS would draw, enumerating it is
cheaper and exact: ``strategy="auto"`` then searches exhaustively.

Coarse-to-fine (``strategy="refine"``, :func:`refine_search`) is for a grid whose
ordered dimensions are finer than they need to be sampled at first (a refined
§4.3 set): it scores a coarse lattice -- every ``2**k``-th value of each ordered
dimension (about ``COARSE_POINTS`` of them, the last value included) -- then a
pattern search around the best point: its neighbours one stride away along each
ordered dimension, moving while that improves, the stride halved down to one value.
Categorical dimensions (a Fair group's policy) are taken on their own rather than
crossed with the lattice: every combination of their values at the lattice's middle
point, the lattice and the pattern search under the best of them, and at the point
where that ends every combination again -- when another one is better there, the
pattern search goes on under it. (Crossing them tripled a Fair group's evaluations,
29 against 12 a group at 12,000 nodes / 500 groups, for no smaller loss against the
full search.) A lattice that scores alike everywhere stops there (early stopping:
the group's configuration does not matter at these resources, and no point of it
was better). A grid with no ordered dimension finer than the coarse lattice, or
whose coarse lattice alone is more than RRS would sample, is searched as ``auto``
would (the same answer). It is a heuristic (the coarse lattice can miss a narrow
optimum between two of its points): ``yarn-adapt bench search-scale`` reports what
it loses against the full search.

Early stopping (``RRSSettings.patience``): RRS stops after that many iterations in
a row that found nothing better -- each iteration only narrows the region around
the incumbent, so one that cannot improve on it rarely precedes one that does.
``None`` (the default) runs every iteration, as Proposition 3.1 counts them.

Every search also returns the best distinct points it evaluated, best first
(``SearchResult.ranked``): the tuner re-scores them at other resource levels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from yarn_adapt.tuning.space import Dimension

Point = tuple[int, ...]
BatchObjective = Callable[[Sequence[Point]], Sequence[float]]
PointKey = Callable[[Point], Hashable]
Strategy = Literal["auto", "rrs", "exhaustive", "refine"]

_LOG_SLACK = 1e-9  # log_gamma(0.1) is 3.3219..., but log_0.5(1/8) must count as 3
RANKED_KEPT = 32
COARSE_POINTS = 5
"""``refine``: the coarse lattice has at least this many values per ordered dimension."""


class SearchSpace(Protocol):
    """What the search needs of a configuration space (``space.ConfigSpace`` has it)."""

    @property
    def dimensions(self) -> tuple[Dimension, ...]: ...


@dataclass(frozen=True)
class Grid:
    """A bare grid (tests and benchmarks that need no decoding)."""

    dimensions: tuple[Dimension, ...]

    @classmethod
    def of(cls, *sizes: int, categorical: Sequence[int] = ()) -> Grid:
        """A grid of ``sizes``; the dimensions at indices ``categorical`` are unordered."""
        return cls(
            tuple(Dimension(f"x{i}", size, i not in categorical) for i, size in enumerate(sizes))
        )


@dataclass(frozen=True, kw_only=True)
class RRSSettings:
    """RRS parameters named as in Proposition 3.1 (defaults: the paper's example)."""

    confidence: float = 0.99
    initial_granularity: float = 1 / 27
    final_granularity: float = 1 / 270
    scale: float = 0.5
    patience: int | None = None

    def __post_init__(self) -> None:
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be at least 1, got {self.patience}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if not 0.0 < self.final_granularity <= self.initial_granularity < 1.0:
            raise ValueError(
                "granularities must satisfy 0 < final <= initial < 1, got "
                f"{self.final_granularity} and {self.initial_granularity}"
            )
        if not 0.0 < self.scale < 1.0:
            raise ValueError(f"scale must be in (0, 1), got {self.scale}")

    @classmethod
    def for_levels(cls, coarse_levels: int, *, refinement: float = 10.0, **kw: Any) -> RRSSettings:
        """Settings whose initial granularity is one point of a ``coarse_levels`` grid
        and whose required granularity is ``refinement`` times finer (§4.5.1: 10)."""
        initial = 1.0 / coarse_levels
        return cls(initial_granularity=initial, final_granularity=initial / refinement, **kw)

    @property
    def exact_samples_per_iteration(self) -> float:
        """``ln(1 - p) / ln(1 - g)``, not rounded."""
        return math.log1p(-self.confidence) / math.log1p(-self.initial_granularity)

    @property
    def samples_per_iteration(self) -> int:
        return math.ceil(self.exact_samples_per_iteration - _LOG_SLACK)

    @property
    def iterations(self) -> int:
        """``floor(log_gamma(gt / g0)) + 1``."""
        ratio = self.final_granularity / self.initial_granularity
        return math.floor(math.log(ratio) / math.log(self.scale) + _LOG_SLACK) + 1

    @property
    def proposition_samples(self) -> float:
        """Proposition 3.1's count ``n * x`` with ``n`` unrounded (the paper's figures)."""
        return self.exact_samples_per_iteration * self.iterations

    @property
    def planned_samples(self) -> int:
        """Samples this implementation draws at most (whole samples per iteration)."""
        return self.samples_per_iteration * self.iterations


@dataclass(frozen=True)
class SearchResult:
    """The best point found and what finding it cost."""

    point: Point
    value: float
    evaluations: int
    samples: int
    iterations: int
    strategy: Literal["rrs", "exhaustive", "refine"]
    ranked: tuple[tuple[Point, float], ...] = ()
    worst: float = math.nan
    """The highest value scored (equal to ``value``: every point scored alike)."""


def search(
    space: SearchSpace,
    objective: BatchObjective,
    settings: RRSSettings,
    rng: np.random.Generator,
    strategy: Strategy = "auto",
    key: PointKey | None = None,
) -> SearchResult:
    """Minimise ``objective`` over ``space``: RRS, or exhaustive when that is cheaper
    (``auto``) or asked for. Points with the same ``key`` are known to score the same
    and are evaluated once."""
    if strategy == "refine":
        found = refine_search(space, objective, settings, key)
        if found is not None:
            return found
        strategy = "auto"
    if strategy == "exhaustive" or (
        strategy == "auto" and grid_size(_shape(space)) <= settings.planned_samples
    ):
        return exhaustive_search(space, objective, key)
    return recursive_random_search(space, objective, settings, rng, key)


def grid_size(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _shape(space: SearchSpace) -> tuple[int, ...]:
    return tuple(d.size for d in space.dimensions)


def exhaustive_search(
    space: SearchSpace, objective: BatchObjective, key: PointKey | None = None
) -> SearchResult:
    """Evaluate every point (in row-major order; the first of equal minima wins)."""
    memo = _Memo(objective, key)
    points = [tuple(int(i) for i in p) for p in np.ndindex(*_shape(space))]
    best = memo.best_of(points, incumbent=None)
    return SearchResult(
        best,
        memo.value(best),
        memo.evaluations,
        len(points),
        1,
        "exhaustive",
        memo.ranked(),
        memo.worst,
    )


def coarse_strides(shape: Sequence[int], ordered: Sequence[bool]) -> tuple[int, ...]:
    """Per dimension, the largest power of two that still leaves ``COARSE_POINTS``
    lattice values (1 for a categorical or a short dimension)."""
    strides = []
    for size, is_ordered in zip(shape, ordered, strict=True):
        stride = 1
        while is_ordered and (size - 1) // (stride * 2) >= COARSE_POINTS - 1:
            stride *= 2
        strides.append(stride)
    return tuple(strides)


def refine_search(
    space: SearchSpace,
    objective: BatchObjective,
    settings: RRSSettings,
    key: PointKey | None = None,
) -> SearchResult | None:
    """Coarse lattice, then a pattern search with halving strides (module docstring);
    ``None`` when the grid is not for it (its coarse lattice is the whole grid, or more
    than ``settings`` would sample)."""
    shape = _shape(space)
    ordered = tuple(d.ordered for d in space.dimensions)
    strides = coarse_strides(shape, ordered)
    if all(stride == 1 for stride in strides):
        return None
    lattice = [
        sorted({*range(0, size, stride), size - 1})
        for size, stride in zip(shape, strides, strict=True)
    ]
    coarse = [tuple(p) for p in itertools.product(*lattice)]
    if len(coarse) > settings.planned_samples:
        return None
    memo = _Memo(objective, key)
    categorical = [j for j, is_ordered in enumerate(ordered) if not is_ordered]
    if categorical:
        best = _categorical_then_lattice(memo, lattice, categorical, shape)
    else:
        best = memo.best_of(coarse, incumbent=None)
    samples, iterations = memo.evaluations, 1
    flat = memo.worst == memo.value(best)  # nothing to refine around: stop early
    while not flat:
        while any(stride > 1 for stride in strides):
            strides = tuple(max(1, stride // 2) for stride in strides)
            moved = True
            while moved:
                around = _neighbours(best, shape, strides, ordered)
                samples += len(around)
                iterations += 1
                found = memo.best_of(around, incumbent=best) if around else best
                moved = found != best
                best = found
        variants = _variants(best, categorical, shape)
        samples += len(variants)
        found = memo.best_of(variants, incumbent=best)
        if found == best:
            break
        best, strides = found, tuple(2 if size > 1 else 1 for size in shape)
    return SearchResult(
        best,
        memo.value(best),
        memo.evaluations,
        samples,
        iterations,
        "refine",
        memo.ranked(),
        memo.worst,
    )


def _categorical_then_lattice(
    memo: _Memo, lattice: Sequence[Sequence[int]], categorical: Sequence[int], shape: Sequence[int]
) -> Point:
    """The coarse stage with categorical dimensions taken on their own: every
    categorical combination at the lattice's middle point, then the ordered lattice
    under the best of them."""
    middle = tuple(values[len(values) // 2] for values in lattice)
    chosen = memo.best_of(_variants(middle, categorical, shape), incumbent=None)
    fixed = [[chosen[j]] if j in categorical else values for j, values in enumerate(lattice)]
    return memo.best_of([tuple(p) for p in itertools.product(*fixed)], incumbent=chosen)


def _variants(centre: Point, categorical: Sequence[int], shape: Sequence[int]) -> list[Point]:
    """``centre`` with every combination of the categorical dimensions' values."""
    found = []
    for values in itertools.product(*(range(shape[j]) for j in categorical)):
        point = list(centre)
        for position, value in zip(categorical, values, strict=True):
            point[position] = value
        found.append(tuple(point))
    return found


def _neighbours(
    centre: Point, shape: Sequence[int], strides: Sequence[int], ordered: Sequence[bool]
) -> list[Point]:
    """The points one stride from ``centre`` along each ordered dimension (the
    categorical ones as they are)."""
    found: list[Point] = []
    for j, is_ordered in enumerate(ordered):
        for step in (-strides[j], strides[j]) if is_ordered else ():
            if 0 <= centre[j] + step < shape[j]:
                found.append((*centre[:j], centre[j] + step, *centre[j + 1 :]))
    return found


def recursive_random_search(
    space: SearchSpace,
    objective: BatchObjective,
    settings: RRSSettings,
    rng: np.random.Generator,
    key: PointKey | None = None,
) -> SearchResult:
    """RRS as described in the module docstring; deterministic for a seeded ``rng``."""
    memo = _Memo(objective, key)
    shape = np.asarray(_shape(space), dtype=np.int64)
    ordered = np.asarray([d.ordered for d in space.dimensions], dtype=bool)
    best: Point | None = None
    samples = iterations = idle = 0
    for iteration in range(settings.iterations):
        low, widths = _region(shape, ordered, best, settings.scale**iteration)
        points = _sample_region(low, widths, settings.samples_per_iteration, rng)
        samples += len(points)
        iterations += 1
        before = memo.value(best) if best is not None else math.inf
        best = memo.best_of(points, incumbent=best)
        idle = idle + 1 if memo.value(best) >= before else 0
        if settings.patience is not None and idle >= settings.patience:
            break
    assert best is not None  # at least one iteration always runs
    return SearchResult(
        best,
        memo.value(best),
        memo.evaluations,
        samples,
        iterations,
        "rrs",
        memo.ranked(),
        memo.worst,
    )


def _region(
    shape: np.ndarray, ordered: np.ndarray, centre: Point | None, volume_share: float
) -> tuple[np.ndarray, np.ndarray]:
    """The box (lowest corner, widths) of ``volume_share`` of the grid around ``centre``.

    Only ordered dimensions shrink, each by the same factor; categorical ones stay
    whole. The box is shifted to lie inside the grid (RRS's realignment)."""
    if centre is None:
        return np.zeros_like(shape), shape.copy()
    per_dimension = volume_share ** (1.0 / max(1, int(ordered.sum())))
    shrunk = np.maximum(1, np.ceil(shape * per_dimension - _LOG_SLACK)).astype(np.int64)
    widths = np.where(ordered, shrunk, shape)
    low = np.clip(np.asarray(centre) - (widths - 1) // 2, 0, shape - widths)
    return np.where(ordered, low, 0), widths


def _sample_region(
    low: np.ndarray, widths: np.ndarray, wanted: int, rng: np.random.Generator
) -> list[Point]:
    """``wanted`` distinct uniform points of the box, or all of it if it is smaller."""
    size = grid_size([int(w) for w in widths])
    flat = np.arange(size) if size <= wanted else rng.choice(size, wanted, replace=False)
    offsets = np.stack(np.unravel_index(flat, tuple(int(w) for w in widths)), axis=1)
    return [tuple(int(v) for v in row) for row in offsets + low]


class _Memo:
    """Evaluates each distinct point -- each distinct key -- once, in batches."""

    def __init__(self, objective: BatchObjective, key: PointKey | None) -> None:
        self._objective = objective
        self._key: PointKey = key if key is not None else _itself
        self._values: dict[Hashable, float] = {}
        self._keys: dict[Point, Hashable] = {}

    @property
    def evaluations(self) -> int:
        return len(self._values)

    def value(self, point: Point) -> float:
        return self._values[self._keys[point]]

    @property
    def worst(self) -> float:
        return max(self._values.values(), default=math.nan)

    def ranked(self, most: int = RANKED_KEPT) -> tuple[tuple[Point, float], ...]:
        """The best evaluated keys, one point each (the first seen), best first."""
        first: dict[Hashable, Point] = {}
        for point, key in self._keys.items():
            first.setdefault(key, point)
        order = sorted(first.items(), key=lambda item: self._values[item[0]])
        return tuple((point, self._values[key]) for key, point in order[:most])

    def best_of(self, points: Iterable[Point], incumbent: Point | None) -> Point:
        """The best of ``points`` and ``incumbent`` (the earlier point wins ties)."""
        candidates = list(points)
        self._evaluate_new(candidates)
        best = incumbent if incumbent is not None else candidates[0]
        for point in candidates:
            if self.value(point) < self.value(best):
                best = point
        return best

    def _evaluate_new(self, points: list[Point]) -> None:
        fresh: dict[Hashable, Point] = {}
        for point in points:
            key = self._keys.get(point)
            if key is None:
                key = self._keys[point] = self._key(point)
            if key not in self._values:
                fresh.setdefault(key, point)
        if fresh:
            values = self._objective(list(fresh.values()))
            self._values.update(zip(fresh, (float(v) for v in values), strict=True))


def _itself(point: Point) -> Hashable:
    return point
