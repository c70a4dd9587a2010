"""Placers: where a job's RUs go.

Every placer reads the cluster through
:class:`~yarn_adapt.placement.view.PlacementView` and returns a :class:`Placement`
(it never changes the state: committing is the caller's, see
:mod:`yarn_adapt.placement.agents`). The same classes serve the RU cluster model of
``yarn-adapt bench placement`` and the YARN simulator's placement hook.

* :class:`TarcilPlacer` -- quality-aware sampling with a statistical guarantee
  (Tarcil §3-4): admission control decides admit / queue / place now and the
  sample size ``R``; ``R * m`` free RUs are sampled (batch sampling) and the ``m``
  best kept, after locality. Without admission control (the YARN simulator has no
  per-bucket counters) ``R`` comes from the acceptable share of a first batch of
  samples (sequential estimate). O(R m) per decision, whatever the cluster size.
* :class:`GreedyPlacer` -- the centralised optimum of the same quality: every
  server with a free RU is scored (O(servers)).
* :class:`SamplingPlacer` -- Sparrow-like: 2 samples per RU, the least loaded kept;
  blind to interference.
* :class:`LeastLoadedPlacer` -- every server scanned, the emptiest first.
* :class:`FirstFitPlacer` -- YARN's Capacity Scheduler on heartbeats: servers in
  heartbeat order (a rotating pointer), the first with room takes what it can.

**Locality** (§3.3): ``preferred_servers`` (data locality: their free RUs are
candidates, ranked first), ``preferred_racks`` (sampled inside those racks, ranked
second), then the rest; quality breaks ties within a level. ``Locality.SAME_SERVER``
puts all ``m`` RUs on one server, judged by the aggregate quality of its free RUs
(neighbour aggregation); ``Locality.SPREAD`` takes at most one RU per server.

**Scores.** Tarcil and the greedy optimum rank candidates with the same
:class:`Scorer`: Tarcil's ``Q``, lowered (unless ``protect=False``) by the slowdown
the placement predicts for the job and for the server's occupants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl, Verdict
from yarn_adapt.placement.profiles import InterferenceProfile, ProfileBook
from yarn_adapt.placement.quality import LEVELS, QualityKernel
from yarn_adapt.placement.sampling import pick_best, pick_best_distinct, sample_size
from yarn_adapt.placement.view import PlacementView

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
_NO_RUS: IntArray = np.empty(0, dtype=np.int64)
_NO_QUALITY: FloatArray = np.empty(0)
# Locality levels dominate quality (which lies in [0, 1]).
_LEVEL_WEIGHT = 4.0


class Locality(Enum):
    ANY = "any"
    SAME_SERVER = "same-server"
    SPREAD = "spread"


@dataclass(frozen=True)
class PlacementJob:
    """What a placer needs to know about a job (or a stage of one)."""

    id: str
    job_class: str
    ru_count: int = 1
    locality: Locality = Locality.ANY
    preferred_servers: tuple[int, ...] = ()
    preferred_racks: tuple[int, ...] = ()
    expected_duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.ru_count < 1:
            raise InputError(f"job {self.id}: needs at least one RU, asked for {self.ru_count}")

    def needing(self, ru_count: int) -> PlacementJob:
        """The same job asking for fewer RUs (after a partial commit)."""
        return PlacementJob(
            self.id, self.job_class, ru_count, self.locality, self.preferred_servers,
            self.preferred_racks, self.expected_duration_s,
        )  # fmt: skip


class Outcome(Enum):
    PLACED = "placed"
    QUEUED = "queued"  # admission control: wait for better RUs
    NO_ROOM = "no-room"  # fewer free RUs than asked: wait for any
    REJECTED = "rejected"  # can never fit this cluster


@dataclass(frozen=True)
class Placement:
    outcome: Outcome
    rus: IntArray = field(default_factory=lambda: _NO_RUS)
    quality: FloatArray = field(default_factory=lambda: _NO_QUALITY)
    sample_size: int = 0
    reason: str = ""
    wait_estimate_s: float | None = None
    wait_bound_s: float | None = None

    @property
    def placed(self) -> bool:
        return self.outcome is Outcome.PLACED


class Placer(Protocol):
    name: str

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
    ) -> Placement:
        """Where ``job`` goes now. ``force``: skip admission queueing (the job's
        wait bound has passed)."""
        ...


def _unplaceable(job: PlacementJob, view: PlacementView) -> Placement | None:
    if view.ru_count == 0:
        return Placement(Outcome.REJECTED, reason="the cluster has no resource units")
    if job.ru_count > view.ru_count:
        why = f"job {job.id} asks for {job.ru_count} RUs; the cluster has {view.ru_count}"
        return Placement(Outcome.REJECTED, reason=why)
    if job.ru_count > view.free_count:
        why = f"{view.free_count} free RUs for {job.ru_count}"
        return Placement(Outcome.NO_ROOM, reason=why)
    return None


@dataclass(frozen=True, eq=False)
class Scorer:
    """How good each candidate server is for one job class.

    The score is Tarcil's match ``Q`` (eq. 5). With ``protect`` (default) it is
    lowered by the slowdown the placement predicts -- the job's own pressure
    overshoot on every resource (``Q`` looks at the job's most sensitive resource
    first and the others only on ties) plus the overshoot it would push onto the
    server's occupants past their tolerance (the server's headroom). That is
    Tarcil §5.2's "avoid scheduling other jobs on the same server" when an occupant
    suffers, applied before rather than after the harm; ``protect=False`` scores
    with ``Q`` alone, as §3 does."""

    kernel: QualityKernel
    tolerance: FloatArray
    caused: FloatArray
    protect: bool = True

    @classmethod
    def for_profile(cls, profile: InterferenceProfile, protect: bool) -> Scorer:
        kernel = QualityKernel.for_profile(profile)
        return cls(kernel, np.array(profile.tolerance), np.array(profile.caused), protect)

    def score(
        self, view: PlacementView, servers: IntArray, rank: IntArray | None = None
    ) -> FloatArray:
        """Score of one more RU on each of ``servers`` for this job, when the job
        already holds ``rank`` RUs there (its own tasks contend too)."""
        levels = view.server_levels_of(servers)
        match = self.kernel.match(levels)
        if not self.protect:
            return match
        return match - self.predicted_overshoot(view, servers, levels, rank)

    def evaluate(
        self, view: PlacementView, servers: IntArray, *, ranked: bool = False
    ) -> tuple[FloatArray, FloatArray]:
        """(score, match Q) of a free RU on each of ``servers``. ``ranked``: the
        candidates are one job's, so the k-th best on a server also carries the
        job's own k RUs already there (see :func:`rank_within`)."""
        levels = view.server_levels_of(servers)
        match = self.kernel.match(levels)
        if not self.protect:
            return match, match
        per_ru = self.caused / view.server_neighbours_of(servers)[:, None]
        seen = levels * (1.0 / LEVELS)
        headroom = view.server_headroom_of(servers)
        own = np.maximum(seen - self.tolerance, 0.0).sum(axis=1)
        score: FloatArray = match - own - np.maximum(per_ru - headroom, 0.0).sum(axis=1)
        if ranked:
            rank = rank_within(servers, score)
            more = np.flatnonzero(rank)
            if len(more):
                mine = rank[more, None].astype(np.float64)
                own = np.maximum(seen[more] + mine * per_ru[more] - self.tolerance, 0.0)
                harm = np.maximum((mine + 1.0) * per_ru[more] - headroom[more], 0.0)
                score[more] = match[more] - own.sum(axis=1) - harm.sum(axis=1)
        return score, match

    def predicted_overshoot(
        self,
        view: PlacementView,
        servers: IntArray,
        levels: FloatArray,
        rank: IntArray | None = None,
    ) -> FloatArray:
        per_ru = self.caused / view.server_neighbours_of(servers)[:, None]
        seen = levels * (1.0 / LEVELS)
        mine: FloatArray = np.ones((len(servers), 1))
        if rank is not None:
            seen = seen + rank[:, None] * per_ru
            mine = rank[:, None].astype(np.float64) + 1.0
        own = np.maximum(seen - self.tolerance, 0.0).sum(axis=1)
        harm = np.maximum(mine * per_ru - view.server_headroom_of(servers), 0.0).sum(axis=1)
        overshoot: FloatArray = own + harm
        return overshoot

    def acceptable(self, view: PlacementView, servers: IntArray) -> npt.NDArray[np.bool_]:
        """Servers whose free RUs meet the job's target (and, protecting, predict
        no overshoot for it or its neighbours)."""
        levels = view.server_levels_of(servers)
        ok = self.kernel.acceptable(levels)
        if self.protect:
            ok &= self.predicted_overshoot(view, servers, levels) <= 0.0
        return ok

    def acceptable_levels(self, levels: FloatArray) -> npt.NDArray[np.bool_]:
        """Contention vectors (e.g. admission buckets' centres) that meet the job's
        target (and, protecting, predict no overshoot for the job itself)."""
        ok = self.kernel.acceptable(levels)
        if self.protect:
            ok &= (levels * (1.0 / LEVELS) <= self.tolerance).all(axis=1)
        return ok


