"""Placers: where a job's RUs go.

Every placer reads the cluster through
:class:`~yarn_adapt.placement.view.PlacementView` and returns a :class:`Placement`
(it never changes the state: committing is the caller's, see
:mod:`yarn_adapt.placement.agents`). The same classes serve the RU cluster model of
``yarn-adapt bench placement`` and the YARN simulator's placement hook.

* :class:`TarcilPlacer` -- quality-aware sampling with a statistical guarantee
  (Tarcil §3-4): admission control sets the sample size ``R``; ``R * m`` free RUs
  are sampled (batch sampling) and the ``m`` best kept, after locality; when even
  those would slow the job down, admission control weighs waiting against placing
  now (see the class). Without admission control (the YARN simulator has no
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
second), then the rest; quality breaks ties within a level. A level is worth
``_LEVEL_WEIGHT`` of score, as much as 5% of predicted slowdown: a preferred RU is
passed over only for one that predicts at least 5% less slowdown.
``Locality.SAME_SERVER`` puts all ``m`` RUs on one server, judged by the aggregate
quality of its free RUs (neighbour aggregation); ``Locality.SPREAD`` takes at most
one RU per server.

**Scores.** Tarcil and the greedy optimum rank candidates with the same
:class:`Scorer`: the slowdown the placement predicts for the job and for the
server's occupants first, Tarcil's ``Q`` among equals (``Q`` alone with
``protect=False``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl, Assessment
from yarn_adapt.placement.profiles import InterferenceProfile, ProfileSource
from yarn_adapt.placement.quality import LEVELS, QualityKernel
from yarn_adapt.placement.sampling import pick_best, pick_best_distinct, sample_size
from yarn_adapt.placement.view import PlacementView

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
_NO_RUS: IntArray = np.empty(0, dtype=np.int64)
_NO_QUALITY: FloatArray = np.empty(0)


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
    own_overshoot: float = 0.0  # predicted slowdown of the job on these RUs (worst RU)
    harm: float = 0.0  # predicted overshoot pushed onto their occupants (worst RU)
    acceptable_share: float | None = None  # of the candidates looked at

    @property
    def placed(self) -> bool:
        return self.outcome is Outcome.PLACED

    @property
    def overshoot(self) -> float:
        return self.own_overshoot + self.harm


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
        offered: IntArray | None = None,
    ) -> Placement:
        """Where ``job`` goes now. ``force``: skip admission queueing (the job's
        wait bound has passed). ``offered``: servers that just freed RUs the job
        accepts (admission control's wake-up); their free RUs join the
        candidates."""
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


class CheckedPlacer:
    """The opening every placer here shares: a job the cluster cannot hold, now or
    ever (:func:`_unplaceable`), is answered before the policy runs. A policy that
    admits, forces or takes offered RUs overrides :meth:`_place`; the others
    :meth:`_pick`."""

    name: str

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
        offered: IntArray | None = None,
    ) -> Placement:
        """See :meth:`Placer.place`."""
        unplaceable = _unplaceable(job, view)
        if unplaceable is not None:
            return unplaceable
        return self._place(job, view, rng, now, force=force, offered=offered)

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
        return self._pick(job, view, rng)

    def _pick(self, job: PlacementJob, view: PlacementView, rng: np.random.Generator) -> Placement:
        raise NotImplementedError(f"{type(self).__name__} places no job")


# A unit of predicted slowdown outweighs the whole range of Q: the scorer never trades
# a slower job (or neighbour) for a tighter fit (see Scorer).
OVERSHOOT_WEIGHT = 100.0
# A locality level outweighs the whole range of Q and 5% of predicted slowdown.
_LEVEL_WEIGHT = 0.05 * OVERSHOOT_WEIGHT
# Servers the load monitor closed (Tarcil §5.2) come after every open one.
_CLOSED_PENALTY = 1e3
# Predicted overshoot (own plus harm) at or below this counts as none: an RU that
# predicts at most 1% slowdown meets the job (no second draw, no wait, no move).
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


class _ScorerCache:
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
        self.scorers = _ScorerCache(profiles, self.settings.protect)
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
        candidates = _with_offered(_NO_RUS, view, offered)
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
        unplaceable = _unplaceable(job, view)
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
        score = score - _LEVEL_WEIGHT * level
    chosen = _select(job, view, candidates, score)
    if chosen is None:
        together = _same_server(job.ru_count, view, candidates, score)
        assert together is not None
        own, harm = _together_overshoot(scorer, view, together)
        return Placement(
            Outcome.PLACED, together, _quality(scorer, view, together), r, reason,
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


class GreedyPlacer(CheckedPlacer):
    """Exhaustive: every server with a free RU is scored with the same
    :class:`Scorer` as Tarcil, and the best are filled (locality levels first)."""

    name = "greedy"

    def __init__(self, profiles: ProfileSource, protect: bool = True) -> None:
        self.scorers = _ScorerCache(profiles, protect)

    def _pick(self, job: PlacementJob, view: PlacementView, rng: np.random.Generator) -> Placement:
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


class SamplingPlacer(CheckedPlacer):
    """Sparrow-like batch sampling: ``probes`` free RUs per RU needed, the ``m`` on
    the least loaded servers kept. Blind to interference."""

    name = "random"

    def __init__(self, probes: int = 2) -> None:
        if probes < 1:
            raise InputError("random placement: probes must be at least 1")
        self.probes = probes

    def _pick(self, job: PlacementJob, view: PlacementView, rng: np.random.Generator) -> Placement:
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


class LeastLoadedPlacer(CheckedPlacer):
    """Every server scanned; the ones with the most free RUs filled first."""

    name = "least-loaded"

    def _pick(self, job: PlacementJob, view: PlacementView, rng: np.random.Generator) -> Placement:
        servers = view.servers_with_free()
        # random jitter below one RU breaks ties between equally empty servers
        emptiness = view.server_free_of(servers) + 0.5 * rng.random(len(servers))
        per_server = 1 if job.locality is Locality.SPREAD else None

        def slot_score(index: IntArray, rank: IntArray) -> FloatArray:
            filled: FloatArray = emptiness[index] - rank  # water-filling
            return filled

        return _placed(best_slots(servers, emptiness, job.ru_count, view, slot_score, per_server))


class FirstFitPlacer(CheckedPlacer):
    """YARN's Capacity Scheduler on NodeManager heartbeats: the servers heartbeat in
    a fixed cyclic order and the first with room takes as much of the job as fits,
    the next ones the rest."""

    name = "yarn"

    def __init__(self) -> None:
        self._next = 0

    def _pick(self, job: PlacementJob, view: PlacementView, rng: np.random.Generator) -> Placement:
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
    profiles: ProfileSource,
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
