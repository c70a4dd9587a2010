"""The configuration space of one group (AdaptiveConfig §3.3.3).

A *group* is a parent queue and its child leaf queues (``root`` and its leaves for a
flat tree). Its group-level configuration is, per child, the Capacity Scheduler's
``capacity`` / ``maximum-capacity`` or the Fair Scheduler's ``weight``, and the
ordering (Capacity) or scheduling (Fair) policy. The cluster-level part -- each
group's ratio of the cluster -- is the DP's output (:mod:`yarn_adapt.tuning.cluster_dp`),
not a dimension here.

The space is a grid. Each :class:`Parameter` has a finite, indexed domain: a
continuous parameter is quantized into ``d`` values, equally spaced or drawn at
random (§3.3.3, :func:`quantize`); a categorical one lists its choices. A *point* is
a tuple of indices, one per parameter, so a space of ``k`` parameters of ``d`` values
each holds ``d**k`` points. :meth:`ConfigSpace.decode` turns a point into a
:class:`GroupSetting` (what to write for each child queue); :func:`apply_setting`
(in :mod:`yarn_adapt.tuning.apply`) turns that into a scheduler configuration.

Contract for searchers (``yarn_adapt.tuning.search``), stable:

* ``space.dimensions`` -- one :class:`Dimension` (``size``, ``ordered``) per parameter;
  ``space.size`` -- the number of points (product of sizes);
* every tuple of in-range indices is a valid point (sums are normalised on decoding,
  so no point is ever rejected);
* ``space.points()`` -- every point, in lexicographic order (exhaustive search);
* ``space.random_point(rng, box)`` -- a uniform point, within ``box`` when given;
* ``space.box_around(point, fraction)`` -- the sub-grid centred on ``point`` that keeps
  ``fraction`` of each *ordered* dimension's values (at least one); unordered
  (categorical) dimensions keep their whole domain, since nearness means nothing there;
* ``space.neighbours(point, radius)`` -- points whose ordered indices differ by at most
  ``radius`` and whose categorical indices are any value;
* ``space.granularity`` -- ``1 / size``: the share of the space one point is, the
  ``g`` of Proposition 3.1.

Capacity shares of one parent must add up to 100 in YARN, so a share parameter holds a
*relative* amount and decoding normalises the children's shares to 100 (rounded to
0.01, the remainder on the largest). A split parameter holds the whole vector of
shares at once: the paper's candidate sets (§2.3.1, §4.3) are splits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import numpy as np

from yarn_adapt.errors import SettingsError

Point = tuple[int, ...]
Box = tuple[range, ...]

CAPACITY_POLICIES = ("fifo", "fair")
FAIR_POLICIES = ("fifo", "fair", "drf")
SHARE_DECIMALS = 2
CLUSTER_SHARE_DECIMALS = 6
"""Groups' shares of the cluster (Algorithm 3's split) are written at 10^-6 %: at
0.01 % a group of a 48,000-container cluster moves in steps of 4.8 containers, and
a group given 2 containers of 6,400 read back 1.92 -- one container, its AM alone."""


class Scheduler(StrEnum):
    CAPACITY = "capacity"
    FAIR = "fair"


class ParameterKind(StrEnum):
    """What a parameter sets on its queues.

    ``SHARE``: one queue's relative capacity (Capacity) or weight (Fair);
    ``SPLIT``: the shares of all its queues at once (a tuple, one per queue);
    ``ELASTICITY``: how far ``maximum-capacity`` reaches from ``capacity`` to 100 %
    (0 = no elasticity, 1 = the whole parent), Capacity only;
    ``POLICY``: the ordering / scheduling policy of each of its queues."""

    SHARE = "share"
    SPLIT = "split"
    ELASTICITY = "elasticity"
    POLICY = "policy"


ParameterValue = float | str | tuple[float, ...]


@dataclass(frozen=True)
class Parameter:
    """One dimension of the grid: ``values`` indexed 0..size-1, applied to ``queues``
    (leaf paths). ``ordered`` is true for quantized continuous values (neighbouring
    indices are neighbouring settings) and false for categorical ones."""

    name: str
    kind: ParameterKind
    queues: tuple[str, ...]
    values: tuple[ParameterValue, ...]
    ordered: bool

    def __post_init__(self) -> None:
        if not self.values:
            raise SettingsError(f"parameter {self.name}: empty domain")
        if not self.queues:
            raise SettingsError(f"parameter {self.name}: applies to no queue")
        if self.kind is ParameterKind.SPLIT:
            self._check_split()

    def _check_split(self) -> None:
        for value in self.values:
            if not isinstance(value, tuple) or len(value) != len(self.queues):
                raise SettingsError(
                    f"parameter {self.name}: a split needs one share per queue, got {value!r}"
                )

    @property
    def size(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Dimension:
    """What a searcher needs to know of a parameter."""

    name: str
    size: int
    ordered: bool


@dataclass(frozen=True)
class QueueSetting:
    """What one child queue gets. ``share``: capacity percent of the parent (Capacity,
    normalised so siblings add up to 100) or weight (Fair). ``maximum``: the
    maximum-capacity percent (Capacity; ``None`` leaves it unset, i.e. 100)."""

    path: str
    share: float
    policy: str
    maximum: float | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class GroupSetting:
    """A decoded point: the group-level configuration of one parent's children."""

    scheduler: Scheduler
    parent: str
    queues: tuple[QueueSetting, ...]

    def queue(self, path: str) -> QueueSetting:
        return next(q for q in self.queues if q.path == path)

    def describe(self) -> str:
        """One line, e.g. ``q1=33.33%/max 100 fifo, q2=66.67% fifo``."""
        return ", ".join(_describe_queue(self.scheduler, q) for q in self.queues)


