"""Tarcil's placer (:class:`TarcilPlacer`): quality-aware sampling with the derived
sample size, admission control, the choice among the sampled units (acceptable
overshoot, locality, distinct servers), and relocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl, Assessment
from yarn_adapt.placement.jobs import (
    NO_RUS,
    CheckedPlacer,
    FloatArray,
    IntArray,
    Locality,
    Outcome,
    Placement,
    PlacementJob,
    unplaceable_outcome,
)
from yarn_adapt.placement.profiles import ProfileSource
from yarn_adapt.placement.quality import LEVELS
from yarn_adapt.placement.sampling import pick_best, pick_best_distinct, sample_size
from yarn_adapt.placement.scoring import (
    ACCEPTABLE_OVERSHOOT,
    LEVEL_WEIGHT,
    Scorer,
    ScorerCache,
    Scores,
    rus_quality,
)
from yarn_adapt.placement.view import PlacementView


@dataclass(frozen=True)
class TarcilSettings:
    """``miss_probability``: the guarantee's p; ``cap``: the largest R (§6.1: 32);
    ``first_batch``: samples per RU used to estimate the acceptable share when
    there is no admission control; ``protect``: see :class:`Scorer`;
    ``directed``: when the uniform samples miss and ``R`` was capped, sample
    again from the acceptable buckets (see :meth:`TarcilPlacer._directed`);
    ``share_memory``: over how many decisions the acceptable share a class's
    samples found is remembered (it sets ``R`` when below the buckets' share)."""

    miss_probability: float = 1e-3
    cap: int = 32
    first_batch: int = 8
    protect: bool = True
    directed: bool = True
    share_memory: float = 32.0

    def __post_init__(self) -> None:
        if not 0 < self.miss_probability < 1 or self.cap < 1 or self.first_batch < 1:
            raise InputError("tarcil: miss_probability in (0, 1), cap and first_batch >= 1")
        if self.share_memory < 1:
            raise InputError("tarcil: share_memory >= 1")


class TarcilPlacer(CheckedPlacer):
    """See the module docstring; the flow with admission control:

    1. :meth:`AdmissionControl.assess` sets ``R`` from the acceptable buckets' free
       RUs (capped);
    2. ``R x m`` free RUs are sampled and the ``m`` best kept; if even they would
       slow the job down and ``R`` was capped, ``first_batch x m`` more are drawn
       from the servers of the buckets counted as acceptable and the best of all
       kept (``directed``);
    3. if they predict no overshoot, the job is placed; otherwise (the best of
       ``R`` misses the target) :meth:`AdmissionControl.decide` weighs waiting
       against placing now, and the job queues or is placed. A forced job (its
       wait bound passed) is placed with ``R`` = the cap, whatever it finds.

    A queued job offered the free RUs of servers that just freed some chooses
    among those only, and takes them only if they meet it."""

    name = "tarcil"

    def __init__(
        self,
        profiles: ProfileSource,
        settings: TarcilSettings | None = None,
        admission: AdmissionControl | None = None,
    ) -> None:
        self.settings = settings or TarcilSettings()
        self.scorers = ScorerCache(profiles, self.settings.protect)
        self.admission = admission
        self._shares: dict[str, float] = {}

    def _place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float,
        *,
        force: bool,
        offered: IntArray | None,
    ) -> Placement:
        scorer = self.scorers.scorer(job.job_class)
        if self.admission is None:
            return self._sequential(job, scorer, view, rng, offered)
        if offered is not None and not force:
            return self._offered(job, scorer, view, rng, offered)
        key = (job.job_class, self.scorers.profiles.revision(job.job_class), scorer.protect)
        assessment = self.admission.assess(
            job.ru_count, scorer.acceptable_levels, cache_key=key,
            learned_share=self._shares.get(job.job_class),
        )  # fmt: skip
        r = self.settings.cap if force else min(assessment.sample.r, self.settings.cap)
        sampled = view.sample_free(r * job.ru_count, rng)
        candidates = _distinct_enough(_with_offered(sampled, view, offered), job, view, rng)
        placement = _choose(job, scorer, view, rng, candidates, r, assessment.reason)
        self._learn_share(job.job_class, placement.acceptable_share)
        missed = placement.placed and placement.overshoot > ACCEPTABLE_OVERSHOOT
        if missed and (assessment.sample.capped or force):
            placement = self._directed(job, scorer, view, rng, candidates, assessment, placement)
        if force or not placement.placed or placement.overshoot <= ACCEPTABLE_OVERSHOOT:
            return placement
        wait = self.admission.decide(
            job.job_class, job.ru_count, overshoot=placement.overshoot,
            duration_s=job.expected_duration_s, now=now,
        )  # fmt: skip
        if wait.queue:
            return Placement(
                Outcome.QUEUED, sample_size=r, reason=wait.reason,
                wait_estimate_s=wait.estimate_s, wait_bound_s=wait.bound_s,
                own_overshoot=placement.own_overshoot, harm=placement.harm,
            )  # fmt: skip
        return replace(placement, reason=wait.reason)

    def _learn_share(self, job_class: str, observed: float | None) -> None:
        """An exponentially weighted mean of the share of acceptable RUs among the
        class's uniform samples (``share_memory`` decisions)."""
        if observed is None:
            return
        known = self._shares.get(job_class)
        weight = 1.0 / self.settings.share_memory
        self._shares[job_class] = observed if known is None else known + weight * (observed - known)

    def _directed(
        self,
        job: PlacementJob,
        scorer: Scorer,
        view: PlacementView,
        rng: np.random.Generator,
        candidates: IntArray,
        assessment: Assessment,
        first: Placement,
    ) -> Placement:
        """The uniform samples missed (their best would slow the job down): a
        second draw of ``first_batch x m`` from the servers of the buckets
        admission control counts as acceptable, chosen together with the first
        -- the buckets say where acceptable RUs are, so the samples go there (our
        addition to §3-4; it keeps the decision O(R x m) and finds the rare
        acceptable RUs a capped uniform ``R`` misses on a large cluster)."""
        if not self.settings.directed or not len(assessment.buckets):
            return first
        assert self.admission is not None
        count = self.settings.first_batch * job.ru_count
        servers = self.admission.sample_servers(assessment.buckets, count, rng)
        directed = view.sample_free_on(servers, rng)
        if not len(directed):
            return first
        both = np.concatenate((candidates, directed))
        second = _choose(job, scorer, view, rng, both, self.settings.cap, assessment.reason)
        if not second.placed or second.overshoot >= first.overshoot:
            return first
        return replace(second, reason=assessment.reason + "; directed to acceptable buckets")

    def _offered(
        self,
        job: PlacementJob,
        scorer: Scorer,
        view: PlacementView,
        rng: np.random.Generator,
        offered: IntArray,
    ) -> Placement:
        """A queued job offered the free RUs of servers that just freed some: it
        takes the best of those (no sampling) if they meet it, else waits on."""
        candidates = _with_offered(NO_RUS, view, offered)
        placement = (
            _choose(job, scorer, view, rng, candidates, 0, "offered freed RUs")
            if len(candidates) >= job.ru_count
            else Placement(Outcome.NO_ROOM)
        )
        if placement.placed and placement.overshoot <= ACCEPTABLE_OVERSHOOT:
            return placement
        return Placement(
            Outcome.QUEUED, reason="the freed RUs do not meet the job",
            own_overshoot=placement.own_overshoot, harm=placement.harm,
        )  # fmt: skip

    def acceptable_servers(
        self, job_class: str, view: PlacementView, servers: IntArray
    ) -> npt.NDArray[np.bool_]:
        """Which of ``servers`` have a free RU a job of ``job_class`` accepts."""
        accepted: npt.NDArray[np.bool_] = self.takeable(view, [job_class], servers)[0] > 0
        return accepted

    def takeable(
        self, view: PlacementView, job_classes: Sequence[str], servers: IntArray
    ) -> IntArray:
        """For each class (rows) and each of ``servers`` (columns): how many of the
        server's free RUs one job of the class could take with no predicted
        overshoot -- its own RUs contend with each other, so a class that presses
        hard may take only one per server. The check admission control runs on the
        servers that just freed RUs, for every class at once."""
        counts: IntArray = np.zeros((len(job_classes), len(servers)), dtype=np.int64)
        if not len(job_classes) or not len(servers):
            return counts
        scorers = [self.scorers.scorer(name) for name in job_classes]
        free = np.where(view.server_closed_of(servers), 0, view.server_free_of(servers))
        if not self.settings.protect:
            ok = np.array([s.kernel.acceptable(view.server_levels_of(servers)) for s in scorers])
            taken: IntArray = np.where(ok, free[None, :], 0).astype(np.int64)
            return taken
        seen = view.server_levels_of(servers) * (1.0 / LEVELS)
        tolerance = np.array([s.tolerance for s in scorers])  # classes x N
        caused = np.array([s.caused for s in scorers])
        headroom = view.server_headroom_of(servers)  # servers x N
        per_ru = caused[:, None, :] / view.server_neighbours_of(servers)[None, :, None]
        for k in range(int(free.max(initial=0))):  # the job's (k+1)-th RU on each server
            own = np.maximum(seen[None] + k * per_ru - tolerance[:, None, :], 0.0).sum(axis=2)
            harm = np.maximum((k + 1) * per_ru - headroom[None], 0.0).sum(axis=2)
            fits = ((own + harm) <= ACCEPTABLE_OVERSHOOT) & (counts == k) & (free[None, :] > k)
            if not fits.any():
                break
            counts += fits
        return counts

    def relocate(
        self, job: PlacementJob, view: PlacementView, rng: np.random.Generator
    ) -> Placement:
        """New RUs for ``job.ru_count`` of a running job's tasks (the load monitor's
        adjustment, Tarcil §5.2): ``R`` = the cap, and only RUs that predict no
        overshoot; otherwise NO_ROOM (the job stays where it is)."""
        unplaceable = unplaceable_outcome(job, view)
        if unplaceable is not None:
            return unplaceable
        scorer = self.scorers.scorer(job.job_class)
        r = self.settings.cap
        candidates = _distinct_enough(view.sample_free(r * job.ru_count, rng), job, view, rng)
        placement = _choose(job, scorer, view, rng, candidates, r, "relocation")
        if placement.placed and placement.overshoot <= ACCEPTABLE_OVERSHOOT:
            return placement
        return Placement(Outcome.NO_ROOM, sample_size=r, reason="no better RUs sampled")

    def _sequential(
        self,
        job: PlacementJob,
        scorer: Scorer,
        view: PlacementView,
        rng: np.random.Generator,
        offered: IntArray | None,
    ) -> Placement:
        settings = self.settings
        first = view.sample_free(settings.first_batch * job.ru_count, rng)
        acceptable = scorer.acceptable(view, view.server_of(first))
        # Laplace-smoothed share, so a batch with no acceptable RU asks for the cap.
        share = (acceptable.sum() + 0.5) / (len(first) + 1.0)
        r = sample_size(settings.miss_probability, share, cap=settings.cap).r
        more = max(0, r - settings.first_batch) * job.ru_count
        candidates = np.concatenate((first, view.sample_free(more, rng))) if more else first
        candidates = _distinct_enough(_with_offered(candidates, view, offered), job, view, rng)
        return _choose(job, scorer, view, rng, candidates, max(r, settings.first_batch), "")


