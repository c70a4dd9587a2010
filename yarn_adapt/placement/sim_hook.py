"""The placers behind the YARN simulator's placement hook (``yarn-adapt sim
--placement``).

:class:`SimPlacement` implements :class:`yarn_adapt.sim.hooks.PlacementPolicy`:
each granted container becomes a :class:`~yarn_adapt.placement.jobs.PlacementJob`
of as many RUs as it spans (an RU is one vcore and the node's memory per vcore,
Tarcil §3.2), all on one node, and the placer chooses the node through
:class:`YarnSimView`, a :class:`~yarn_adapt.placement.view.PlacementView` over the
simulator's :class:`~yarn_adapt.sim.hooks.ClusterView`. The placers are the very
classes the RU bench runs.

What the hook does not give, and how this works around it:

* **Who runs where.** ``ClusterView`` tells how much of a node is free, not which
  containers hold the rest, and the policy hears nothing when a container ends.
  The view keeps its own record of what it placed on each node (class pressure
  per RU); when a node turns out to have more free RUs than the record allows,
  the oldest records are dropped (containers of one node ending in start order),
  and RUs held by containers it never placed count with the default profile's
  pressure. The exact fix is a hook change: a ``released(node_id, request)``
  callback, or ``ClusterView.containers(node_id)``.
* **Cluster-wide counts.** ``free_count`` would need a scan; the view reports the
  cluster's RU total instead (an upper bound), so a full cluster shows up as
  "sampling found no free RU" (the grant then waits for a later heartbeat).
* **Interference.** The simulator has no interference model, so in ``yarn-adapt
  sim`` the policy changes where containers go and when they wait, not how fast
  they run; the RU model of ``yarn-adapt bench placement`` measures that.
  :attr:`SimPlacement.stats` reports decisions, declines, decision time and the
  quality ``Q`` the placements got.

Admission control needs per-bucket counters kept current on every change, which
the hook cannot provide; Tarcil runs here with the sequential sample size
(:meth:`~yarn_adapt.placement.tarcil.TarcilPlacer._sequential`).
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.model.resources import Resources
from yarn_adapt.placement.jobs import Locality, PlacementJob, Placer
from yarn_adapt.placement.policies import make_placer
from yarn_adapt.placement.profiles import N_RESOURCES, ProfileBook
from yarn_adapt.placement.quality import digits
from yarn_adapt.placement.tarcil import TarcilSettings
from yarn_adapt.sim.hooks import ClusterView, HeartbeatNodePlacement, PlacementRequest
from yarn_adapt.sim.hooks import PlacementPolicy as SimPlacementPolicy
from yarn_adapt.sim.spec import ClusterSpec

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
_SAMPLE_TRIES = 16


@dataclass
class _Resident:
    rus: int
    caused: FloatArray
    tolerance: FloatArray


class YarnSimView:
    """A PlacementView of the simulator's nodes (see the module docstring)."""

    def __init__(self, cluster: ClusterSpec, book: ProfileBook) -> None:
        self.node_ids = [n.id for n in cluster.nodes]
        self.node_index = {node_id: i for i, node_id in enumerate(self.node_ids)}
        self.ru_memory = [
            max(1, n.resources.memory_mb // max(1, n.resources.vcores)) for n in cluster.nodes
        ]
        self.slots = np.array([max(1, n.resources.vcores) for n in cluster.nodes], dtype=np.int64)
        self.first = np.concatenate(([0], np.cumsum(self.slots)[:-1])).astype(np.int64)
        self.ru_node = np.repeat(np.arange(len(self.slots), dtype=np.int64), self.slots)
        racks = sorted({n.rack for n in cluster.nodes})
        self.rack = np.array([racks.index(n.rack) for n in cluster.nodes], dtype=np.int64)
        self.neighbours = np.maximum(self.slots - 1, 1).astype(np.float64)
        default = book.default
        self._unknown_caused = np.array(default.caused)
        self._unknown_tolerance = np.array(default.tolerance)
        self._residents: list[deque[_Resident]] = [deque() for _ in self.node_ids]
        self._cluster: ClusterView | None = None
        self._free_memo: dict[int, int] = {}
        self._sum_memo: dict[int, FloatArray] = {}

    def bind(self, cluster: ClusterView) -> None:
        """Read ``cluster`` for the next decision (node figures are memoised for
        that decision only)."""
        self._cluster = cluster
        self._free_memo = {}
        self._sum_memo = {}

    # ------------------------------------------------------------------ PlacementView

    @property
    def ru_count(self) -> int:
        return int(self.slots.sum())

    @property
    def server_count(self) -> int:
        return len(self.node_ids)

    @property
    def free_count(self) -> int:
        return self.ru_count  # an upper bound; see the module docstring

    def free_rus_of_node(self, node: int) -> int:
        memo = self._free_memo.get(node)
        if memo is not None:
            return memo
        assert self._cluster is not None, "bind() the view to the simulator's cluster first"
        free = self._cluster.free(self.node_ids[node])
        by_memory = free.memory_mb // self.ru_memory[node]
        count = max(0, min(int(by_memory), free.vcores, int(self.slots[node])))
        self._free_memo[node] = count
        return count

    def sample_free(self, count: int, rng: np.random.Generator) -> IntArray:
        """Uniform over free RUs by rejection: a slot is free when its number on the
        node is below the node's free RU count."""
        found: list[int] = []
        for _ in range(_SAMPLE_TRIES):
            draws = rng.integers(0, self.ru_count, size=max(count, 1) * 2)
            for ru in draws.tolist():
                node = int(self.ru_node[ru])
                if ru - int(self.first[node]) < self.free_rus_of_node(node):
                    found.append(ru)
                    if len(found) == count:
                        return np.asarray(found, dtype=np.int64)
        return np.asarray(found, dtype=np.int64)

    def sample_free_in_racks(
        self, racks: IntArray, count: int, rng: np.random.Generator
    ) -> IntArray:
        nodes = np.flatnonzero(np.isin(self.rack, racks))
        if len(nodes) == 0:
            return np.empty(0, dtype=np.int64)
        picks = nodes[rng.integers(0, len(nodes), size=max(count, 1) * 4)]
        found = [int(self.first[n]) for n in picks.tolist() if self.free_rus_of_node(n) > 0]
        return np.asarray(found[:count], dtype=np.int64)

    def sample_free_on(self, servers: IntArray, rng: np.random.Generator) -> IntArray:
        found = [
            int(self.first[n]) + int(rng.integers(0, self.free_rus_of_node(int(n))))
            for n in servers.tolist()
            if self.free_rus_of_node(int(n)) > 0
        ]
        return np.asarray(found, dtype=np.int64)

    def contention_levels(self, rus: IntArray) -> FloatArray:
        return self.server_levels_of(self.server_of(rus))

    def server_of(self, rus: IntArray) -> IntArray:
        nodes: IntArray = self.ru_node[rus]
        return nodes

    def rack_of(self, servers: IntArray) -> IntArray:
        racks: IntArray = self.rack[servers]
        return racks

    def free_rus_on(self, server: int) -> IntArray:
        first = int(self.first[server])
        return np.arange(first, first + self.free_rus_of_node(server), dtype=np.int64)

    def servers_with_free(self) -> IntArray:
        free = [n for n in range(self.server_count) if self.free_rus_of_node(n) > 0]
        return np.asarray(free, dtype=np.int64)

    def server_free_of(self, servers: IntArray) -> IntArray:
        return np.asarray([self.free_rus_of_node(int(n)) for n in servers], dtype=np.int64)

    def server_levels_of(self, servers: IntArray) -> FloatArray:
        rows = [self._caused_sum(int(n)) / self.neighbours[n] for n in servers]
        return digits(np.reshape(rows, (len(rows), N_RESOURCES)))

    def server_headroom_of(self, servers: IntArray) -> FloatArray:
        rows = [self._headroom(int(n)) for n in servers]
        return np.reshape(rows, (len(rows), N_RESOURCES))

    def server_neighbours_of(self, servers: IntArray) -> FloatArray:
        neighbours: FloatArray = self.neighbours[servers]
        return neighbours

    def server_closed_of(self, servers: IntArray) -> npt.NDArray[np.bool_]:
        """No load monitor runs under the simulator: nothing is closed."""
        return np.zeros(len(servers), dtype=bool)

    # ------------------------------------------------------------------ residents

    def record(self, node: int, rus: int, caused: FloatArray, tolerance: FloatArray) -> None:
        self._reconcile(node)
        self._residents[node].append(_Resident(rus, caused, tolerance))
        self._free_memo.pop(node, None)
        self._sum_memo.pop(node, None)

    def _reconcile(self, node: int) -> list[_Resident]:
        """Drop the oldest records until they fit what the node has in use; RUs in
        use beyond the records are containers of unknown class."""
        residents = self._residents[node]
        used = int(self.slots[node]) - self.free_rus_of_node(node)
        while residents and sum(r.rus for r in residents) > used:
            residents.popleft()
        known = sum(r.rus for r in residents)
        unknown = [_Resident(used - known, self._unknown_caused, self._unknown_tolerance)]
        return list(residents) + (unknown if used > known else [])

    def _caused_sum(self, node: int) -> FloatArray:
        memo = self._sum_memo.get(node)
        if memo is not None:
            return memo
        total = np.zeros(N_RESOURCES)
        for resident in self._reconcile(node):
            total += resident.rus * resident.caused
        self._sum_memo[node] = total
        return total

    def _headroom(self, node: int) -> FloatArray:
        residents = self._reconcile(node)
        if not residents:
            return np.ones(N_RESOURCES)
        total = self._caused_sum(node)
        slack = [r.tolerance - (total - r.caused) / self.neighbours[node] for r in residents]
        headroom: FloatArray = np.maximum(np.min(slack, axis=0), 0.0)
        return headroom


@dataclass
class PlacementStats:
    decisions: int = 0
    declined: int = 0
    decision_ns: list[int] = field(default_factory=list)
    quality: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float | int | None]:
        times = np.asarray(self.decision_ns, dtype=np.float64) / 1e6
        return {
            "decisions": self.decisions,
            "declined": self.declined,
            "decision_ms_mean": round(float(times.mean()), 4) if len(times) else None,
            "decision_ms_median": round(float(np.median(times)), 4) if len(times) else None,
            "decision_ms_p99": round(float(np.percentile(times, 99)), 4) if len(times) else None,
            "mean_quality": round(float(np.mean(self.quality)), 4) if self.quality else None,
        }


