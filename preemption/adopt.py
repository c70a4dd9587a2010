"""Giving a container the agent can squeeze a cgroup of its own, when YARN did not.

With the DefaultContainerExecutor every container's processes sit in the
NodeManager's cgroup, where no per-container limit can be set. The agent creates
``<agent_hierarchy>/<container_id>`` (in each v1 controller, or once in v2) and moves
the container's processes there, recording the cgroup and each process's origin in
the state file first. New children inherit the cgroup; a process that escaped the
move (forked between reading and writing) is moved on the next interval. When the
container ends, its empty cgroup is removed and forgotten; on restore the processes
still alive go back to where they came from.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from preemption.cgroups.base import Cgroup, CgroupBackend
from preemption.errors import CgroupVanished
from preemption.statefile import RestoreReport, StateJournal, dissolve, origin_outside

log = logging.getLogger(__name__)


class Adopter:
    def __init__(self, backend: CgroupBackend, journal: StateJournal, hierarchy: str) -> None:
        self.backend = backend
        self.journal = journal
        self.hierarchy = hierarchy.strip("/")

    def group_for(self, container_id: str) -> Cgroup:
        return Cgroup(f"{self.hierarchy}/{container_id}")

    def adopt(self, container_id: str, pids: Iterable[int]) -> Cgroup:
        """The container's own cgroup, created and filled as needed (CgroupError if not)."""
        group = self.group_for(container_id)
        if not self.backend.exists(group):
            self.journal.remember_created(group)
            self.backend.create(group)
        for pid in pids:
            try:
                membership = self.backend.membership(pid)
            except CgroupVanished:
                continue  # exited meanwhile
            if membership and all(path == group.relpath for path in membership.values()):
                continue
            origin = origin_outside(membership, group, self.journal.origin_of(group) or {})
            if origin is None:
                continue  # nothing says yet where it belongs outside the agent's groups
            self.journal.remember_moved(pid, group, origin)
            try:
                self.backend.move(pid, group)
            except CgroupVanished:
                self.journal.forget_pid(pid)
        return group

    def release_finished(self, active: set[str]) -> list[str]:
        """Remove the agent's cgroups of containers that ended; returns problems."""
        problems: list[str] = []
        for relpath in list(self.journal.content.created):
            group = Cgroup(relpath)
            if group.name in active or not relpath.startswith(self.hierarchy + "/"):
                continue
            report = RestoreReport()
            dissolve(self.journal, self.backend, group, report)
            self.journal.save()
            problems.extend(report.failures)
        return problems

    def owned(self) -> list[Cgroup]:
        return [Cgroup(relpath) for relpath in self.journal.content.created]