def _with_offered(sampled: IntArray, view: PlacementView, offered: IntArray | None) -> IntArray:
    if offered is None or not len(offered):
        return sampled
    extra = [view.free_rus_on(int(server)) for server in offered.tolist()]
    return np.concatenate([sampled, *extra])


def _distinct_enough(
    sampled: IntArray, job: PlacementJob, view: PlacementView, rng: np.random.Generator
) -> IntArray:
    """Samples are drawn with replacement; a small ``R`` can repeat RUs and leave
    fewer than ``m`` distinct ones. Draw more until there are ``m`` (bounded)."""
    if job.ru_count == 1 and len(sampled):
        return sampled
    parts = [sampled]
    distinct = len(set(sampled.tolist()))
    for _ in range(16):
        if distinct >= job.ru_count:
            break
        parts.append(view.sample_free(2 * (job.ru_count - distinct), rng))
        distinct = len(set(np.concatenate(parts).tolist()))
    return np.concatenate(parts) if len(parts) > 1 else sampled


def _choose(
    job: PlacementJob,
    scorer: Scorer,
    view: PlacementView,
    rng: np.random.Generator,
    sampled: IntArray,
    r: int,
    reason: str,
) -> Placement:
    candidates, level = _with_locality(job, view, rng, sampled, r)
    if job.ru_count == 1 and level is None and len(candidates):
        return _choose_one(scorer, view, candidates, r, reason)
    if len(set(candidates.tolist())) < len(candidates):
        unique, first, inverse = np.unique(candidates, return_index=True, return_inverse=True)
        order = np.argsort(first)  # back to draw order: ties go to the earlier draw
        candidates = unique[order]
        if level is not None:  # an RU drawn twice keeps its best locality
            best = np.full(len(unique), np.inf)
            np.minimum.at(best, inverse, level)
            level = best[order]
    servers = view.server_of(candidates)
    ranked = job.ru_count > 1 and job.locality is Locality.ANY
    scores = scorer.evaluate(view, servers, ranked=ranked)
    score = scores.score
    if level is not None:
        score = score - LEVEL_WEIGHT * level
    chosen = _select(job, view, candidates, score)
    if chosen is None:
        together = _same_server(job.ru_count, view, candidates, score)
        assert together is not None
        own, harm = _together_overshoot(scorer, view, together)
        return Placement(
            Outcome.PLACED, together, rus_quality(scorer, view, together), r, reason,
            own_overshoot=own, harm=harm,
        )  # fmt: skip
    if len(chosen) < job.ru_count:
        why = f"sampled {len(candidates)} distinct free RUs, {len(chosen)} usable"
        return Placement(Outcome.NO_ROOM, sample_size=r, reason=why)
    return Placement(
        Outcome.PLACED, candidates[chosen], scores.match[chosen], r, reason,
        own_overshoot=float(scores.own[chosen].max()), harm=float(scores.harm[chosen].max()),
        acceptable_share=_acceptable_share(scores),
    )  # fmt: skip


