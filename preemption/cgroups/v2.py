"""cgroup v2: one unified hierarchy (``/sys/fs/cgroup`` on current distributions).

Files the agent changes (and restores), after Koordinator's v1 → v2 mapping:

================  ===========================================================
``cpu.max``       ``"<quota> <period>"``; the original (``"max 100000"``) on release
``cpu.weight``    shrunk with the quota (1..10000; YARN gives 100 per vcore)
``memory.high``   the memory limit: above it the kernel throttles and reclaims
                  hard, so, as v1's hard limit, never below current usage +
                  headroom (``memory_hard_headroom_mb``) nor above its original
================  ===========================================================

``memory.max`` is read (a fallback original) and never written: the agent never
sets a hard limit on v2, so it can never set one below usage. Usage comes from
``cpu.stat`` (``usage_usec``), ``memory.current`` and the ``oom_kill`` count of
``memory.events``. A cgroup whose parent does not delegate ``cpu`` and ``memory``
(``cgroup.subtree_control``) lacks these files: that is
:class:`~preemption.errors.CgroupUnsupported`, not a vanished container.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from preemption.cgroups.base import (
    MIB,
    Cgroup,
    MemoryPolicy,
    Originals,
    Usage,
    below_root,
    hard_limit_bytes,
    page_aligned,
    quota_us,
    scaled_weight,
)
from preemption.cgroups.files import CgroupFiles
from preemption.cgroups.procfile import UNIFIED, cgroup_membership
from preemption.errors import CgroupUnsupported, CgroupVanished
from preemption.model import Amount

DEFAULT_ROOT = Path("/sys/fs/cgroup")


class V2Backend:
    """A v2 hierarchy rooted at ``root``."""

    version = "v2"
    limit_keys: tuple[str, ...] = ("cpu.max", "cpu.weight", "memory.high")
    read_keys: tuple[str, ...] = (*limit_keys, "memory.max")

    def __init__(
        self,
        root: Path = DEFAULT_ROOT,
        *,
        files: CgroupFiles | None = None,
        memory: MemoryPolicy | None = None,
        proc: Path = Path("/proc"),
    ) -> None:
        self.root = root
        self.files = files or CgroupFiles()
        self.memory = memory or MemoryPolicy()
        self.proc = proc

    def describe(self) -> dict[str, str]:
        return {"version": self.version, "root": str(self.root)}

    def directory(self, group: Cgroup) -> Path:
        return below_root(self.root, group.relpath)

    # ----------------------------------------------------------------- files

    def exists(self, group: Cgroup) -> bool:
        return self.files.exists(self.directory(group))

    def owner_uid(self, group: Cgroup) -> int:
        return self.files.owner_uid(self.directory(group))

    def read(self, group: Cgroup, key: str) -> str:
        path = self.directory(group) / key
        try:
            return self.files.read(path)
        except CgroupVanished:
            self._unsupported_if_group_exists(path)
            raise

    def write(self, group: Cgroup, key: str, value: str) -> None:
        path = self.directory(group) / key
        try:
            self.files.write(path, value)
        except CgroupVanished:
            self._unsupported_if_group_exists(path)
            raise

    def _unsupported_if_group_exists(self, path: Path) -> None:
        if self.files.exists(path.parent):
            raise CgroupUnsupported(
                str(path),
                "no such file: is the controller enabled in the parent's subtree_control?",
            )

    def usage(self, group: Cgroup) -> Usage:
        return Usage(
            cpu_usage_ns=_stat_value(self.read(group, "cpu.stat"), "usage_usec") * 1000,
            memory_bytes=int(self.read(group, "memory.current")),
            oom_kills=_stat_value(self.read(group, "memory.events"), "oom_kill"),
        )

    def pids(self, group: Cgroup) -> tuple[int, ...]:
        return tuple(int(line) for line in self.read(group, "cgroup.procs").split())

    def children(self, group: Cgroup) -> tuple[Cgroup, ...]:
        parent = self.directory(group)
        if not self.files.exists(parent):
            return ()
        return tuple(
            Cgroup(f"{group.relpath}/{child.name}".strip("/"))
            for child in self.files.list_dirs(parent)
        )

    # ----------------------------------------------------------------- ownership

    def create(self, group: Cgroup) -> None:
        parent = self.directory(group).parent
        self.files.make_dir(self.directory(group))
        control = parent / "cgroup.subtree_control"
        if parent != self.root and self.files.exists(control):
            self.files.write(control, "+cpu +memory")

    def remove(self, group: Cgroup) -> None:
        self.files.remove_dir(self.directory(group))

    def membership(self, pid: int) -> dict[str, str]:
        return cgroup_membership(self.proc, pid, (UNIFIED,))

    def move(self, pid: int, group: Cgroup) -> None:
        self.files.write(self.directory(group) / "cgroup.procs", str(pid))

    def move_back(self, pid: int, membership: Mapping[str, str]) -> None:
        origin = Cgroup(membership.get(UNIFIED, ""))
        self.files.write(self.directory(origin) / "cgroup.procs", str(pid))

    # ----------------------------------------------------------------- translation

    def originals(self, values: Mapping[str, str]) -> Originals:
        quota, _, period = values.get("cpu.max", "max 100000").partition(" ")
        cpu = int(quota) * 1000 // int(period or "100000") if quota != "max" else None
        memory = None
        for key in ("memory.high", "memory.max"):
            value = values.get(key, "max")
            if value != "max":
                memory = int(value) // MIB if memory is None else min(memory, int(value) // MIB)
        return Originals(cpu, memory)

    def desired_values(
        self,
        limit: Amount,
        baseline: Amount,
        originals: Mapping[str, str],
        usage: Usage,
    ) -> dict[str, str]:
        values: dict[str, str] = {}
        if limit.cpu_millicores >= baseline.cpu_millicores:
            values["cpu.max"] = originals["cpu.max"]
            values["cpu.weight"] = originals["cpu.weight"]
        else:
            period = int(originals["cpu.max"].partition(" ")[2] or "100000")
            values["cpu.max"] = f"{quota_us(limit.cpu_millicores, period)} {period}"
            weight = scaled_weight(
                int(originals["cpu.weight"]), limit.cpu_millicores, baseline.cpu_millicores, 1
            )
            values["cpu.weight"] = str(weight)
        values["memory.high"] = v2_memory_high(limit, baseline, originals, usage, self.memory)
        return values


def v2_memory_high(
    limit: Amount,
    baseline: Amount,
    originals: Mapping[str, str],
    usage: Usage,
    policy: MemoryPolicy,
) -> str:
    """``memory.high`` for ``limit``: the original at the baseline, else the limit
    raised to usage + headroom and capped by the original (v1's hard-limit rule)."""
    original = originals["memory.high"]
    if limit.memory_mb >= baseline.memory_mb:
        return original
    ceiling = None if original == "max" else int(original)
    high = page_aligned(hard_limit_bytes(limit.memory_mb, usage.memory_bytes, ceiling, policy))
    return original if ceiling is not None and high >= ceiling else str(high)


def _stat_value(text: str, name: str) -> int:
    """A ``name value`` line of a flat-keyed file (cpu.stat, memory.events); 0 if absent."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    return 0
