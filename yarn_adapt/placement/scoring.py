"""Tarcil's scoring of candidate resource units: each server's overshoot of the job's
quality target and its load level (:class:`Scorer`, :class:`Scores`), the cache of
scorers per job class, and the ranking helpers the policies share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yarn_adapt.placement.jobs import FloatArray, IntArray
from yarn_adapt.placement.profiles import InterferenceProfile, ProfileSource
from yarn_adapt.placement.quality import LEVELS, QualityKernel
from yarn_adapt.placement.view import PlacementView

OVERSHOOT_WEIGHT = 100.0


LEVEL_WEIGHT = 0.05 * OVERSHOOT_WEIGHT


_CLOSED_PENALTY = 1e3


ACCEPTABLE_OVERSHOOT = 0.01


@dataclass(frozen=True)
class Scores:
    """A scorer's view of candidate RUs: the ranking ``score`` (higher is better),
    Tarcil's match ``Q``, and the predicted slowdown (overshoot) for the job itself
    (``own``) and for the server's occupants (``harm``)."""

    score: FloatArray
    match: FloatArray
    own: FloatArray
    harm: FloatArray

    @property
    def overshoot(self) -> FloatArray:
        total: FloatArray = self.own + self.harm
        return total


@dataclass(frozen=True, eq=False)
class Scorer:
    """How good each candidate server is for one job class.

    The score is Tarcil's match ``Q`` (eq. 5). With ``protect`` (default) the
    predicted slowdown comes first: the job's own pressure overshoot on every
    resource (``Q`` looks at the job's most sensitive resource first and the
    others only on ties) plus the overshoot it would push onto the server's
    occupants past their tolerance (the server's headroom: the least slack of its
    occupants per resource; for an occupant already past its tolerance every bit
    of added pressure counts). The score is ``Q -
    OVERSHOOT_WEIGHT x overshoot``: 1% of predicted slowdown outweighs the whole
    range of ``Q``, so ``Q``'s tight fit (keep clean RUs for demanding jobs) only
    chooses among equally harmless candidates. ``protect=False`` scores with ``Q``
    alone, as §3 does. Servers the load monitor closed rank after all others."""

    kernel: QualityKernel
    tolerance: FloatArray
    caused: FloatArray
    protect: bool = True
    overshoot_weight: float = OVERSHOOT_WEIGHT

    def __post_init__(self) -> None:
        # precomputed for evaluate(): the tolerance in levels, eq. (4)'s weights
        # scaled, and the encoding of the target's complement
        object.__setattr__(self, "_tolerance_levels", self.tolerance * LEVELS)
        object.__setattr__(self, "_weights", self.kernel.weights / self.kernel.scale)
        object.__setattr__(self, "_clean_enough", 1.0 - self.kernel.target)

    @classmethod
    def for_profile(
        cls, profile: InterferenceProfile, protect: bool, overshoot_weight: float = OVERSHOOT_WEIGHT
    ) -> Scorer:
        kernel = QualityKernel.for_profile(profile)
        return cls(
            kernel, np.array(profile.tolerance), np.array(profile.caused), protect,
            overshoot_weight,
        )  # fmt: skip

    def score(
        self, view: PlacementView, servers: IntArray, rank: IntArray | None = None
    ) -> FloatArray:
        """Score of one more RU on each of ``servers`` for this job, when the job
        already holds ``rank`` RUs there (its own tasks contend too)."""
        return self.evaluate(view, servers, rank=rank).score

    def evaluate(
        self,
        view: PlacementView,
        servers: IntArray,
        *,
        ranked: bool = False,
        rank: IntArray | None = None,
    ) -> Scores:
        """:class:`Scores` of a free RU on each of ``servers``. ``rank``: the job
        already holds that many RUs on each server. ``ranked``: the candidates are
        one job's, so the k-th best on a server also carries the job's own k RUs
        already there (see :func:`rank_within`)."""
        levels = view.server_levels_of(servers)
        # eq. (4)-(5) in one pass: encoded contention d = 1 - U_H; Q = T_W + d when
        # U_H >= T_W (d <= 1 - T_W), else U_H = 1 - d
        encoded = levels @ self.__dict__["_weights"]
        match = np.where(
            encoded <= self.__dict__["_clean_enough"], self.kernel.target + encoded, 1.0 - encoded
        )
        per_ru = self.caused / view.server_neighbours_of(servers)[:, None]
        headroom = view.server_headroom_of(servers)
        if rank is None:  # one more RU, none of the job's there yet (the common case)
            excess = np.maximum(levels - self.__dict__["_tolerance_levels"], 0.0)
            own: FloatArray = excess.sum(axis=1) * (1.0 / LEVELS)
            harm: FloatArray = np.maximum(per_ru - headroom, 0.0).sum(axis=1)
        else:
            seen = levels * (1.0 / LEVELS)
            own, harm = _overshoot(seen, per_ru, headroom, self.tolerance, rank.astype(np.float64))
        closed = view.server_closed_of(servers)
        score = self._combine(match, own, harm, closed)
        if ranked and rank is None and len(servers) > 1:
            rank = rank_within(servers, score)
            more = np.flatnonzero(rank)
            if len(more):
                seen = levels * (1.0 / LEVELS)
                mine_more = rank[more].astype(np.float64)
                own[more], harm[more] = _overshoot(
                    seen[more], per_ru[more], headroom[more], self.tolerance, mine_more
                )
                score[more] = self._combine(match[more], own[more], harm[more], closed[more])
        return Scores(score, match, own, harm)

    def _combine(
        self, match: FloatArray, own: FloatArray, harm: FloatArray, closed: npt.NDArray[np.bool_]
    ) -> FloatArray:
        score: FloatArray = match - self.overshoot_weight * (own + harm) if self.protect else match
        if closed.any():
            score = score - _CLOSED_PENALTY * closed
        return score

    def predicted_overshoot(
        self,
        view: PlacementView,
        servers: IntArray,
        levels: FloatArray | None = None,
        rank: IntArray | None = None,
    ) -> FloatArray:
        """Own overshoot plus harm to the occupants of one more RU on each server."""
        return self.evaluate(view, servers, rank=rank).overshoot

    def acceptable(self, view: PlacementView, servers: IntArray) -> npt.NDArray[np.bool_]:
        """Servers whose free RUs meet the job: open, and (protecting) predicting
        no overshoot for it or its neighbours, else (``Q`` alone) ``U_H >= T_W``."""
        return self.acceptable_scores(view, servers, self.evaluate(view, servers))

    def acceptable_scores(
        self, view: PlacementView, servers: IntArray, scores: Scores
    ) -> npt.NDArray[np.bool_]:
        open_ = ~view.server_closed_of(servers)
        if self.protect:
            ok: npt.NDArray[np.bool_] = open_ & (scores.overshoot <= ACCEPTABLE_OVERSHOOT)
            return ok
        return open_ & self.kernel.acceptable(view.server_levels_of(servers))

    def acceptable_levels(self, levels: FloatArray) -> npt.NDArray[np.bool_]:
        """Contention vectors (e.g. admission buckets' centres) that meet the job's
        target (and, protecting, predict no overshoot for the job itself)."""
        ok = self.kernel.acceptable(levels)
        if self.protect:
            ok &= (levels * (1.0 / LEVELS) <= self.tolerance).all(axis=1)
        return ok