def _describe_queue(scheduler: Scheduler, queue: QueueSetting) -> str:
    amount = f"{queue.share:g}%" if scheduler is Scheduler.CAPACITY else f"w{queue.share:g}"
    maximum = f"/max {queue.maximum:g}" if queue.maximum is not None else ""
    return f"{queue.name}={amount}{maximum} {queue.policy}"


class ConfigSpace(Protocol):
    """What a group-level searcher programs against (see the module docstring)."""

    @property
    def dimensions(self) -> tuple[Dimension, ...]: ...

    @property
    def size(self) -> int: ...

    @property
    def granularity(self) -> float: ...

    def decode(self, point: Point) -> GroupSetting: ...

    def points(self) -> Iterator[Point]: ...

    def random_point(self, rng: np.random.Generator, box: Box | None = None) -> Point: ...

    def box_around(self, point: Point, fraction: float) -> Box: ...

    def neighbours(self, point: Point, radius: int) -> Iterator[Point]: ...

    def contains(self, point: Point) -> bool: ...


@dataclass(frozen=True)
class GridSpace:
    """The grid of ``parameters`` for the children ``queues`` of ``parent``.

    Queues no parameter sets keep ``default_share`` (Capacity: an equal part of
    what is left; Fair: weight 1) and ``default_policy``."""

    scheduler: Scheduler
    parent: str
    queues: tuple[str, ...]
    parameters: tuple[Parameter, ...]
    default_policy: str = "fifo"
    _dims: tuple[Dimension, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unknown = {q for p in self.parameters for q in p.queues} - set(self.queues)
        if unknown:
            raise SettingsError(f"group {self.parent}: parameters name unknown queues {unknown}")
        if not self.queues:
            raise SettingsError(f"group {self.parent}: no child queues")
        dims = tuple(Dimension(p.name, p.size, p.ordered) for p in self.parameters)
        object.__setattr__(self, "_dims", dims)

    # ------------------------------------------------------------------ shape

    @property
    def dimensions(self) -> tuple[Dimension, ...]:
        return self._dims

    @property
    def size(self) -> int:
        return math.prod(d.size for d in self._dims)

    @property
    def granularity(self) -> float:
        return 1.0 / self.size

    def contains(self, point: Point) -> bool:
        return len(point) == len(self._dims) and all(
            0 <= i < d.size for i, d in zip(point, self._dims, strict=True)
        )

    # ------------------------------------------------------------------ walking

    def points(self) -> Iterator[Point]:
        return itertools.product(*(range(d.size) for d in self._dims))

    def full_box(self) -> Box:
        return tuple(range(d.size) for d in self._dims)

    def random_point(self, rng: np.random.Generator, box: Box | None = None) -> Point:
        ranges = box if box is not None else self.full_box()
        return tuple(r[int(rng.integers(len(r)))] for r in ranges)

    def box_around(self, point: Point, fraction: float) -> Box:
        self._check(point)
        if not 0 < fraction <= 1:
            raise SettingsError(f"box fraction {fraction} must be in (0, 1]")
        return tuple(
            _window(i, d.size, fraction) if d.ordered else range(d.size)
            for i, d in zip(point, self._dims, strict=True)
        )

    def neighbours(self, point: Point, radius: int) -> Iterator[Point]:
        self._check(point)
        ranges = [
            range(max(0, i - radius), min(d.size, i + radius + 1)) if d.ordered else range(d.size)
            for i, d in zip(point, self._dims, strict=True)
        ]
        return (p for p in itertools.product(*ranges) if p != point)

    def _check(self, point: Point) -> None:
        if not self.contains(point):
            raise SettingsError(f"point {point} is outside the space {self.describe_shape()}")

    def describe_shape(self) -> str:
        return " x ".join(f"{d.name}[{d.size}]" for d in self._dims) or "(empty)"

    # ------------------------------------------------------------------ decoding

    def decode(self, point: Point) -> GroupSetting:
        self._check(point)
        shares: dict[str, float] = {}
        elasticity: dict[str, float] = {}
        policies: dict[str, str] = {}
        for parameter, index in zip(self.parameters, point, strict=True):
            _assign(parameter, parameter.values[index], shares, elasticity, policies)
        return self._setting(shares, elasticity, policies)

    def _setting(
        self, shares: dict[str, float], elasticity: dict[str, float], policies: dict[str, str]
    ) -> GroupSetting:
        amounts = self._shares(shares)
        queues = tuple(
            QueueSetting(
                path,
                amounts[path],
                policies.get(path, self.default_policy),
                _maximum(amounts[path], elasticity.get(path)),
            )
            for path in self.queues
        )
        return GroupSetting(self.scheduler, self.parent, queues)

    def _shares(self, given: dict[str, float]) -> dict[str, float]:
        if self.scheduler is Scheduler.FAIR:
            return {q: float(given.get(q, 1.0)) for q in self.queues}
        return normalised_percentages([given.get(q, math.nan) for q in self.queues], self.queues)


def _assign(
    parameter: Parameter,
    value: ParameterValue,
    shares: dict[str, float],
    elasticity: dict[str, float],
    policies: dict[str, str],
) -> None:
    kind = parameter.kind
    for position, queue in enumerate(parameter.queues):
        if kind is ParameterKind.SPLIT:
            assert isinstance(value, tuple)
            shares[queue] = value[position]
        elif kind is ParameterKind.SHARE:
            shares[queue] = float(value)  # type: ignore[arg-type]
        elif kind is ParameterKind.ELASTICITY:
            elasticity[queue] = float(value)  # type: ignore[arg-type]
        else:
            policies[queue] = str(value)


def _maximum(share: float, elasticity: float | None) -> float | None:
    if elasticity is None:
        return None
    return round(share + elasticity * (100.0 - share), SHARE_DECIMALS)


def _window(index: int, size: int, fraction: float) -> range:
    width = max(1, round(size * fraction))
    start = min(max(0, index - width // 2), size - width)
    return range(start, start + width)


def normalised_percentages(
    raw: Sequence[float], queues: Sequence[str], *, covering: bool = False
) -> dict[str, float]:
    """Shares scaled to add up to exactly 100 at 0.01 resolution. Unset (NaN) shares
    get an equal part of what the set ones leave, or an equal share of 100 when none
    is set. A positive share never rounds to 0 (the smallest is 0.01): a Capacity
    parent queue at 0 % whose children add up to 100 is one YARN refuses -- Algorithm
    3 gives a group of a 48,000-container cluster a single container, 0.002 %.
    ``covering``: the cluster split's rounding (:func:`covering_percentages`)."""
    known = [r for r in raw if not math.isnan(r)]
    unset = len(raw) - len(known)
    if not known:
        filled = [1.0] * len(raw)
    else:
        total_known = sum(known)
        spare = total_known / max(1, len(known))
        filled = [spare if math.isnan(r) else r for r in raw] if unset else list(raw)
    total = sum(filled)
    if total <= 0:
        raise SettingsError(f"queue shares {list(raw)} add up to {total}: need a positive sum")
    if covering:
        return covering_percentages([100.0 * f / total for f in filled], queues, 100.0)
    smallest = 10.0**-SHARE_DECIMALS
    rounded = [round(100.0 * f / total, SHARE_DECIMALS) for f in filled]
    rounded = [max(smallest, r) if f > 0 else r for f, r in zip(filled, rounded, strict=True)]
    largest = max(range(len(rounded)), key=lambda i: rounded[i])
    rounded[largest] = round(100.0 - sum(rounded) + rounded[largest], SHARE_DECIMALS)
    return dict(zip(queues, rounded, strict=True))


def covering_percentages(
    percents: Sequence[float], queues: Sequence[str], total: float
) -> dict[str, float]:
    """``percents`` (adding up to ``total``) written at :data:`CLUSTER_SHARE_DECIMALS`
    so that none reads back below the containers it stands for: every one but the
    largest rounded up past half a step above its value (a floor of share x cluster
    then keeps whole what Algorithm 3 gave, float error and all), the largest taking
    what is left (at most 1.5 steps per queue below its value: 0.4 of a container
    for 500 groups of 48,000 containers)."""
    step = 10.0**-CLUSTER_SHARE_DECIMALS
    largest = max(range(len(percents)), key=lambda i: percents[i])
    up = [round(math.ceil(p / step + 0.5) * step, CLUSTER_SHARE_DECIMALS) for p in percents]
    up[largest] = round(total - sum(up) + up[largest], CLUSTER_SHARE_DECIMALS)
    if up[largest] <= 0:
        raise SettingsError(f"queue shares {list(percents)}: too many to round within {total}")
    return dict(zip(queues, up, strict=True))


# --------------------------------------------------------------------------- quantizing


class Quantization(StrEnum):
    """§3.3.3: a continuous domain "is equally or randomly discretized into d values"."""

    EQUAL = "equal"
    RANDOM = "random"


def quantize(
    low: float,
    high: float,
    d: int,
    mode: Quantization = Quantization.EQUAL,
    rng: np.random.Generator | None = None,
) -> tuple[float, ...]:
    """``d`` values of ``[low, high]``: equally spaced, ends included (``d = 1``: the
    midpoint), or ``d`` sorted uniform draws from ``rng`` (deterministic per seed).
    Rounded to 4 decimals so decoded settings print and compare cleanly."""
    if d < 1 or not low <= high:
        raise SettingsError(f"cannot quantize [{low}, {high}] into {d} values")
    if mode is Quantization.EQUAL:
        values = [(low + high) / 2] if d == 1 else np.linspace(low, high, d).tolist()
    else:
        generator = rng if rng is not None else np.random.default_rng(0)
        values = sorted(generator.uniform(low, high, d).tolist())
    return tuple(round(float(v), 4) for v in values)


@dataclass(frozen=True)
class SpaceSettings:
    """How :func:`quantized_space` builds a group's grid.

    ``d``: values per continuous parameter; ``share_range``: the relative share of a
    queue (Capacity: the domain the paper's §4.2 constraints give, 10-90 % per
    queue; Fair: weights); ``tune_maximum``: add a maximum-capacity (elasticity)
    parameter per Capacity queue; ``per_queue_policy``: one policy parameter per
    queue instead of one for the whole group; ``policies``: the choices (default:
    what the scheduler accepts)."""

    d: int = 7
    mode: Quantization = Quantization.EQUAL
    share_range: tuple[float, float] = (10.0, 90.0)
    tune_maximum: bool = False
    elasticity_values: tuple[float, ...] = (0.0, 0.5, 1.0)
    per_queue_policy: bool = False
    policies: tuple[str, ...] | None = None
    seed: int = 0


def quantized_space(
    scheduler: Scheduler,
    parent: str,
    queues: Sequence[str],
    settings: SpaceSettings | None = None,
) -> GridSpace:
    """The general grid of §3.3.3 for one group. With two queues a single ordered
    split parameter (the first queue's share of the pair) spans the splits; with
    more, every queue has its own share parameter (``d**n`` share points; shares are
    relative, so proportional points decode to the same split)."""
    settings = settings or SpaceSettings()
    rng = np.random.default_rng(settings.seed)
    queues = tuple(queues)
    parameters = _share_parameters(scheduler, queues, settings, rng)
    if scheduler is Scheduler.CAPACITY and settings.tune_maximum:
        parameters += tuple(
            Parameter(
                f"{q}.elasticity", ParameterKind.ELASTICITY, (q,), settings.elasticity_values, True
            )
            for q in queues
        )
    parameters += _policy_parameters(scheduler, queues, settings)
    default = "fifo" if scheduler is Scheduler.CAPACITY else "fair"
    return GridSpace(scheduler, parent, queues, parameters, default_policy=default)


def _share_parameters(
    scheduler: Scheduler,
    queues: tuple[str, ...],
    settings: SpaceSettings,
    rng: np.random.Generator,
) -> tuple[Parameter, ...]:
    if len(queues) == 1:
        return ()
    low, high = settings.share_range
    values = quantize(low, high, settings.d, settings.mode, rng)
    if len(queues) == 2:
        splits = tuple((v, round(low + high - v, 4)) for v in values)
        return (
            Parameter(f"{queues[0]}:{queues[1]}.split", ParameterKind.SPLIT, queues, splits, True),
        )
    return tuple(Parameter(f"{q}.share", ParameterKind.SHARE, (q,), values, True) for q in queues)


def _policy_parameters(
    scheduler: Scheduler, queues: tuple[str, ...], settings: SpaceSettings
) -> tuple[Parameter, ...]:
    choices = settings.policies
    if choices is None:
        choices = CAPACITY_POLICIES if scheduler is Scheduler.CAPACITY else FAIR_POLICIES
    if not choices:
        return ()
    if settings.per_queue_policy:
        return tuple(
            Parameter(f"{q}.policy", ParameterKind.POLICY, (q,), tuple(choices), False)
            for q in queues
        )
    return (Parameter("policy", ParameterKind.POLICY, queues, tuple(choices), False),)


# --------------------------------------------------------------------------- paper sets

# §2.3.1: capacity (weight) of qA (qB): 1/6 (5/6), 1/3 (2/3), 1/2 (1/2), 2/3 (1/3), 5/6 (1/6).
PAPER_TWO_QUEUE_FRACTIONS = (1 / 6, 1 / 3, 1 / 2, 2 / 3, 5 / 6)


def paper_splits(queue_count: int) -> tuple[tuple[float, ...], ...]:
    """The paper's share vectors (fractions of the group) for 2 or 4 queues.

    Two queues: the five (x, 1-x) of §2.3.1. Four queues (§4.3: "we halve the values
    ... and double their combinations"): the halved values in two arrangements,
    (x/2, x/2, (1-x)/2, (1-x)/2) and (x/2, (1-x)/2, x/2, (1-x)/2); x = 1/2 gives the
    same vector both ways, so there are 2 x 5 - 1 = 9, the paper's count."""
    if queue_count == 2:
        return tuple((x, 1 - x) for x in PAPER_TWO_QUEUE_FRACTIONS)
    if queue_count != 4:
        raise SettingsError(f"the paper's candidate sets have 2 or 4 queues, not {queue_count}")
    first = [(x / 2, x / 2, (1 - x) / 2, (1 - x) / 2) for x in PAPER_TWO_QUEUE_FRACTIONS]
    second = [(x / 2, (1 - x) / 2, x / 2, (1 - x) / 2) for x in PAPER_TWO_QUEUE_FRACTIONS]
    return tuple(dict.fromkeys(_rounded(v) for v in first + second))


def _rounded(vector: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(round(v, 6) for v in vector)


def paper_space(scheduler: Scheduler, parent: str, queues: Sequence[str]) -> GridSpace:
    """The §4.3 candidate set: Capacity 5 (2 queues) / 9 (4 queues) splits with FIFO
    queues; Fair the same splits as weights x {FIFO, Fair, DRF} in every queue:
    15 / 27 configurations."""
    queues = tuple(queues)
    # Fair weights in twelfths: whole numbers (2:10, 1:1:5:5, ...) that read well.
    scale = 100.0 if scheduler is Scheduler.CAPACITY else 12.0
    splits = tuple(tuple(round(v * scale, 4) for v in s) for s in paper_splits(len(queues)))
    parameters: tuple[Parameter, ...] = (
        Parameter("split", ParameterKind.SPLIT, queues, splits, True),
    )
    if scheduler is Scheduler.FAIR:
        parameters += (Parameter("policy", ParameterKind.POLICY, queues, FAIR_POLICIES, False),)
    return GridSpace(scheduler, parent, queues, parameters, default_policy="fifo")


def table2_space(parent: str, queues: Sequence[str]) -> GridSpace:
    """§4.4's representative Fair configurations: each queue's weight 25, 50 or 75
    and FIFO / Fair / DRF in every queue. Two queues: 3 x 3 = 9; four queues:
    Table 2's six weight patterns x 3 policies = 18."""
    queues = tuple(queues)
    if len(queues) == 2:
        weights: tuple[tuple[float, ...], ...] = ((25.0, 75.0), (50.0, 50.0), (75.0, 25.0))
    elif len(queues) == 4:
        # The extracted Table 2 repeats c1..c9's weights for c10..c18; a repeat adds
        # nothing, so the second half mirrors q3/q4 (an assumption, said in the docs).
        first = tuple((a, 100 - a, a, 100 - a) for a in (25.0, 50.0, 75.0))
        weights = first + tuple((a, 100 - a, 100 - a, a) for a in (25.0, 50.0, 75.0))
    else:
        raise SettingsError(f"Table 2 has 2 or 4 queues, not {len(queues)}")
    return GridSpace(
        Scheduler.FAIR,
        parent,
        queues,
        (
            Parameter("weights", ParameterKind.SPLIT, queues, weights, True),
            Parameter("policy", ParameterKind.POLICY, queues, FAIR_POLICIES, False),
        ),
    )