def class_by_hash(classes: Sequence[str]) -> Callable[[PlacementRequest], str]:
    """A job's interference class from a stable hash of its id (the simulator's
    workloads carry no class)."""
    if not classes:
        raise InputError("placement: no interference classes to assign")
    names = list(classes)

    def classify(request: PlacementRequest) -> str:
        digest = hashlib.sha256(request.job_id.encode()).digest()
        return names[int.from_bytes(digest[:4], "big") % len(names)]

    return classify


class SimPlacement:
    """A placer as the simulator's placement hook (see the module docstring)."""

    def __init__(
        self,
        placer: Placer,
        cluster: ClusterSpec,
        book: ProfileBook,
        classify: Callable[[PlacementRequest], str],
        seed: int = 0,
    ) -> None:
        self.placer = placer
        self.book = book
        self.classify = classify
        self.view = YarnSimView(cluster, book)
        self.rng = np.random.default_rng(seed)
        self.stats = PlacementStats()

    def choose_node(
        self,
        request: PlacementRequest,
        heartbeat_node: str,
        cluster: ClusterView,
        rng: random.Random,
    ) -> str | None:
        began = time.perf_counter_ns()
        chosen = self._choose(request, cluster)
        self.stats.decision_ns.append(time.perf_counter_ns() - began)
        self.stats.decisions += 1
        if chosen is None:
            self.stats.declined += 1
        return chosen

    def _choose(self, request: PlacementRequest, cluster: ClusterView) -> str | None:
        view = self.view
        view.bind(cluster)
        job_class = self.classify(request)
        ru_count = self._ru_count(request.resources)
        job = PlacementJob(request.job_id, job_class, ru_count, Locality.SAME_SERVER)
        placement = self.placer.place(job, view, self.rng)
        if not placement.placed:
            return None
        node = int(view.server_of(placement.rus[:1])[0])
        node_id = view.node_ids[node]
        if not cluster.fits(node_id, request.resources):
            return None
        profile = self.book.profile(job_class)
        view.record(node, ru_count, np.array(profile.caused), np.array(profile.tolerance))
        self.stats.quality.extend(placement.quality.tolist())
        return node_id

    def _ru_count(self, resources: Resources) -> int:
        memory = max(self.view.ru_memory)
        return max(1, resources.vcores, math.ceil(resources.memory_mb / memory))


SIM_POLICIES: Sequence[str] = ("yarn", "tarcil", "random", "least-loaded", "greedy")


def sim_placement(
    name: str, cluster: ClusterSpec, book: ProfileBook | None = None, seed: int = 0
) -> SimPlacementPolicy:
    """The simulator's placement hook for policy ``name``: ``yarn`` is the
    simulator's own (the heartbeating node); the others run through
    :class:`SimPlacement`. ``book`` defaults to the placement bench's synthetic
    catalogue of 20 classes (jobs get a class by a hash of their id)."""
    if name == "yarn":
        return HeartbeatNodePlacement()
    if name not in SIM_POLICIES:
        raise InputError(f"unknown placement policy {name!r} (known: {', '.join(SIM_POLICIES)})")
    if book is None:
        from yarn_adapt.placement.workloads import synthetic_classes

        book = ProfileBook(synthetic_classes(20, seed))
    placer = make_placer(name, book, TarcilSettings())
    return SimPlacement(placer, cluster, book, class_by_hash(sorted(book.profiles)), seed)