class _ScorerCache:
    """One scorer per class (profiles are fixed while placing)."""

    def __init__(self, profiles: ProfileBook, protect: bool) -> None:
        self.profiles = profiles
        self.protect = protect
        self._scorers: dict[str, Scorer] = {}

    def scorer(self, job_class: str) -> Scorer:
        found = self._scorers.get(job_class)
        if found is None:
            found = Scorer.for_profile(self.profiles.profile(job_class), self.protect)
            self._scorers[job_class] = found
        return found


@dataclass(frozen=True)
class TarcilSettings:
    """``miss_probability``: the guarantee's p; ``cap``: the largest R (§6.1: 32);
    ``first_batch``: samples per RU used to estimate the acceptable share when
    there is no admission control; ``protect``: see :class:`Scorer`."""

    miss_probability: float = 1e-3
    cap: int = 32
    first_batch: int = 8
    protect: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.miss_probability < 1 or self.cap < 1 or self.first_batch < 1:
            raise InputError("tarcil: miss_probability in (0, 1), cap and first_batch >= 1")


class TarcilPlacer:
    name = "tarcil"

    def __init__(
        self,
        profiles: ProfileBook,
        settings: TarcilSettings | None = None,
        admission: AdmissionControl | None = None,
    ) -> None:
        self.settings = settings or TarcilSettings()
        self.scorers = _ScorerCache(profiles, self.settings.protect)
        self.admission = admission

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
    ) -> Placement:
        unplaceable = _unplaceable(job, view)
        if unplaceable is not None:
            return unplaceable
        scorer = self.scorers.scorer(job.job_class)
        if self.admission is None:
            return self._sequential(job, scorer, view, rng)
        assessment = self.admission.assess(
            job.job_class, job.ru_count, scorer.acceptable_levels, now,
            job.expected_duration_s, cache_key=(job.job_class, scorer.protect),
        )  # fmt: skip
        if assessment.verdict is Verdict.QUEUE and not force:
            return Placement(
                Outcome.QUEUED, sample_size=assessment.sample.r, reason=assessment.reason,
                wait_estimate_s=assessment.wait_estimate_s, wait_bound_s=assessment.bound_s,
            )  # fmt: skip
        r = self.settings.cap if force else min(assessment.sample.r, self.settings.cap)
        candidates = _distinct_enough(view.sample_free(r * job.ru_count, rng), job, view, rng)
        return _choose(job, scorer, view, rng, candidates, r, assessment.reason)

    def _sequential(
        self, job: PlacementJob, scorer: Scorer, view: PlacementView, rng: np.random.Generator
    ) -> Placement:
        settings = self.settings
        first = view.sample_free(settings.first_batch * job.ru_count, rng)
        acceptable = scorer.acceptable(view, view.server_of(first))
        # Laplace-smoothed share, so a batch with no acceptable RU asks for the cap.
        share = (acceptable.sum() + 0.5) / (len(first) + 1.0)
        r = sample_size(settings.miss_probability, share, cap=settings.cap).r
        more = max(0, r - settings.first_batch) * job.ru_count
        candidates = np.concatenate((first, view.sample_free(more, rng))) if more else first
        candidates = _distinct_enough(candidates, job, view, rng)
        return _choose(job, scorer, view, rng, candidates, max(r, settings.first_batch), "")


