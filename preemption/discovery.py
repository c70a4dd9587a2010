"""Finding the YARN containers running on this node, and their processes.

Two sources, as the NodeManager runs containers:

* ``cgroup``: the LinuxContainerExecutor with cgroups gives every container its own
  cgroup named by its id below ``yarn.nodemanager.linux-container-executor.cgroups.
  hierarchy`` (``/hadoop-yarn`` by default): v1 ``<mount>/cpu/hadoop-yarn/<id>``,
  v2 ``<root>/hadoop-yarn/<id>``. The agent writes those cgroups directly.
* ``process-tree``: the DefaultContainerExecutor (or LCE without cgroups) leaves
  containers in the NodeManager's own cgroup. The agent walks the NodeManager's
  descendants; a process belongs to the container named by ``CONTAINER_ID`` in its
  environment (set by the container's launch script) or by a container id in its
  command line (``.../container_.../default_container_executor.sh``), or else to
  the container of its nearest ancestor. Such containers have no cgroup of their
  own: the agent creates one per container below its own hierarchy and moves the
  processes there (:mod:`preemption.adopt`).

``auto`` uses the cgroup source when the YARN hierarchy holds container cgroups,
the process tree otherwise. Both report the NodeManager's web address when a
container's environment names it (``NM_HOST``/``NM_HTTP_PORT``), so the agent can
ask the NM for each container's allocation without configuration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from preemption.cgroups.base import Cgroup, CgroupBackend
from preemption.errors import CgroupError
from preemption.model import is_container_id
from preemption.procfs import ProcessInfo, ProcFs

NODEMANAGER_CLASS = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"
_IN_TEXT = re.compile(r"(container_(?:e\d+_)?\d+_\d+_\d+_\d+)")


@dataclass(frozen=True)
class FoundContainer:
    """A container seen on this node: its processes and, with LCE, its cgroup."""

    container_id: str
    pids: tuple[int, ...]
    started_at_s: float
    running: bool
    cgroup: Cgroup | None = None
    nodemanager_url: str | None = None


# ----------------------------------------------------------------- LCE cgroups


def containers_in_hierarchy(
    backend: CgroupBackend, hierarchy: str, procfs: ProcFs
) -> list[FoundContainer]:
    """Containers that have a cgroup below ``hierarchy`` (LinuxContainerExecutor)."""
    found = []
    for group in backend.children(Cgroup(hierarchy.strip("/"))):
        if not is_container_id(group.name):
            continue
        try:
            pids = backend.pids(group)
        except CgroupError:
            continue  # removed while listing: the container ended
        table = {pid: info for pid in pids if (info := procfs.process(pid)) is not None}
        if not table:
            continue
        found.append(_found(group.name, table, procfs, group))
    return found


# ----------------------------------------------------------------- process tree


def nodemanager_pids(table: Mapping[int, ProcessInfo], procfs: ProcFs, match: str) -> set[int]:
    """Java processes whose command line names the NodeManager class (or ``match``)."""
    return {pid for pid in table if match in " ".join(procfs.cmdline(pid))}


def containers_in_tree(
    roots: Iterable[int], procfs: ProcFs, table: Mapping[int, ProcessInfo] | None = None
) -> list[FoundContainer]:
    """Containers among the descendants of ``roots`` (the NodeManager pids)."""
    table = dict(table) if table is not None else procfs.processes()
    owner: dict[int, str] = {}
    nm_url: dict[str, str] = {}
    members: dict[str, dict[int, ProcessInfo]] = {}
    for pid in _breadth_first(set(roots), table, procfs):
        info = table[pid]
        container_id, url = _container_of(pid, procfs)
        container_id = container_id or owner.get(info.ppid)
        if container_id is None:
            continue
        owner[pid] = container_id
        members.setdefault(container_id, {})[pid] = info
        if url and container_id not in nm_url:
            nm_url[container_id] = url
    return [
        _found(cid, procs, procfs, None, nm_url.get(cid)) for cid, procs in sorted(members.items())
    ]


def _breadth_first(roots: set[int], table: Mapping[int, ProcessInfo], procfs: ProcFs) -> list[int]:
    """Descendants ordered so that a parent comes before its children."""
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    order: list[int] = []
    frontier = sorted(roots)
    while frontier:
        next_frontier: list[int] = []
        for pid in frontier:
            for child in sorted(children.get(pid, ())):
                order.append(child)
                next_frontier.append(child)
        frontier = next_frontier
    return order


def _container_of(pid: int, procfs: ProcFs) -> tuple[str | None, str | None]:
    environ = procfs.environ(pid)
    url = None
    if environ.get("NM_HOST") and environ.get("NM_HTTP_PORT"):
        url = f"http://{environ['NM_HOST']}:{environ['NM_HTTP_PORT']}"
    container_id = environ.get("CONTAINER_ID")
    if container_id and is_container_id(container_id):
        return container_id, url
    for argument in procfs.cmdline(pid):
        found = _IN_TEXT.search(argument)
        if found:
            return found.group(1), url
    return None, url


def _leaves(infos: list[ProcessInfo]) -> list[ProcessInfo]:
    """The container's processes with no child in it: the ones doing the work (the
    launch scripts above them only wait)."""
    parents = {info.ppid for info in infos}
    return [info for info in infos if info.pid not in parents]


def _found(
    container_id: str,
    table: Mapping[int, ProcessInfo],
    procfs: ProcFs,
    group: Cgroup | None,
    nodemanager_url: str | None = None,
) -> FoundContainer:
    infos = sorted(table.values(), key=lambda info: info.pid)
    return FoundContainer(
        container_id=container_id,
        pids=tuple(info.pid for info in infos),
        started_at_s=min(procfs.started_at_s(info) for info in infos),
        running=any(info.running for info in _leaves(infos)),
        cgroup=group,
        nodemanager_url=nodemanager_url,
    )
