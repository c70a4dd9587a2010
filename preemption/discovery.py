"""Finding the processes of the containers the NodeManager runs on this node.

Which containers exist is the NodeManager's word alone (:mod:`preemption.nodemanager`:
the verified NM process and the containers it lists as running); this module finds
where they are, from one of two sources, as the NodeManager runs containers:

* ``cgroup``: the LinuxContainerExecutor with cgroups gives every container its own
  cgroup named by its id below ``yarn.nodemanager.linux-container-executor.cgroups.
  hierarchy`` (``/hadoop-yarn`` by default): v1 ``<mount>/cpu/hadoop-yarn/<id>``,
  v2 ``<root>/hadoop-yarn/<id>``. A cgroup counts only when root or the NodeManager's
  user owns it (no one else can have made it) and the NM lists its id. The agent
  writes those cgroups directly.
* ``process-tree``: the DefaultContainerExecutor (or LCE without cgroups) leaves
  containers in the NodeManager's own cgroup. A process belongs to a container only
  through its ancestry below the verified NodeManager: each *launch process* (a
  direct child of the NM, started by the NM) names its container in its command line
  (``.../container_.../default_container_executor.sh``) or its working directory (the
  container's); every descendant belongs to that container. A process's own
  environment or command line never reassigns it: a tenant cannot claim another
  application's container. Such containers have no cgroup of their own: the agent
  creates one per container below its own hierarchy and moves the processes there
  (:mod:`preemption.adopt`).

``auto`` uses the cgroup source when the YARN hierarchy holds container cgroups,
the process tree otherwise. A container the NM does not list is never found.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from preemption.cgroups.base import Cgroup, CgroupBackend
from preemption.errors import CgroupError
from preemption.model import is_container_id
from preemption.procfs import ProcessInfo, ProcFs

# A container id inside a longer text (a script's path), bounded on both sides.
_IN_TEXT = re.compile(
    r"(?<![0-9A-Za-z_])(container_(?:e[0-9]+_)?[0-9]+_[0-9]+_[0-9]+_[0-9]+)(?![0-9A-Za-z_])"
)


@dataclass(frozen=True)
class FoundContainer:
    """A container the NM runs, its processes (as scanned) and, with LCE, its cgroup."""

    container_id: str
    processes: tuple[ProcessInfo, ...]
    started_at_s: float
    running: bool
    cgroup: Cgroup | None = None
    exiting: bool = False  # no process running, and none stopped: its work ended

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(info.pid for info in self.processes)


# ----------------------------------------------------------------- LCE cgroups


def containers_in_hierarchy(
    backend: CgroupBackend,
    hierarchy: str,
    procfs: ProcFs,
    listed: Collection[str],
    owned_by_trusted: Callable[[Cgroup], bool],
) -> list[FoundContainer]:
    """Listed containers that have a trusted cgroup below ``hierarchy`` (LCE)."""
    found = []
    for group in backend.children(Cgroup(hierarchy.strip("/"))):
        if group.name not in listed or not is_container_id(group.name):
            continue
        try:
            if not owned_by_trusted(group):
                continue
            pids = backend.pids(group)
        except CgroupError:
            continue  # removed while listing: the container ended
        table = {pid: info for pid in pids if (info := procfs.process(pid)) is not None}
        if table:
            found.append(_found(group.name, table, procfs, group))
    return found


# ----------------------------------------------------------------- process tree


def containers_in_tree(
    nodemanager: int,
    procfs: ProcFs,
    listed: Collection[str],
    table: Mapping[int, ProcessInfo] | None = None,
) -> list[FoundContainer]:
    """Listed containers among the descendants of the (verified) NodeManager pid."""
    table = dict(table) if table is not None else procfs.processes()
    children = _children(table)
    members: dict[str, dict[int, ProcessInfo]] = {}
    for launch in sorted(children.get(nodemanager, ())):
        container_id = launch_container_id(launch, procfs)
        if container_id is None or container_id not in listed:
            continue
        group = members.setdefault(container_id, {})
        for pid in [launch, *_descendants(launch, children)]:
            group[pid] = table[pid]
    return [_found(cid, procs, procfs, None) for cid, procs in sorted(members.items())]


def launch_container_id(pid: int, procfs: ProcFs) -> str | None:
    """The container a launch process (a child of the NM) names: one id in its command
    line, else its working directory's name. None when it names none, or several."""
    named: set[str] = set()
    for argument in procfs.cmdline(pid):
        named.update(match.group(1) for match in _IN_TEXT.finditer(argument))
    if len(named) == 1:
        return named.pop()
    if named:
        return None
    cwd = procfs.cwd(pid)
    name = PurePosixPath(cwd).name if cwd else ""
    return name if is_container_id(name) else None


def _children(table: Mapping[int, ProcessInfo]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    return children


def _descendants(root: int, children: Mapping[int, list[int]]) -> list[int]:
    """Every descendant of ``root``, parents before their children."""
    order: list[int] = []
    frontier = [root]
    while frontier:
        next_frontier: list[int] = []
        for pid in frontier:
            for child in sorted(children.get(pid, ())):
                order.append(child)
                next_frontier.append(child)
        frontier = next_frontier
    return order


def _leaves(infos: list[ProcessInfo]) -> list[ProcessInfo]:
    """The container's processes with no child in it: the ones doing the work (the
    launch scripts above them only wait)."""
    parents = {info.ppid for info in infos}
    return [info for info in infos if info.pid not in parents]


def _found(
    container_id: str, table: Mapping[int, ProcessInfo], procfs: ProcFs, group: Cgroup | None
) -> FoundContainer:
    infos = sorted(table.values(), key=lambda info: info.pid)
    leaves = _leaves(infos)
    return FoundContainer(
        container_id=container_id,
        processes=tuple(infos),
        started_at_s=min(procfs.started_at_s(info) for info in infos),
        running=any(info.running for info in leaves),
        cgroup=group,
        exiting=all(info.exiting for info in leaves),
    )