def _distinct_enough(
    sampled: IntArray, job: PlacementJob, view: PlacementView, rng: np.random.Generator
) -> IntArray:
    """Samples are drawn with replacement; a small ``R`` can repeat RUs and leave
    fewer than ``m`` distinct ones. Draw more until there are ``m`` (bounded)."""
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
    score, match = scorer.evaluate(view, servers, ranked=ranked)
    if level is not None:
        score = score - _LEVEL_WEIGHT * level
    chosen = _select(job, view, candidates, score)
    if chosen is None:
        together = _same_server(job.ru_count, view, candidates, score)
        assert together is not None
        return Placement(Outcome.PLACED, together, _quality(scorer, view, together), r, reason)
    if len(chosen) < job.ru_count:
        why = f"sampled {len(candidates)} distinct free RUs, {len(chosen)} usable"
        return Placement(Outcome.NO_ROOM, sample_size=r, reason=why)
    return Placement(Outcome.PLACED, candidates[chosen], match[chosen], r, reason)


def _quality(scorer: Scorer, view: PlacementView, rus: IntArray) -> FloatArray:
    quality: FloatArray = scorer.kernel.match(view.contention_levels(rus))
    return quality


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


class GreedyPlacer:
    """Exhaustive: every server with a free RU is scored with the same
    :class:`Scorer` as Tarcil, and the best are filled (locality levels first)."""

    name = "greedy"

    def __init__(self, profiles: ProfileBook, protect: bool = True) -> None:
        self.scorers = _ScorerCache(profiles, protect)

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
    ) -> Placement:
        unplaceable = _unplaceable(job, view)
        if unplaceable is not None:
            return unplaceable
        scorer = self.scorers.scorer(job.job_class)
        servers = view.servers_with_free()
        score = scorer.score(view, servers) - _LEVEL_WEIGHT * _server_levels(job, view, servers)
        if job.locality is Locality.SAME_SERVER:
            roomy = view.server_free_of(servers) >= job.ru_count
            if roomy.any():
                best = int(servers[np.flatnonzero(roomy)[int(np.argmax(score[roomy]))]])
                rus = view.free_rus_on(best)[: job.ru_count]
                return Placement(Outcome.PLACED, rus, _quality(scorer, view, rus))
        per_server = 1 if job.locality is Locality.SPREAD else None
        local = _LEVEL_WEIGHT * _server_levels(job, view, servers)

        def slot_score(index: IntArray, rank: IntArray) -> FloatArray:
            adjusted = scorer.score(view, servers[index], rank) if scorer.protect else score[index]
            return adjusted - local[index]

        rus = best_slots(servers, score, job.ru_count, view, slot_score, per_server)
        return Placement(Outcome.PLACED, rus, _quality(scorer, view, rus))


