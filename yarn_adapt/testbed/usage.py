"""The testbed's demand bound: what the latency-critical processes on each node use.

Both NodeManagers of the testbed share one host, so the RM's per-node utilization
(which the service's :class:`~yarn_adapt.colocation.demand.ObservedUsageDemand`
reads) sees the whole host on each of them. The testbed knows its services' pids
per node and reads their CPU time from ``/proc``: the same "observed usage plus
headroom" bound, measured where the testbed's two machines really are separate.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tracing.model import RiskSnapshot
from yarn_adapt.colocation.model import NodeDemand
from yarn_adapt.model import Node

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (its threads included), or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


class ProcessUsageDemand:
    """Per node: the CPU its latency-critical processes used since the last round
    (cores x ``vcores_per_core``), the max over ``window`` rounds, x (1 + headroom)."""

    def __init__(
        self,
        pids: Callable[[], Mapping[str, Sequence[int]]],
        *,
        vcores_per_core: float,
        headroom: float = 0.5,
        window: int = 5,
        clock: Callable[[], float],
    ) -> None:
        self.pids = pids
        self.vcores_per_core = vcores_per_core
        self.headroom = headroom
        self.clock = clock
        self._last: dict[str, tuple[float, float]] = {}
        self._recent: dict[str, deque[float]] = {}
        self._window = window

    def demands(
        self, nodes: Sequence[Node], risk: RiskSnapshot | None, now_s: float
    ) -> tuple[NodeDemand, ...]:
        found = []
        for node_id, pids in self.pids().items():
            cores = self._cores(node_id, pids)
            if cores is None:
                continue
            recent = self._recent.setdefault(node_id, deque(maxlen=self._window))
            recent.append(cores * self.vcores_per_core)
            peak = max(recent)
            found.append(
                NodeDemand(
                    node_id,
                    peak * (1 + self.headroom),
                    0.0,
                    f"testbed services' CPU + {self.headroom:.0%}",
                    peak,
                )
            )
        return tuple(found)

    def _cores(self, node_id: str, pids: Sequence[int]) -> float | None:
        used = [cpu_seconds(pid) for pid in pids]
        total = sum(u for u in used if u is not None)
        now = self.clock()
        last = self._last.get(node_id)
        self._last[node_id] = (now, total)
        if last is None or now <= last[0]:
            return None
        return max(0.0, (total - last[1]) / (now - last[0]))
