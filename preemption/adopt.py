"""Giving a container the agent can squeeze a cgroup of its own, when YARN did not.

With the DefaultContainerExecutor every container's processes sit in the
NodeManager's cgroup, where no per-container limit can be set. The agent creates
``<agent_hierarchy>/<container_id>`` (in each v1 controller, or once in v2) and moves
the container's processes there, recording the cgroup and each process's origin in
the state file first. A cgroup of that name that already exists (left by a run whose
state file is gone, or made by hand) is recorded as *adopted*: restore moves the
processes back out of it but leaves it in place. New children inherit the cgroup;
a process that escaped the move (forked between reading and writing) is moved on the
next interval. When the container ends, its empty cgroup is removed and forgotten;
on restore the processes still alive go back to where they came from.

Only the processes the scan found are moved, each checked right around its write
(:mod:`preemption.pinned`): a pid that another process took since the scan is
never moved, and one taken during the write is moved back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from preemption.cgroups.base import Cgroup, CgroupBackend
from preemption.errors import CgroupVanished
from preemption.pinned import Expected, Moved, checked_move
from preemption.procfs import ProcessInfo, ProcFs
from preemption.statefile import RestoreReport, StateJournal, dissolve, origin_outside

log = logging.getLogger(__name__)


class Adopter:
    def __init__(
        self,
        backend: CgroupBackend,
        journal: StateJournal,
        hierarchy: str,
        procfs: ProcFs | None = None,
    ) -> None:
        self.backend = backend
        self.journal = journal
        self.hierarchy = hierarchy.strip("/")
        self.procfs = procfs or ProcFs()

    def group_for(self, container_id: str) -> Cgroup:
        return Cgroup(f"{self.hierarchy}/{container_id}")

    def adopt(self, container_id: str, processes: Iterable[ProcessInfo]) -> Cgroup:
        """The container's own cgroup, created and filled as needed (CgroupError if not).

        The group and every move are journalled in one save before any is made."""
        group = self.group_for(container_id)
        create = False
        with self.journal.one_save():
            if not self.journal.owns(group):
                create = not self.backend.exists(group)
                if create:
                    self.journal.remember_created(group)
                else:
                    self.journal.remember_adopted(group)
            moves = [m for m in (self._plan(Expected.of(p), group) for p in processes) if m]
        if create:
            self.backend.create(group)
        failed = [move for move in moves if not self._move_in(move, group)]
        with self.journal.one_save():
            for expected, _ in failed:
                self.journal.forget_pid(expected.pid)
        return group

    def _plan(self, expected: Expected, group: Cgroup) -> tuple[Expected, dict[str, str]] | None:
        """Journal the move of one process into ``group``; its destination, or None
        when it needs no move (or nothing says yet where it came from)."""
        pid = expected.pid
        try:
            # Read before the pin: if the pid names another process by now, the move
            # below refuses it and this reading is dropped with it.
            membership = self.backend.membership(pid)
        except CgroupVanished:
            return None  # exited meanwhile
        if membership and all(path == group.relpath for path in membership.values()):
            return None
        origin = origin_outside(membership, group, self.journal.origin_of(group) or {})
        if origin is None:
            return None  # nothing says yet where it belongs outside the agent's groups
        self.journal.remember_moved(pid, group, origin)
        return expected, dict.fromkeys(membership, group.relpath)

    def _move_in(self, move: tuple[Expected, dict[str, str]], group: Cgroup) -> bool:
        """Make one journalled move; whether the process is now in ``group``."""
        expected, destination = move
        pid = expected.pid
        try:
            outcome = checked_move(
                self.backend, self.procfs, expected, destination,
                lambda: self.backend.move(pid, group),
            )  # fmt: skip
        except CgroupVanished:
            outcome = Moved.GONE
        if outcome is Moved.STRAY:
            log.warning("%s: a process that took pid %d is left in it", group.relpath, pid)
        return outcome is Moved.MOVED

    def release_finished(self, active: set[str]) -> list[str]:
        """Dissolve the agent's cgroups of containers that ended; returns problems."""
        problems: list[str] = []
        for relpath in self.journal.content.owned:
            group = Cgroup(relpath)
            if group.name in active or not relpath.startswith(self.hierarchy + "/"):
                continue
            report = RestoreReport()
            dissolve(self.journal, self.backend, group, report, self.procfs)
            self.journal.save()
            problems.extend(report.failures)
        return problems

    def owned(self) -> list[Cgroup]:
        return [Cgroup(relpath) for relpath in self.journal.content.owned]