def _server_levels(job: PlacementJob, view: PlacementView, servers: IntArray) -> FloatArray:
    if not job.preferred_servers and not job.preferred_racks:
        return np.zeros(len(servers))
    level = np.full(len(servers), 2.0)
    if job.preferred_racks:
        in_rack = np.isin(view.rack_of(servers), np.asarray(job.preferred_racks))
        level[in_rack] = 1.0
    level[np.isin(servers, np.asarray(job.preferred_servers, dtype=np.int64))] = 0.0
    return level


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


def best_slots(
    servers: IntArray,
    base: FloatArray,
    m: int,
    view: PlacementView,
    slot_score: Callable[[IntArray, IntArray], FloatArray],
    per_server: int | None,
) -> IntArray:
    """The ``m`` best free RUs when the ``k``-th RU taken on a server scores
    ``slot_score(server index, k)``, no more than ``base`` and non-increasing in
    ``k``. Exact with only the top ``m`` servers by ``base``: any slot elsewhere is
    beaten by their ``m`` first slots."""
    if len(servers) == 0:
        return _NO_RUS
    k = min(len(servers), m)
    top = np.argpartition(-base, k - 1)[:k] if k < len(servers) else np.arange(len(servers))
    top = top[np.argsort(-base[top], kind="stable")]
    slots = np.minimum(view.server_free_of(servers[top]), m)
    if per_server is not None:
        slots = np.minimum(slots, per_server)
    index = np.repeat(top, slots)
    rank = np.arange(len(index)) - np.repeat(np.cumsum(slots) - slots, slots)
    picked = index[pick_best(slot_score(index, rank), m)]
    if len(picked) < m:
        return _NO_RUS
    chosen = [
        view.free_rus_on(int(servers[i]))[:count]
        for i, count in zip(*np.unique(picked, return_counts=True), strict=True)
    ]
    return np.concatenate(chosen)


