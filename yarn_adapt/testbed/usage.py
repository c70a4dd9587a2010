"""The testbed's CPU measures (its guard's demand is the service's own: what each
node's NodeManager measures outside its containers, each NodeManager seeing its own
machine, :mod:`yarn_adapt.minicluster.machines`).

:func:`cpu_seconds` reads a process's CPU time from ``/proc``; :class:`NodeCpuMeter`
measures, per node and window, the share of its CPU batch work used and the share the
services used (for the simulator's calibration).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (its threads included), or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


# --------------------------------------------------------------------------- CPU shares


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU counters at ``at_s`` (epoch seconds), per node of the testbed:
    ``node_s`` all the work of the node's CPU in the testbed's accounting group
    (cpuacct ``usage_percpu``: NodeManager, services, containers and the agents'
    groups below it), ``lc_s`` its services' processes, ``nm_s`` the NodeManager's
    JVM itself (its own threads, not its children)."""

    at_s: float
    node_s: tuple[float, ...]
    lc_s: tuple[float, ...]
    nm_s: tuple[float, ...]


@dataclass(frozen=True)
class CpuShares:
    """Per node, the fraction of its one CPU used over a window by batch (its
    containers: everything of the node but the services and the NodeManager) and by
    the latency-critical services."""

    batch: tuple[float, ...]
    lc: tuple[float, ...]


def cpu_shares(first: CpuSample, last: CpuSample, cpus_per_node: float = 1.0) -> CpuShares | None:
    """The shares between two samples (None when they do not span any time). A
    process that ends between samples has its CPU time in the group's counter and
    in no per-process one, so batch (short containers) is counted whole; the
    long-lived services and NodeManager are read from /proc."""
    elapsed = last.at_s - first.at_s
    if elapsed <= 0:
        return None
    capacity = elapsed * cpus_per_node
    batch, lc = [], []
    for node in range(len(first.node_s)):
        node_s = last.node_s[node] - first.node_s[node]
        lc_s = max(0.0, last.lc_s[node] - first.lc_s[node])
        nm_s = max(0.0, last.nm_s[node] - first.nm_s[node])
        batch.append(min(1.0, max(0.0, (node_s - lc_s - nm_s) / capacity)))
        lc.append(min(1.0, lc_s / capacity))
    return CpuShares(tuple(batch), tuple(lc))


def usage_percpu_s(group: Path) -> tuple[float, ...]:
    """cpuacct ``usage_percpu`` of ``group``, in seconds per CPU."""
    return tuple(int(v) / 1e9 for v in (group / "cpuacct.usage_percpu").read_text().split())


class NodeCpuMeter:
    """Reads a :class:`CpuSample`: ``group`` the accounting cgroup, ``cpus[i]`` node
    i's CPU index, ``lc_pids`` / ``nm_pids`` per node id (in node order)."""

    def __init__(
        self,
        group: Path,
        cpus: Sequence[int],
        node_ids: Sequence[str],
        lc_pids: Callable[[], Mapping[str, Sequence[int]]],
        nm_pids: Mapping[str, Sequence[int]],
        clock: Callable[[], float],
    ) -> None:
        self.group = group
        self.cpus = tuple(cpus)
        self.node_ids = tuple(node_ids)
        self.lc_pids = lc_pids
        self.nm_pids = nm_pids
        self.clock = clock

    def sample(self) -> CpuSample:
        percpu = usage_percpu_s(self.group)
        lc = self.lc_pids()
        return CpuSample(
            self.clock(),
            tuple(percpu[cpu] for cpu in self.cpus),
            tuple(_sum_cpu(lc.get(node, ())) for node in self.node_ids),
            tuple(_sum_cpu(self.nm_pids.get(node, ())) for node in self.node_ids),
        )


def _sum_cpu(pids: Sequence[int]) -> float:
    return sum(u for u in map(cpu_seconds, pids) if u is not None)
