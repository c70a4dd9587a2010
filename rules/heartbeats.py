"""NodeManager heartbeats in Algorithm 1 (kernel ``heartbeat_grants``), as YARN
times them: a node heartbeats every interval at its own phase; a finished
container's resources come back at its node's next heartbeat (which then schedules
on that node); a heartbeat grants containers on its own node, at most the
per-heartbeat limit; while demand waits and nodes have room, nodes are visited in
heartbeat order until a full round grants nothing.

:class:`HeartbeatTiming` is the part of :class:`rules.engine.Algorithm1` that keeps
the nodes and their phases and schedules the visits; the engine's event loop calls
it. Event kinds are shared with the engine here.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence

from rules.inputs import GroupResources
from rules.kernels import Timing, Totals
from rules.state import QueueState

END = 0
HEARTBEAT = 1
ARRIVE = 2
AM_READY = 3
NO_NODE = -1

Event = tuple[float, int, int, int, int, int, int, float, tuple[int, int]]


class HeartbeatTiming:
    """Nodes, phases and the visit chain. The engine provides the event heap, the
    queues, the clock and the per-heartbeat allocation."""

    totals: Totals
    timing: Timing
    both_dims: bool
    queues: list[QueueState]
    now: float
    _heap: list[Event]

    # provided by the engine and by Granting (methods, not declared callables: the
    # compiled comparator, rules.native, binds them at compile time)
    def _allocate_on(self, node: int) -> int:
        raise NotImplementedError

    def _push(
        self,
        time: float,
        kind: int,
        index: int,
        count: int = 0,
        node: int = NO_NODE,
        end: float = 0.0,
        shape: tuple[int, int] = (0, 0),
    ) -> None:
        raise NotImplementedError

    def _nodes(self, resources: GroupResources, phases: Sequence[float] | None) -> None:
        """Nodes in phase order (node ``n`` heartbeats at ``phase[n] + k x
        interval``). ``phases``: each node's, in the order of ``resources.nodes``
        (:func:`rules.uncertainty.heartbeat_phases` draws them as the simulator
        does); without them the phases are spread evenly."""
        self.heartbeats = not self.timing.continuous and bool(resources.nodes)
        nodes = resources.nodes if self.heartbeats else ()
        self.interval = resources.heartbeat_s
        if phases is not None and nodes:
            order = sorted(range(len(nodes)), key=lambda n: (phases[n], n))
            nodes = tuple(nodes[n] for n in order)
            self.phase = [float(phases[n]) for n in order]
        else:
            self.phase = [(n + 0.5) * self.interval / len(nodes) for n in range(len(nodes))]
        self.node_mem = [r.memory_mb for r in nodes]
        self.node_vc = [r.vcores if self.both_dims else 1 << 30 for r in nodes]
        self.largest = (
            max(self.node_mem, default=self.totals.memory),
            max(self.node_vc, default=self.totals.vcores if self.both_dims else 0),
        )
        self.reporting: set[int] = set()
        self._chain_node = NO_NODE
        self._chain_idle = 0

    def _more_reports(self) -> bool:
        heap = self._heap
        return bool(heap) and heap[0][0] == self.now and heap[0][3] == END

    def _report_heartbeats(self) -> None:
        """Nodes that just reported finished containers heartbeat: they schedule."""
        for node in sorted(self.reporting):
            self._heartbeat(node, chained=False)
        self.reporting.clear()

    def _next_heartbeat(self, node: int, after: float, strict: bool) -> float:
        phase, interval = self.phase[node], self.interval
        time = phase + math.ceil((after - phase) / interval) * interval
        if time < after or (strict and time <= after):
            time += interval
        return time

    def _open(self, node: int) -> bool:
        return self.node_mem[node] >= self.totals.unit_mem and self.node_vc[node] >= (
            self.totals.unit_vc if self.both_dims else 0
        )

    def _open_nodes(self) -> list[int]:
        return [n for n in range(len(self.node_mem)) if self._open(n)]

    def _on_heartbeat(self, node: int) -> None:
        chained = node == self._chain_node
        if chained:
            self._chain_node = NO_NODE
        self.reporting.discard(node)
        self._heartbeat(node, chained)

    def _heartbeat(self, node: int, chained: bool) -> None:
        if not any(q.has_demand for q in self.queues):
            return
        granted = self._allocate_on(node)
        if not any(q.has_demand for q in self.queues):
            return
        if chained:
            self._chain_idle = 0 if granted else self._chain_idle + 1
            if self._chain_idle <= len(self._open_nodes()):
                self._chain_after(node)
        elif self._chain_node == NO_NODE:
            self._chain_idle = 0
            self._chain_after(node)

    def _chain_after(self, node: int) -> None:
        """Continue the visit at the next node with room after ``node``."""
        open_nodes = self._open_nodes()
        if not open_nodes:
            return
        later = bisect_right(open_nodes, node)
        if later < len(open_nodes):
            target = open_nodes[later]
            self._chain_to(target, self._next_heartbeat(target, self.now, False))
        else:
            target = open_nodes[0]
            self._chain_to(target, self._next_heartbeat(target, self.now, True))

    def _chain_to(self, node: int, time: float) -> None:
        self._chain_node = node
        self._push(time, HEARTBEAT, node)

    def _kick(self) -> None:
        """New demand: make sure a visit of the nodes is on its way."""
        if self._chain_node != NO_NODE:
            self._chain_idle = 0
            return
        open_nodes = self._open_nodes()
        if not open_nodes or not any(q.has_demand for q in self.queues):
            return
        position = self.now % self.interval
        later = [n for n in open_nodes if self.phase[n] >= position]
        target = later[0] if later else open_nodes[0]
        self._chain_idle = 0
        self._chain_to(target, self._next_heartbeat(target, self.now, False))
