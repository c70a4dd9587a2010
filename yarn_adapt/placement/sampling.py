"""The sample size with a quality guarantee (Tarcil §3.3), and choosing among samples.

**Derivation.** Rank the RUs by their quality for job W; a uniformly sampled RU is
*acceptable* with probability ``g`` (the share of the sampled population at or
above the target quality). R independent samples all miss with probability
``(1 - g)^R`` -- eq. (6), ``F_A(x) = x^R`` with ``x = 1 - g``. The guarantee
``Pr[no acceptable RU among the samples] <= p`` holds for

    R = ceil( ln p / ln(1 - g) )                                   (the formula)

the smallest integer sample size meeting it. Load enters through ``g``:

* unloaded, sampling any RU: ``g = 1 - q`` for a quality threshold ``q``
  (§3.3: ``Pr[Q < 0.8] = 10^-3`` -> ``g = 0.2``, ``R = 31``; exact 30.96);
* loaded, sampling every RU but only free ones usable: ``g`` = free acceptable RUs
  / all RUs (§3.3: 8 of the top 20 of 100 RUs free -> ``g = 0.08``, ``R = 83``;
  exact 82.85);
* loaded, sampling only free RUs (what :class:`~yarn_adapt.placement.state.RUState`
  allows in O(1) per sample): ``g`` = free acceptable / free, estimated from the
  admission control's per-bucket free counters.

The paper prints ``R = 32`` and ``R = 82`` for its two examples. No single rounding
rule gives both (``30.96 -> 32`` rounds up past the next integer; ``82.85 -> 82``
rounds down, and ``0.92^82 = 1.07e-3`` misses the stated ``10^-3``); ``32`` is the
``R = 32`` curve of the paper's Figure 3. :func:`paper_examples` reports both.

Batch sampling (§3.3 "Large jobs"): for ``m`` RUs, sample ``R * m`` and keep the
``m`` best (:func:`pick_best`), O(R m) whatever the cluster size.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class SampleSizeError(InputError):
    """An impossible guarantee was asked for (probability outside (0, 1), ...)."""


@dataclass(frozen=True)
class SampleSize:
    """How many candidates to sample per RU needed, and what that guarantees.

    ``exact`` is the real-valued solution (``inf`` when no RU is acceptable);
    ``capped`` says the cap bounded ``r`` (so the guarantee is weaker:
    ``miss_probability`` is what ``r`` really achieves); ``reachable`` is False when
    no acceptable RU exists at all (``g = 0``)."""

    r: int
    exact: float
    capped: bool
    reachable: bool
    miss_probability: float


def sample_size(
    miss_probability: float, good_share: float, *, cap: int | None = None
) -> SampleSize:
    """The smallest R with ``(1 - good_share)^R <= miss_probability`` (see above).

    ``cap`` bounds R (Tarcil caps at 32). With no acceptable RU (``good_share = 0``)
    the guarantee is unreachable: R is the cap, or a :class:`SampleSizeError` when
    there is no cap."""
    p, g = miss_probability, good_share
    if not (isinstance(p, int | float) and 0.0 < p < 1.0):
        raise SampleSizeError(f"miss probability {p!r} must be in (0, 1)")
    if not (isinstance(g, int | float) and 0.0 <= g <= 1.0):
        raise SampleSizeError(f"acceptable share {g!r} must be in [0, 1]")
    if cap is not None and cap < 1:
        raise SampleSizeError(f"sample size cap {cap} must be at least 1")
    if g >= 1.0:
        return SampleSize(1, 1.0, False, True, 0.0)
    if g <= 0.0:
        if cap is None:
            raise SampleSizeError("no RU meets the target quality: the guarantee is unreachable")
        return SampleSize(cap, math.inf, True, False, 1.0)
    exact = math.log(p) / math.log1p(-g)
    r = max(1, math.ceil(exact - 1e-9))
    capped = cap is not None and r > cap
    if capped:
        assert cap is not None
        r = cap
    return SampleSize(r, exact, capped, True, (1.0 - g) ** r)


@dataclass(frozen=True)
class PaperExample:
    """One of Tarcil §3.3's two sample-size examples, recomputed."""

    name: str
    good_share: float
    miss_probability: float
    paper_r: int
    derived: SampleSize

    @property
    def paper_r_miss_probability(self) -> float:
        """What the paper's R achieves under the formula."""
        return (1.0 - self.good_share) ** self.paper_r


def paper_examples() -> tuple[PaperExample, PaperExample]:
    """§3.3 with N_RU = 100: ``Pr[Q < 0.8] = 10^-3`` (the top 20 acceptable), then
    60% busy with only 8 of the top 20 free, sampling every RU."""
    p = 1e-3
    top, free_top, total = 20, 8, 100
    unloaded = PaperExample("unloaded", top / total, p, 32, sample_size(p, top / total))
    loaded = PaperExample("loaded", free_top / total, p, 82, sample_size(p, free_top / total))
    return unloaded, loaded


def pick_best(quality: FloatArray, m: int) -> IntArray:
    """Indices of the ``m`` highest qualities, best first. Ties keep sample order,
    and samples come in random order: the paper's fair coin."""
    if m <= 0 or len(quality) == 0:
        return np.empty(0, dtype=np.int64)
    if m >= len(quality):
        chosen: IntArray = np.argsort(-quality, kind="stable").astype(np.int64)
        return chosen
    top = np.argpartition(-quality, m - 1)[:m]
    # argpartition does not keep sample order among ties at the boundary; re-rank the
    # top m (and anything tied with the m-th) stably.
    threshold = quality[top].min()
    tied = np.flatnonzero(quality >= threshold)
    ranked = tied[np.argsort(-quality[tied], kind="stable")][:m]
    return ranked.astype(np.int64)


def pick_best_distinct(quality: FloatArray, groups: IntArray, m: int) -> IntArray:
    """The ``m`` best samples with at most one per group (e.g. per server, for jobs
    that want their RUs spread), best first."""
    order = np.argsort(-quality, kind="stable")
    _, first = np.unique(groups[order], return_index=True)
    best_per_group = order[np.sort(first)]
    return best_per_group[:m].astype(np.int64)


def sample_best(
    count: int,
    score: Callable[[IntArray], FloatArray],
    rng: np.random.Generator,
    *,
    r: int,
) -> int | None:
    """For callers outside RU placement (e.g. a guard choosing "the node with the
    lowest risk"): sample ``r`` of ``count`` items, score only those (``score``
    returns higher-is-better for an index array), return the best index -- the
    §3.3 guarantee without scanning all ``count``. ``None`` when ``count`` is 0."""
    if count <= 0:
        return None
    picks = rng.integers(0, count, size=min(r, count) if r > 0 else 1)
    scores = score(picks)
    return int(picks[int(np.argmax(scores))])
