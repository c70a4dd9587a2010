"""The placers Tarcil is compared with: greedy (every server scored), sampling without
the quality guarantee, least loaded and first fit; :data:`POLICY_NAMES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from yarn_adapt.errors import InputError
from yarn_adapt.placement.jobs import (
    NO_RUS,
    CheckedPlacer,
    FloatArray,
    IntArray,
    Locality,
    Outcome,
    Placement,
    PlacementJob,
)
from yarn_adapt.placement.profiles import ProfileSource
from yarn_adapt.placement.sampling import pick_best
from yarn_adapt.placement.scoring import LEVEL_WEIGHT, ScorerCache, rus_quality
from yarn_adapt.placement.view import PlacementView


class GreedyPlacer(CheckedPlacer):
    """Exhaustive: every server with a free RU is scored with the same
    :class:`Scorer` as Tarcil, and the best are filled (locality levels first)."""

    name = "greedy"

    def __init__(self, profiles: ProfileSource, protect: bool = True) -> None:
        self.scorers = ScorerCache(profiles, protect)

    def _pick(self, job: PlacementJob, view: PlacementView, rng: np.random.Generator) -> Placement:
        scorer = self.scorers.scorer(job.job_class)
        servers = view.servers_with_free()
        score = scorer.score(view, servers) - LEVEL_WEIGHT * _server_levels(job, view, servers)
        if job.locality is Locality.SAME_SERVER:
            roomy = view.server_free_of(servers) >= job.ru_count
            if roomy.any():
                best = int(servers[np.flatnonzero(roomy)[int(np.argmax(score[roomy]))]])
                rus = view.free_rus_on(best)[: job.ru_count]
                return Placement(Outcome.PLACED, rus, rus_quality(scorer, view, rus))
        per_server = 1 if job.locality is Locality.SPREAD else None
        local = LEVEL_WEIGHT * _server_levels(job, view, servers)

        def slot_score(index: IntArray, rank: IntArray) -> FloatArray:
            adjusted = scorer.score(view, servers[index], rank) if scorer.protect else score[index]
            return adjusted - local[index]

        rus = best_slots(servers, score, job.ru_count, view, slot_score, per_server)
        return Placement(Outcome.PLACED, rus, rus_quality(scorer, view, rus))


def _server_levels(job: PlacementJob, view: PlacementView, servers: IntArray) -> FloatArray:
    if not job.preferred_servers and not job.preferred_racks:
        return np.zeros(len(servers))
    level = np.full(len(servers), 2.0)
    if job.preferred_racks:
        in_rack = np.isin(view.rack_of(servers), np.asarray(job.preferred_racks))
        level[in_rack] = 1.0
    level[np.isin(servers, np.asarray(job.preferred_servers, dtype=np.int64))] = 0.0
    return level


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
        return NO_RUS
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
        return NO_RUS
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