def _overshoot(
    seen: FloatArray,
    per_ru: FloatArray,
    headroom: FloatArray,
    tolerance: FloatArray,
    mine: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """(own, harm) overshoot of one more RU of a job that already holds ``mine`` RUs
    on each server: the job sees the server's contention plus its own other RUs;
    the occupants lose headroom to all of the job's RUs there (only the part past
    the headroom, or all of it where the headroom is already gone, is harm: the
    overshoot the placement adds, not what was there before)."""
    own: FloatArray = np.maximum(seen + mine[:, None] * per_ru - tolerance, 0.0).sum(axis=1)
    added = (mine[:, None] + 1.0) * per_ru
    harm: FloatArray = np.maximum(added - headroom, 0.0).sum(axis=1)
    return own, harm


class ScorerCache:
    """One scorer per class, rebuilt when the class's profile is revised."""

    def __init__(self, profiles: ProfileSource, protect: bool) -> None:
        self.profiles = profiles
        self.protect = protect
        self._scorers: dict[str, tuple[int, Scorer]] = {}

    def scorer(self, job_class: str) -> Scorer:
        revision = self.profiles.revision(job_class)
        found = self._scorers.get(job_class)
        if found is None or found[0] != revision:
            found = (revision, Scorer.for_profile(self.profiles.profile(job_class), self.protect))
            self._scorers[job_class] = found
        return found[1]


def rus_quality(scorer: Scorer, view: PlacementView, rus: IntArray) -> FloatArray:
    quality: FloatArray = scorer.kernel.match(view.contention_levels(rus))
    return quality


def rank_within(groups: IntArray, score: FloatArray) -> IntArray:
    """For each item, how many items of its group score higher (ties: earlier
    first): the job's RUs already taken on that server if picked in score order."""
    order = np.argsort(-score, kind="stable")
    grouped = order[np.argsort(groups[order], kind="stable")]
    keys = groups[grouped]
    boundary = np.empty(len(keys), dtype=bool)
    boundary[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=boundary[1:])
    starts = np.flatnonzero(boundary)
    lengths = np.diff(starts, append=len(keys))
    rank = np.empty(len(score), dtype=np.int64)
    rank[grouped] = np.arange(len(keys)) - np.repeat(starts, lengths)
    return rank
