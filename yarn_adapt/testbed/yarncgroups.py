"""YARN's CPU weights for the testbed's containers, placed by the testbed.

A NodeManager with the LinuxContainerExecutor and cgroups (CGroupsCpuResourceHandlerImpl)
puts every container into a ``cpu`` cgroup of its own below ``hadoop-yarn``, with
``cpu.shares`` = 1024 x its vcores; ``hadoop-yarn`` itself keeps the default weight
(1024) beside the node's other work. Batch as a whole then weighs what one ordinary
task weighs against the services, instead of one task per busy process.

The testbed's NodeManagers use the DefaultContainerExecutor (the LCE's setuid
``container-executor`` is not among the Maven Central jars), so :class:`YarnCpuWeights`
does the same from outside, as soon as it sees a container: in the testbed's ``cpu``
weight group it keeps ``hadoop-yarn/<container id>`` groups of 1024 x vcores and moves
each container's processes there (found below their NodeManager in the process tree,
as the node agent finds them), and into groups of the same path in ``cpuacct`` (below
the testbed's accounting group of that name, so its meter still counts them) and
``memory``, as an LCE node with cpu and cpuacct mounted together and memory
enforcement makes them. Only a process still directly in the weight group is moved:
one a node agent has taken into its own cgroups is left to it. Each NodeManager has a
hierarchy of its own (:func:`hierarchy_of`: ``hadoop-yarn-0``, ``hadoop-yarn-1``), as
each machine has its own ``hadoop-yarn``: the testbed's two "machines" share one
cgroup tree, and a node agent acts on its own node's hierarchy alone.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from preemption.discovery import containers_in_tree
from preemption.procfs import ProcFs
from yarn_adapt.minicluster import cpusets

log = logging.getLogger(__name__)

HIERARCHY = "hadoop-yarn"


def hierarchy_of(index: int) -> str:
    """NodeManager ``index``'s YARN hierarchy (below the weight group)."""
    return f"{HIERARCHY}-{index}"


SHARES_PER_VCORE = 1024  # CGroupsCpuResourceHandlerImpl's CPU_DEFAULT_WEIGHT


class _EveryContainer:
    """Every container a NodeManager's process tree names (the NodeManager's list is
    the agent's check; here the tree alone decides)."""

    def __contains__(self, item: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


class YarnCpuWeights:
    """Keeps every container of ``nodemanagers`` (pids) in its YARN cgroup, polling.

    ``mounts`` names the ``cpuacct`` and ``memory`` mounts (``cpu``'s is the weight
    group's); without them only ``cpu`` groups are made."""

    def __init__(
        self,
        weight_group: Path,
        nodemanagers: Sequence[int],
        vcores_of: Callable[[str], int] = lambda container_id: 1,
        interval_s: float = 0.1,
        mounts: Mapping[str, Path] | None = None,
    ) -> None:
        self.weight_group = weight_group
        self.names = [hierarchy_of(index) for index in range(len(nodemanagers))]
        # controller -> (where its hadoop-yarn goes, where a process goes back on close)
        self.others = {
            controller: (mounts[controller] / weight_group.name, mounts[controller])
            for controller in ("cpuacct", "memory")
            if mounts is not None and controller in mounts
            and mounts[controller] / weight_group.name != weight_group
        }  # fmt: skip
        self.nodemanagers = tuple(nodemanagers)
        self.vcores_of = vcores_of
        self.interval_s = interval_s
        self.placed: dict[str, int] = {}  # container id -> its cpu.shares
        self.moved = 0
        self._procfs = ProcFs()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for name in self.names:
            (weight_group / name).mkdir(exist_ok=True)
            for parent, _ in self.others.values():
                (parent / name).mkdir(parents=True, exist_ok=True)

    def start(self) -> YarnCpuWeights:
        self._thread = threading.Thread(target=self._run, name="yarn-cpu-weights", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        failed = False
        while not self._stop.wait(self.interval_s):
            try:
                self.step()
                failed = False
            except OSError as exc:
                if not failed:
                    log.warning("YARN cpu weights: %s", exc)
                failed = True

    def step(self) -> None:
        """Move every container process still in the weight group into its group."""
        table = self._procfs.processes()
        for name, nodemanager in zip(self.names, self.nodemanagers, strict=True):
            for found in containers_in_tree(nodemanager, self._procfs, _EveryContainer(), table):
                for pid in found.pids:
                    if cpusets.cpu_group_of(pid) == self.weight_group:
                        self._place(pid, found.container_id, name)

    def _place(self, pid: int, container_id: str, hierarchy: str) -> None:
        group = self.weight_group / hierarchy / container_id
        others = [parent / hierarchy / container_id for parent, _ in self.others.values()]
        if container_id not in self.placed:
            shares = SHARES_PER_VCORE * max(1, self.vcores_of(container_id))
            for each in (group, *others):
                each.mkdir(exist_ok=True)
            (group / "cpu.shares").write_text(str(shares))
            self.placed[container_id] = shares
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            for each in (*others, group):  # cpu last: it marks the process as placed
                cpusets.join(pid, each)
            self.moved += 1

    def close(self) -> None:
        """Stop; whatever still runs in a container group goes back to the weight
        group, and the groups are removed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        for name in self.names:
            _empty(self.weight_group / name, self.weight_group)
            for parent, back in self.others.values():
                _empty(parent / name, back)
        for parent, _ in self.others.values():
            with contextlib.suppress(OSError):
                parent.rmdir()  # memory's, unless an agent's groups are still there

    def to_json(self) -> dict[str, object]:
        return {
            "cgroup_weights": "testbed-placed",
            "containers_weighted": len(self.placed),
            "processes_moved": self.moved,
        }


def _empty(root: Path, back: Path) -> None:
    """Every process below ``root`` back to ``back``; ``root`` and its groups removed."""
    groups = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    for group in groups:
        for pid in cpusets.tasks(group):
            with contextlib.suppress(OSError):
                cpusets.join(pid, back)
        with contextlib.suppress(OSError):
            group.rmdir()
    with contextlib.suppress(OSError):
        root.rmdir()
