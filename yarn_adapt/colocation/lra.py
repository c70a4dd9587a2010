"""Feeding the latency-critical applications' demand learners (the observe side of
:mod:`yarn_adapt.demand.lra`), and their demand per node for the guard.

:class:`LearnedLraDemand` is a :class:`~yarn_adapt.colocation.demand.FedDemandProvider`:
every guard round the observer hands it the trace reading and the nodes, and it

1. adds up, per application, the requests its entry services received since the
   previous read and how many were within its latency target (the reading's
   :class:`~yarn_adapt.colocation.model.RequestTally`, disjoint intervals);
2. adds up the CPU over the same time, in vcore-seconds: per node its capacity
   (the journalled original, else the RM's total), what batch used (the
   NodeManager's measure of its containers, ``resourceUtilization``; without it
   the vcores the RM allocated to them) and what each application's processes
   used (a :class:`CpuUsage`);
3. once ``round_s`` has passed, closes a feedback round: per application the
   load (requests per second), the fraction within target, the CPU it *had*
   (:func:`~yarn_adapt.demand.lra.had_vcores`) and what it used per node, into
   the learner; and takes a new :class:`~yarn_adapt.demand.model.DemandSnapshot`.

It also adds up, when a :class:`MemoryUsage` is given, the working set each
application held per node (the round's peak), which the learner learns against the
load (:mod:`yarn_adapt.demand.memory`).

:meth:`LearnedLraDemand.demands` spreads each application's demand over its nodes
(:func:`~yarn_adapt.demand.lra.node_shares`: CPU in proportion to the CPU it used on
each, memory to the memory it held) and hands each node's parts to
:func:`~yarn_adapt.colocation.reserve.node_demand`: learned demand where every
application there has ``min_rounds`` feedback rounds (or a warm start, or a stated
demand), else the ``fallback`` (observed usage plus headroom) with the reason; a
Cilantro policy (``share``) where several share the node. What one application
alone keeps (``reserve``): the demand's ``upper`` bound (``"upper"``, the default:
where the performance lower bound reaches the goal, the pessimistic figure), or
eq. 6's recommendation (``"recommendation"``: ``beta x upper + (1 - beta) x`` the
exploration point). The first never lets the application run on less than its
bound, so its bound shrinks only as load moves (the learner sees less CPU per
request only when the load beats its forecast); the second explores below it, as
Cilantro's demand-based policies do, and converges (docs/colocation.md has the numbers).
:meth:`LearnedLraDemand.applications` is what the page and ``guard status`` show:
per application its learned demand, bounds and the samples behind them.

Where the applications' CPU comes from (:class:`CpuUsage`):

- :class:`ProcessCpuUsage` -- the CPU time of known processes per application
  and node from ``/proc/<pid>/stat`` (the testbed knows its services' pids);
- :class:`NodeUtilizationUsage` -- what the NodeManager measures on its host
  outside YARN's containers (``node - containers`` of ``resourceUtilization``),
  given to the applications whose services were traced on the node, split
  equally among them when there are several; its memory likewise
  (:meth:`NodeUtilizationUsage.read_memory`, a :class:`MemoryUsage`).
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from tracing.model import RiskSnapshot
from yarn_adapt.colocation.demand import ObservedUsageDemand, node_of
from yarn_adapt.colocation.model import LearnedApplication, NodeDemand, NodeView, RiskReading
from yarn_adapt.colocation.reserve import Part, ReserveSettings, Splits, node_demand
from yarn_adapt.demand.learner import PerformanceModel, ProfiledCurve, StatedDemand
from yarn_adapt.demand.lra import LraDemandLearner, LraRound, LraSpec, NodeCpu, had_vcores
from yarn_adapt.demand.model import Demand, DemandSnapshot, DemandSource
from yarn_adapt.demand.shared import SharePolicy
from yarn_adapt.errors import TraceError
from yarn_adapt.model import Node, NodeUtilization
from yarn_adapt.workload._io import MalformedRows, read_all_text

RESERVES = ("upper", "recommendation")


class CpuUsage(Protocol):
    def read(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> dict[str, dict[str, float]] | None:
        """Per application, per node id: the cores its processes used on average
        since the previous read; None when nothing can be said yet (first read)."""
        ...


class MemoryUsage(Protocol):
    def read_memory(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> dict[str, dict[str, float]] | None:
        """Per application, per node id: the memory (MB) its processes hold now;
        None when nothing can be said."""
        ...


# --------------------------------------------------------------------------- usage


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (threads included), or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ProcessCpuUsage:
    """The CPU time of each application's processes per node, from ``/proc``.

    ``pids`` answers, each read, application -> node id -> pids. A process seen
    at both reads counts its difference; one that appeared or vanished between
    them counts nothing for that interval."""

    def __init__(
        self,
        pids: Callable[[], Mapping[str, Mapping[str, Sequence[int]]]],
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu_seconds: Callable[[int], float | None] = process_cpu_seconds,
    ) -> None:
        self.pids = pids
        self.clock = clock
        self.cpu_seconds = cpu_seconds
        self._last: dict[int, float] = {}
        self._last_at: float | None = None

    def read(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> dict[str, dict[str, float]] | None:
        at = self.clock()
        seen: dict[int, float] = {}
        spent: dict[str, dict[str, float]] = {}
        for application, by_node in self.pids().items():
            for node_id, pids in by_node.items():
                total = 0.0
                for pid in pids:
                    value = self.cpu_seconds(pid)
                    if value is None:
                        continue
                    seen[pid] = value
                    if pid in self._last:
                        total += max(0.0, value - self._last[pid])
                spent.setdefault(application, {})[node_id] = total
        last_at, self._last, self._last_at = self._last_at, seen, at
        if last_at is None or at <= last_at:
            return None
        elapsed = at - last_at
        return {
            app: {node: seconds / elapsed for node, seconds in by_node.items()}
            for app, by_node in spent.items()
        }


class NodeUtilizationUsage:
    """Non-container CPU per node (the NodeManager's measure, in cores, on nodes that
    advertise ``vcores_per_core`` vcores per core), to the applications traced on the
    node (equal parts when several are)."""

    def __init__(
        self,
        applications: Mapping[str, Sequence[str]],
        node_hosts: Mapping[str, str] | None = None,
        vcores_per_core: float = 1.0,
    ) -> None:
        self.applications = {app: frozenset(services) for app, services in applications.items()}
        self.node_hosts = dict(node_hosts or {})
        self.vcores_per_core = vcores_per_core

    def read(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> dict[str, dict[str, float]] | None:
        return self._outside(
            nodes, risk, lambda use: use.outside_containers_cores(self.vcores_per_core)
        )

    def read_memory(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> dict[str, dict[str, float]] | None:
        """Memory outside the containers (MB), to the applications traced on the node."""
        return self._outside(
            nodes, risk, lambda use: float(use.node_memory_mb - use.containers_memory_mb)
        )

    def _outside(
        self,
        nodes: Sequence[Node],
        risk: RiskSnapshot | None,
        measure: Callable[[NodeUtilization], float],
    ) -> dict[str, dict[str, float]] | None:
        if risk is None:
            return None
        apps_on = self._apps_on(nodes, risk)
        usage: dict[str, dict[str, float]] = {}
        for node in nodes:
            use, apps = node.utilization, apps_on.get(node.id)
            if use is None or not apps:
                continue
            outside = max(0.0, measure(use))
            for app in apps:
                usage.setdefault(app, {})[node.id] = outside / len(apps)
        return usage

    def _apps_on(self, nodes: Sequence[Node], risk: RiskSnapshot) -> dict[str, set[str]]:
        apps_on: dict[str, set[str]] = {}
        for entry in risk.nodes:
            node_id = node_of(entry.node, nodes, self.node_hosts)
            if node_id is None:
                continue
            for app, services in self.applications.items():
                if services & set(entry.services):
                    apps_on.setdefault(node_id, set()).add(app)
        return apps_on


# --------------------------------------------------------------------------- provider


@dataclass
class _Accumulated:
    """One feedback round in the making."""

    started_s: float | None = None
    since_us: int | None = None
    until_us: int | None = None
    requests: dict[str, int] = field(default_factory=dict)
    within: dict[str, int] = field(default_factory=dict)
    cpu_s: float = 0.0  # seconds over which CPU was measured
    capacity: dict[str, float] = field(default_factory=dict)  # vcore-seconds per node
    batch: dict[str, float] = field(default_factory=dict)
    used: dict[str, dict[str, float]] = field(default_factory=dict)  # app -> node -> vcore-s
    held_mb: dict[str, dict[str, float]] = field(default_factory=dict)  # app -> node -> peak MB


class LearnedLraDemand:
    """See the module docstring."""

    def __init__(
        self,
        learner: LraDemandLearner,
        usage: CpuUsage,
        *,
        round_s: float = 60.0,
        vcores_per_core: float = 1.0,
        node_hosts: Mapping[str, str] | None = None,
        reserve: str = "upper",
        memory: MemoryUsage | None = None,
        fallback: ObservedUsageDemand | None = None,
        min_rounds: int = 1,
        share: SharePolicy = SharePolicy.LEAST,
    ) -> None:
        if reserve not in RESERVES:
            raise ValueError(f"reserve must be one of {', '.join(RESERVES)}, got {reserve!r}")
        if not round_s > 0 or not vcores_per_core > 0:
            raise ValueError("round_s and vcores_per_core must be positive")
        if min_rounds < 1:
            raise ValueError(f"min_rounds must be at least 1, got {min_rounds}")
        self.learner = learner
        self.usage = usage
        self.memory = memory
        self.fallback = fallback
        self.min_rounds = min_rounds
        self.reserve_settings = ReserveSettings(reserve, SharePolicy(share))
        self._splits: Splits = {}
        self.round_s = round_s
        self.vcores_per_core = vcores_per_core
        self.node_hosts = dict(node_hosts or {})
        self.reserve = reserve
        self.rounds = 0
        self.snapshot: DemandSnapshot | None = None
        self.last_rounds: tuple[LraRound, ...] = ()
        self._service_app = {
            service: spec.name for spec in learner.specs for service in spec.services
        }
        self._seen_on: dict[str, set[str]] = {}
        self._capacity: dict[str, float] = {}  # node id -> real vcores (the views')
        self._acc = _Accumulated()
        self._last_now_s: float | None = None
        self.memory_snapshot: DemandSnapshot | None = None

    # ------------------------------------------------------------------ feed

    def feed(
        self,
        reading: RiskReading,
        views: Sequence[NodeView],
        nodes: Sequence[Node],
        now_s: float,
    ) -> None:
        acc = self._acc
        if acc.started_s is None:
            acc.started_s = now_s
        self._add_requests(reading, nodes)
        self._add_cpu(reading.snapshot, views, nodes, now_s)
        self._add_memory(reading.snapshot, nodes, now_s)
        self._capacity.update({v.node_id: float(v.capacity.vcores) for v in views})
        if now_s - acc.started_s >= self.round_s:
            self._close_round(now_s)

    def _add_requests(self, reading: RiskReading, nodes: Sequence[Node]) -> None:
        acc = self._acc
        for tally in reading.tallies:
            acc.since_us = (
                tally.since_us if acc.since_us is None else min(acc.since_us, tally.since_us)
            )
            acc.until_us = (
                tally.until_us if acc.until_us is None else max(acc.until_us, tally.until_us)
            )
            app = self._service_app.get(tally.service)
            if app is None:
                continue
            acc.requests[app] = acc.requests.get(app, 0) + tally.requests
            acc.within[app] = acc.within.get(app, 0) + tally.within_target
            for host in tally.hosts:
                node_id = node_of(host, nodes, self.node_hosts)
                if node_id is not None:
                    self._seen_on.setdefault(app, set()).add(node_id)

    def _add_cpu(
        self,
        risk: RiskSnapshot | None,
        views: Sequence[NodeView],
        nodes: Sequence[Node],
        now_s: float,
    ) -> None:
        usage = self.usage.read(nodes, risk, now_s)
        last, self._last_now_s = self._last_now_s, now_s
        if usage is None or last is None or now_s <= last:
            return
        elapsed = now_s - last
        acc = self._acc
        acc.cpu_s += elapsed
        by_id = {node.id: node for node in nodes}
        for view in views:
            if not view.running or view.node_id not in by_id:
                continue
            node = by_id[view.node_id]
            batch_vcores = (  # the NodeManager measures its containers in vcores
                node.utilization.containers_cpu
                if node.utilization is not None
                else float(view.used.vcores)
            )
            acc.capacity[view.node_id] = acc.capacity.get(view.node_id, 0.0) + (
                view.capacity.vcores * elapsed
            )
            acc.batch[view.node_id] = acc.batch.get(view.node_id, 0.0) + (
                max(0.0, batch_vcores) * elapsed
            )
        for app, by_node in usage.items():
            mine = acc.used.setdefault(app, {})
            for node_id, cores in by_node.items():
                mine[node_id] = mine.get(node_id, 0.0) + cores * self.vcores_per_core * elapsed

    def _add_memory(self, risk: RiskSnapshot | None, nodes: Sequence[Node], now_s: float) -> None:
        held = self.memory.read_memory(nodes, risk, now_s) if self.memory is not None else None
        for app, by_node in (held or {}).items():
            peaks = self._acc.held_mb.setdefault(app, {})
            for node_id, mb in by_node.items():
                peaks[node_id] = max(peaks.get(node_id, 0.0), mb)

    def _close_round(self, now_s: float) -> None:
        acc = self._acc
        self._acc = _Accumulated(started_s=now_s)
        if acc.since_us is None or acc.until_us is None or acc.until_us <= acc.since_us:
            return  # no traces: no load, no feedback
        seconds = (acc.until_us - acc.since_us) / 1e6
        cpu = [
            NodeCpu(
                node_id,
                acc.capacity[node_id] / acc.cpu_s,
                acc.batch.get(node_id, 0.0) / acc.cpu_s,
                {app: by_node.get(node_id, 0.0) / acc.cpu_s for app, by_node in acc.used.items()},
            )
            for node_id in sorted(acc.capacity)
        ] if acc.cpu_s > 0 else []  # fmt: skip
        rounds = []
        for spec in self.learner.specs:
            used = {
                node: vcore_s / acc.cpu_s
                for node, vcore_s in acc.used.get(spec.name, {}).items()
            } if acc.cpu_s > 0 else {}  # fmt: skip
            feedback = LraRound(
                spec.name,
                seconds,
                acc.requests.get(spec.name, 0),
                acc.within.get(spec.name, 0),
                had_vcores(spec.name, cpu),
                used,
                dict(acc.held_mb.get(spec.name, {})),
            )
            self.learner.observe(feedback)
            rounds.append(feedback)
        self.last_rounds = tuple(rounds)
        self.rounds += 1
        self.snapshot = self.learner.snapshot(int(now_s * 1000))
        self.memory_snapshot = self.learner.memory_snapshot(int(now_s * 1000))

    # ------------------------------------------------------------------ demands

    def demands(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> tuple[NodeDemand, ...]:
        observed = (
            {d.node_id: d for d in self.fallback.demands(nodes, risk, now_s)}
            if self.fallback is not None
            else {}
        )
        parts = self._parts()
        capacity = {node.id: float(node.total.vcores) for node in nodes} | self._capacity
        found = (
            node_demand(node_id, parts.get(node_id, ()), observed.get(node_id),
                        capacity.get(node_id, 0.0), self.reserve_settings, self._splits)
            for node_id in sorted(set(parts) | set(observed))
        )  # fmt: skip
        return tuple(d for d in found if d is not None)

    def _parts(self) -> dict[str, list[Part]]:
        """Per node, each application's part there (its share of its demand)."""
        parts: dict[str, list[Part]] = {}
        for spec in self.learner.specs:
            seen_on = sorted(self._seen_on.get(spec.name, ()))
            cpu_shares = self.learner.shares(spec.name, seen_on)
            memory_shares = self.learner.memory_shares(spec.name, seen_on)
            whole = self._part(spec)
            for node_id in sorted(set(cpu_shares) | set(memory_shares)):
                part = _on_node(
                    whole, cpu_shares.get(node_id, 0.0), memory_shares.get(node_id, 0.0)
                )
                parts.setdefault(node_id, []).append(part)
        return parts

    def _part(self, spec: LraSpec) -> Part:
        """The application's whole demand, as a part (before the split over nodes)."""
        cpu, memory = self._cpu_of(spec.name), self._memory_of(spec.name)
        return Part(
            spec.name,
            cpu,
            memory,
            self._cpu_short(spec, cpu),
            self._memory_short(spec.name, memory),
            self._model(spec),
            spec.goal,
            self.learner.rounds(spec.name),
        )

    def _cpu_of(self, name: str) -> Demand | None:
        return self.snapshot.of(name) if self.snapshot is not None else None

    def _memory_of(self, name: str) -> Demand | None:
        return self.memory_snapshot.of(name) if self.memory_snapshot is not None else None

    def _cpu_short(self, spec: LraSpec, demand: Demand | None) -> str | None:
        """Why ``spec``'s learned CPU demand is not trusted yet (None: it is)."""
        if demand is None:
            if spec.target_ms is None and spec.stated is None:
                return "no latency target, nothing to learn"
            return "no load seen yet"
        if demand.source is not DemandSource.LEARNED:
            return None  # stated by the operator, or a profiled warm start
        rounds = self.learner.rounds(spec.name)
        if rounds >= self.min_rounds:
            return None
        return f"learner has {rounds} of {self.min_rounds} rounds"

    def _memory_short(self, name: str, demand: Demand | None) -> str | None:
        samples = self.learner.memory_samples(name)
        if demand is not None and samples >= self.min_rounds:
            return None
        return f"memory learner has {samples} of {self.min_rounds} rounds"

    def _model(self, spec: LraSpec) -> PerformanceModel | None:
        learned = self.learner.learner(spec.name)
        if learned is not None:
            return learned
        return StatedDemand(spec.stated, spec.goal) if spec.stated is not None else None

    def applications(self) -> tuple[LearnedApplication, ...]:
        """Per application: its learned CPU and memory demand (bounds included), the
        rounds behind them, and whether the guard uses them or observed usage."""
        return tuple(self._learned(spec) for spec in self.learner.specs)

    def _learned(self, spec: LraSpec) -> LearnedApplication:
        cpu, memory = self._cpu_of(spec.name), self._memory_of(spec.name)
        return LearnedApplication(
            spec.name,
            self.learner.rounds(spec.name),
            self.learner.memory_samples(spec.name),
            self.min_rounds,
            cpu,
            memory,
            self._cpu_short(spec, cpu),
            self._memory_short(spec.name, memory),
        )


