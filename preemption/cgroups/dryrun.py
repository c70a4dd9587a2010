"""Dry run: a backend that reads the real cgroups and only pretends to write.

Every write, cgroup creation and process move is logged ("would write ...") and kept
in an overlay, so the agent's decisions proceed exactly as if they had been applied
(later reads see the would-be values) while nothing on the node changes. A cgroup
the agent would have created exists only in the overlay; its usage is read from
``/proc`` (CPU time and resident memory of its processes). This is the read-only
actuator of the agent's ``dry_run`` mode, not ``if dry_run`` scattered in the code.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from preemption.cgroups.base import Cgroup, CgroupBackend, Originals, OwnerAware, Usage
from preemption.errors import CgroupUnsupported
from preemption.model import Amount
from preemption.procfs import ProcFs

log = logging.getLogger(__name__)

_FRESH = {
    "v1": {
        "cpu.cfs_quota_us": "-1",
        "cpu.cfs_period_us": "100000",
        "cpu.shares": "1024",
        "memory.soft_limit_in_bytes": "9223372036854771712",
        "memory.limit_in_bytes": "9223372036854771712",
    },
    "v2": {"cpu.max": "max 100000", "cpu.weight": "100", "memory.high": "max", "memory.max": "max"},
}


class DryRunBackend:
    def __init__(self, real: CgroupBackend, procfs: ProcFs | None = None) -> None:
        self.real = real
        self.procfs = procfs or ProcFs()
        self.version: str = real.version
        self.limit_keys: tuple[str, ...] = real.limit_keys
        self.read_keys: tuple[str, ...] = real.read_keys
        self.overlay: dict[tuple[str, str], str] = {}
        self.virtual: dict[str, list[int]] = {}
        self.would: list[str] = []

    def describe(self) -> dict[str, str]:
        return {**self.real.describe(), "dry_run": "true"}

    def _note(self, text: str) -> None:
        self.would.append(text)
        log.info("dry run: would %s", text)

    def exists(self, group: Cgroup) -> bool:
        return group.relpath in self.virtual or self.real.exists(group)

    def owner_uid(self, group: Cgroup) -> int:
        if isinstance(self.real, OwnerAware):
            return self.real.owner_uid(group)
        raise CgroupUnsupported(group.relpath, "this backend cannot tell who owns a cgroup")

    def read(self, group: Cgroup, key: str) -> str:
        if (group.relpath, key) in self.overlay:
            return self.overlay[(group.relpath, key)]
        if group.relpath in self.virtual:
            return _FRESH.get(self.version, {}).get(key, "0")
        return self.real.read(group, key)

    def write(self, group: Cgroup, key: str, value: str) -> None:
        self._note(f"write {value!r} to {group.relpath}/{key}")
        self.overlay[(group.relpath, key)] = value

    def usage(self, group: Cgroup) -> Usage:
        if group.relpath not in self.virtual:
            return self.real.usage(group)
        infos = [self.procfs.process(pid) for pid in self.virtual[group.relpath]]
        alive = [info for info in infos if info is not None]
        return Usage(
            cpu_usage_ns=sum(self.procfs.cpu_time_ns(info) for info in alive),
            memory_bytes=sum(self.procfs.rss_bytes(info.pid) for info in alive),
        )

    def pids(self, group: Cgroup) -> tuple[int, ...]:
        if group.relpath in self.virtual:
            return tuple(self.virtual[group.relpath])
        return self.real.pids(group)

    def children(self, group: Cgroup) -> tuple[Cgroup, ...]:
        return self.real.children(group)

    def create(self, group: Cgroup) -> None:
        self._note(f"create cgroup {group.relpath}")
        self.virtual.setdefault(group.relpath, [])

    def remove(self, group: Cgroup) -> None:
        self._note(f"remove cgroup {group.relpath}")
        self.virtual.pop(group.relpath, None)

    def membership(self, pid: int) -> dict[str, str]:
        for relpath, pids in self.virtual.items():
            if pid in pids:
                return dict.fromkeys(self.real.membership(pid), relpath)
        return self.real.membership(pid)

    def move(self, pid: int, group: Cgroup) -> None:
        self._note(f"move pid {pid} to {group.relpath}")
        members = self.virtual.setdefault(group.relpath, [])
        if pid not in members:
            members.append(pid)

    def move_back(self, pid: int, membership: Mapping[str, str]) -> None:
        self._note(f"move pid {pid} back to {dict(membership)}")

    def originals(self, values: Mapping[str, str]) -> Originals:
        return self.real.originals(values)

    def desired_values(
        self, limit: Amount, baseline: Amount, originals: Mapping[str, str], usage: Usage
    ) -> dict[str, str]:
        return self.real.desired_values(limit, baseline, originals, usage)