def _acceptable_share(scores: Scores) -> float:
    return float(np.count_nonzero(scores.overshoot <= ACCEPTABLE_OVERSHOOT)) / len(scores.own)


def _choose_one(
    scorer: Scorer, view: PlacementView, candidates: IntArray, r: int, reason: str
) -> Placement:
    """One RU, no locality: the best candidate (the earliest drawn among equals --
    the fair coin; an RU drawn twice changes nothing)."""
    scores = scorer.evaluate(view, view.server_of(candidates))
    best = int(np.argmax(scores.score))
    return Placement(
        Outcome.PLACED, candidates[best : best + 1], scores.match[best : best + 1], r, reason,
        own_overshoot=float(scores.own[best]), harm=float(scores.harm[best]),
        acceptable_share=_acceptable_share(scores),
    )  # fmt: skip


def _together_overshoot(scorer: Scorer, view: PlacementView, rus: IntArray) -> tuple[float, float]:
    """The worst RU's (own, harm) overshoot of ``rus``, all on one server."""
    servers = view.server_of(rus)
    scores = scorer.evaluate(view, servers, rank=np.arange(len(rus), dtype=np.int64))
    return float(scores.own.max()), float(scores.harm.max())


def _with_locality(
    job: PlacementJob,
    view: PlacementView,
    rng: np.random.Generator,
    sampled: IntArray,
    r: int,
) -> tuple[IntArray, FloatArray | None]:
    """Candidates with their locality level: 0 preferred server, 1 preferred rack,
    2 elsewhere (``None`` when the job states no preference)."""
    if not job.preferred_servers and not job.preferred_racks:
        return sampled, None
    parts = [sampled]
    levels = [np.full(len(sampled), 2.0)]
    for server in job.preferred_servers:
        if 0 <= server < view.server_count:
            local = view.free_rus_on(server)
            parts.append(local)
            levels.append(np.zeros(len(local)))
    if job.preferred_racks:
        racks = np.asarray(job.preferred_racks, dtype=np.int64)
        in_rack = view.sample_free_in_racks(racks, r * job.ru_count, rng)
        parts.append(in_rack)
        levels.append(np.ones(len(in_rack)))
    candidates = np.concatenate(parts)
    level = np.concatenate(levels)
    if job.preferred_racks:
        # a sampled RU that happens to sit in a preferred rack is rack-local too
        racks = np.asarray(job.preferred_racks, dtype=np.int64)
        level = np.where(
            (level == 2.0) & np.isin(view.rack_of(view.server_of(candidates)), racks), 1.0, level
        )
    return candidates, level


def _select(
    job: PlacementJob, view: PlacementView, candidates: IntArray, score: FloatArray
) -> IntArray | None:
    """Indices of the chosen candidates; ``None`` when the job should take a whole
    sampled server instead (``SAME_SERVER`` with a server that has room)."""
    m = job.ru_count
    if job.locality is Locality.SPREAD:
        picked = pick_best_distinct(score, view.server_of(candidates), m)
        return picked if len(picked) == m else pick_best(score, m)
    if job.locality is Locality.SAME_SERVER and m > 1:
        servers = view.server_of(candidates)
        if (view.server_free_of(servers) >= m).any():
            return None
    return pick_best(score, m)


def _same_server(
    m: int, view: PlacementView, candidates: IntArray, score: FloatArray
) -> IntArray | None:
    """Neighbour aggregation: the best sampled server with ``m`` free RUs. All free
    RUs of a server see the same contention, so the aggregate quality of its ``m``
    best is the quality of any of them."""
    servers = view.server_of(candidates)
    roomy = view.server_free_of(servers) >= m
    if not roomy.any():
        return None
    best = int(servers[np.flatnonzero(roomy)[int(np.argmax(score[roomy]))]])
    rus: IntArray = view.free_rus_on(best)[:m]
    return rus