def _on_node(whole: Part, cpu_share: float, memory_share: float) -> Part:
    """``whole``'s part on a node where it has these shares of its CPU and memory."""
    return replace(
        whole,
        cpu=_scaled(whole.cpu, cpu_share) if cpu_share else None,
        memory=_scaled(whole.memory, memory_share) if memory_share else None,
        cpu_short=whole.cpu_short if cpu_share else None,
        memory_short=whole.memory_short if memory_share else None,
    )


def _scaled(demand: Demand | None, share: float) -> Demand | None:
    """``demand`` times ``share`` (its part on one node)."""
    if demand is None:
        return None
    return Demand(demand.application, demand.load * share, demand.estimate * share,
                  demand.lower * share, demand.upper * share, demand.source,
                  demand.observations)  # fmt: skip


# --------------------------------------------------------------------------- warm start

WARM_START_COLUMNS = ("alloc_per_unit_load", "performance")
WARM_START_BANDS = ("performance_lcb", "performance_ucb")


def load_warm_start(path: Path) -> ProfiledCurve:
    """A latency-critical application's profiled curve (``[colocation] warm_start``):
    CSV with a header naming ``alloc_per_unit_load`` (vcores per request/s) and
    ``performance`` (the fraction of requests within target), optionally
    ``performance_lcb`` and ``performance_ucb`` (its band; without them each point
    counts as an observation with a standard error of 0.05); one row per point, x
    increasing, performance never falling, within [0, 1]. A broken file is a
    TraceError naming the file and line."""
    source = str(path)
    text = read_all_text(path, MalformedRows(source, lenient=False))
    return parse_warm_start(text, source)