def _placed(rus: IntArray) -> Placement:
    return Placement(Outcome.PLACED, rus)


class SamplingPlacer:
    """Sparrow-like batch sampling: ``probes`` free RUs per RU needed, the ``m`` on
    the least loaded servers kept. Blind to interference."""

    name = "random"

    def __init__(self, probes: int = 2) -> None:
        if probes < 1:
            raise InputError("random placement: probes must be at least 1")
        self.probes = probes

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
    ) -> Placement:
        unplaceable = _unplaceable(job, view)
        if unplaceable is not None:
            return unplaceable
        candidates = np.unique(view.sample_free(self.probes * job.ru_count, rng))
        emptiness = view.server_free_of(view.server_of(candidates)).astype(np.float64)
        chosen = candidates[pick_best(emptiness, job.ru_count)]
        if len(chosen) < job.ru_count:
            extra = _top_up(job.ru_count - len(chosen), chosen, view, rng)
            chosen = np.concatenate((chosen, extra))
        return Placement(Outcome.PLACED, chosen, sample_size=self.probes)


def _top_up(
    missing: int, have: IntArray, view: PlacementView, rng: np.random.Generator
) -> IntArray:
    """More distinct free RUs when a small sample repeated itself."""
    found: list[int] = []
    taken = set(have.tolist())
    for _ in range(64):
        for ru in view.sample_free(missing * 2, rng).tolist():
            if ru not in taken:
                taken.add(ru)
                found.append(ru)
                if len(found) == missing:
                    return np.asarray(found, dtype=np.int64)
    for server in view.servers_with_free().tolist():  # tiny clusters: sampling stalled
        for ru in view.free_rus_on(server).tolist():
            if ru not in taken:
                taken.add(ru)
                found.append(ru)
                if len(found) == missing:
                    return np.asarray(found, dtype=np.int64)
    return np.asarray(found, dtype=np.int64)


class LeastLoadedPlacer:
    """Every server scanned; the ones with the most free RUs filled first."""

    name = "least-loaded"

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
    ) -> Placement:
        unplaceable = _unplaceable(job, view)
        if unplaceable is not None:
            return unplaceable
        servers = view.servers_with_free()
        # random jitter below one RU breaks ties between equally empty servers
        emptiness = view.server_free_of(servers) + 0.5 * rng.random(len(servers))
        per_server = 1 if job.locality is Locality.SPREAD else None

        def slot_score(index: IntArray, rank: IntArray) -> FloatArray:
            filled: FloatArray = emptiness[index] - rank  # water-filling
            return filled

        return _placed(best_slots(servers, emptiness, job.ru_count, view, slot_score, per_server))


class FirstFitPlacer:
    """YARN's Capacity Scheduler on NodeManager heartbeats: the servers heartbeat in
    a fixed cyclic order and the first with room takes as much of the job as fits,
    the next ones the rest."""

    name = "yarn"

    def __init__(self) -> None:
        self._next = 0

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
    ) -> Placement:
        unplaceable = _unplaceable(job, view)
        if unplaceable is not None:
            return unplaceable
        count = view.server_count
        chosen: list[IntArray] = []
        got = 0
        for step in range(count):
            server = (self._next + step) % count
            if view.server_free_of(np.asarray([server]))[0] > 0:
                rus = view.free_rus_on(server)[: job.ru_count - got]
                chosen.append(rus)
                got += len(rus)
                if got >= job.ru_count:
                    self._next = (server + 1) % count
                    break
        return _placed(np.concatenate(chosen))


POLICY_NAMES: Sequence[str] = ("tarcil", "yarn", "random", "least-loaded", "greedy")


def make_placer(
    name: str,
    profiles: ProfileBook,
    tarcil: TarcilSettings | None = None,
    admission: AdmissionControl | None = None,
) -> Placer:
    """The placer called ``name`` (one of :data:`POLICY_NAMES`)."""
    if name == "tarcil":
        return TarcilPlacer(profiles, tarcil, admission)
    if name == "greedy":
        return GreedyPlacer(profiles, tarcil.protect if tarcil else True)
    if name == "random":
        return SamplingPlacer(2)
    if name == "least-loaded":
        return LeastLoadedPlacer()
    if name == "yarn":
        return FirstFitPlacer()
    raise InputError(f"unknown placement policy {name!r} (known: {', '.join(POLICY_NAMES)})")