def parse_warm_start(text: str, source: str) -> ProfiledCurve:
    rows = csv.reader(io.StringIO(text))
    header = [cell.strip() for cell in next(rows, [])]
    missing = [name for name in WARM_START_COLUMNS if name not in header]
    if missing:
        raise TraceError(source, 1, f"missing column(s) {', '.join(missing)}")
    banded = all(name in header for name in WARM_START_BANDS)
    names = WARM_START_COLUMNS + (WARM_START_BANDS if banded else ())
    index = [header.index(name) for name in names]
    points: list[tuple[float, ...]] = []
    for line, cells in enumerate(rows, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) <= max(index):
            raise TraceError(source, line, f"{len(cells)} fields, expected {len(header)}")
        numbers = tuple(
            _warm_number(cells[i], name, source, line) for i, name in zip(index, names, strict=True)
        )
        x, value = numbers[0], numbers[1]
        lower, upper = (numbers[2], numbers[3]) if banded else (value - 0.1, value + 0.1)
        if not (x >= 0 and 0 <= value <= 1 and lower <= value <= upper):
            raise TraceError(
                source, line, "need alloc_per_unit_load >= 0, performance in [0, 1] and "
                "performance_lcb <= performance <= performance_ucb",
            )  # fmt: skip
        if points and (x <= points[-1][0] or value < points[-1][1]):
            raise TraceError(
                source, line, "alloc_per_unit_load must increase and performance never fall"
            )
        points.append((x, value, max(0.0, lower), min(1.0, upper)))
    if len(points) < 2:
        raise TraceError(source, 0, "a warm-start curve needs two or more rows")
    xs, values, lows, highs = (np.array(column) for column in zip(*points, strict=True))
    try:
        return ProfiledCurve.of(
            xs, values, np.maximum.accumulate(lows), np.maximum.accumulate(highs)
        )
    except ValueError as exc:
        raise TraceError(source, 0, str(exc)) from None


def _warm_number(cell: str, name: str, source: str, line: int) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise TraceError(source, line, f"{name} is not a number: {cell.strip()!r}") from None
    if not math.isfinite(value):
        raise TraceError(source, line, f"{name} is {cell.strip()} (must be a finite number)")
    return value
