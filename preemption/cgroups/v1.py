"""cgroup v1: ``cpu``, ``cpuacct`` and ``memory`` hierarchies, each mounted on its own
(``/sys/fs/cgroup/cpu``) or together (``/sys/fs/cgroup/cpu,cpuacct``).

Files the agent changes (and restores):

=============================  ==============================================
``cpu.cfs_quota_us``           limit × ``cpu.cfs_period_us`` / 1000 (``-1`` unlimited)
``cpu.shares``                 shrunk with the quota (YARN gives 1024 per vcore)
``memory.soft_limit_in_bytes`` the memory limit (reclaimed first under pressure)
``memory.limit_in_bytes``      only with the hard limit enabled, and never below
                               current usage + headroom (no OOM kill by the agent)
=============================  ==============================================

Usage comes from ``cpuacct.usage`` (ns), ``memory.usage_in_bytes`` and the
``oom_kill`` count of ``memory.oom_control``.
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
    quota_us,
    scaled_weight,
)
from preemption.cgroups.files import CgroupFiles
from preemption.cgroups.procfile import cgroup_membership
from preemption.errors import CgroupUnsupported, CgroupVanished
from preemption.model import Amount

CONTROLLERS = ("cpu", "cpuacct", "memory")
# The kernel reports "no limit" as PAGE_COUNTER_MAX pages; anything this large is none.
UNLIMITED_BYTES = 1 << 62
DEFAULT_ROOT = Path("/sys/fs/cgroup")


def v1_mounts(mounts_text: str) -> dict[str, Path]:
    """Controller -> mount point, from the text of ``/proc/mounts``."""
    found: dict[str, Path] = {}
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] != "cgroup":
            continue
        for option in fields[3].split(","):
            if option in CONTROLLERS:
                found.setdefault(option, Path(fields[1]))
    return found


class V1Backend:
    """The v1 hierarchies of this host."""

    version = "v1"
    limit_keys: tuple[str, ...] = (
        "cpu.cfs_quota_us",
        "cpu.shares",
        "memory.soft_limit_in_bytes",
        "memory.limit_in_bytes",
    )
    read_keys: tuple[str, ...] = (*limit_keys, "cpu.cfs_period_us")

    def __init__(
        self,
        mounts: Mapping[str, Path],
        *,
        files: CgroupFiles | None = None,
        memory: MemoryPolicy | None = None,
        proc: Path = Path("/proc"),
    ) -> None:
        missing = [c for c in CONTROLLERS if c not in mounts]
        if missing:
            raise CgroupUnsupported(
                "/proc/mounts", f"cgroup v1 controllers not mounted: {', '.join(missing)}"
            )
        self.mounts = dict(mounts)
        self.files = files or CgroupFiles()
        self.memory = memory or MemoryPolicy()
        self.proc = proc

    @classmethod
    def from_host(
        cls,
        *,
        files: CgroupFiles | None = None,
        memory: MemoryPolicy | None = None,
        mounts_file: Path = Path("/proc/mounts"),
    ) -> V1Backend:
        return cls(v1_mounts(mounts_file.read_text()), files=files, memory=memory)

    def describe(self) -> dict[str, str]:
        return {"version": self.version, **{c: str(p) for c, p in self.mounts.items()}}

    # ----------------------------------------------------------------- paths

    def directory(self, group: Cgroup, controller: str) -> Path:
        return below_root(self.mounts[controller], group.relpath)

    def _file(self, group: Cgroup, key: str) -> Path:
        controller = "cpu" if key.startswith("cgroup.") else key.split(".", 1)[0]
        if controller not in self.mounts:
            raise CgroupUnsupported(key, f"no v1 controller for {key}")
        return self.directory(group, controller) / key

    # ----------------------------------------------------------------- files

    def exists(self, group: Cgroup) -> bool:
        return self.files.exists(self.directory(group, "cpu"))

    def owner_uid(self, group: Cgroup) -> int:
        return self.files.owner_uid(self.directory(group, "cpu"))

    def read(self, group: Cgroup, key: str) -> str:
        path = self._file(group, key)
        try:
            return self.files.read(path)
        except CgroupVanished:
            self._unsupported_if_group_exists(path)
            raise

    def write(self, group: Cgroup, key: str, value: str) -> None:
        path = self._file(group, key)
        try:
            self.files.write(path, value)
        except CgroupVanished:
            self._unsupported_if_group_exists(path)
            raise

    def _unsupported_if_group_exists(self, path: Path) -> None:
        if self.files.exists(path.parent):
            raise CgroupUnsupported(str(path), "this kernel has no such cgroup file")

    def usage(self, group: Cgroup) -> Usage:
        return Usage(
            cpu_usage_ns=int(self.read(group, "cpuacct.usage")),
            memory_bytes=int(self.read(group, "memory.usage_in_bytes")),
            oom_kills=_oom_kills(self.read(group, "memory.oom_control")),
        )

    def pids(self, group: Cgroup) -> tuple[int, ...]:
        """The processes in the group in any controller (a process forked while its
        parent was being moved can sit in the group in some controllers only)."""
        found = dict.fromkeys(int(line) for line in self.read(group, "cgroup.procs").split())
        for controller in CONTROLLERS:
            procs = self.directory(group, controller) / "cgroup.procs"
            if controller != "cpu" and self.files.exists(procs):
                found.update(dict.fromkeys(int(line) for line in self.files.read(procs).split()))
        return tuple(found)

    def children(self, group: Cgroup) -> tuple[Cgroup, ...]:
        parent = self.directory(group, "cpu")
        if not self.files.exists(parent):
            return ()
        return tuple(
            Cgroup(f"{group.relpath}/{child.name}".strip("/"))
            for child in self.files.list_dirs(parent)
        )

    # ----------------------------------------------------------------- ownership

    def create(self, group: Cgroup) -> None:
        for controller in CONTROLLERS:
            self.files.make_dir(self.directory(group, controller))

    def remove(self, group: Cgroup) -> None:
        for controller in CONTROLLERS:
            self.files.remove_dir(self.directory(group, controller))

    def membership(self, pid: int) -> dict[str, str]:
        return cgroup_membership(self.proc, pid, CONTROLLERS)

    def move(self, pid: int, group: Cgroup) -> None:
        for controller in CONTROLLERS:
            self.files.write(self.directory(group, controller) / "cgroup.procs", str(pid))

    def move_back(self, pid: int, membership: Mapping[str, str]) -> None:
        for controller in CONTROLLERS:
            origin = Cgroup(membership.get(controller, ""))
            self.files.write(self.directory(origin, controller) / "cgroup.procs", str(pid))

    # ----------------------------------------------------------------- translation

    def originals(self, values: Mapping[str, str]) -> Originals:
        return v1_originals(values)

    def desired_values(
        self,
        limit: Amount,
        baseline: Amount,
        originals: Mapping[str, str],
        usage: Usage,
    ) -> dict[str, str]:
        return v1_desired_values(limit, baseline, originals, usage, self.memory)


def v1_originals(values: Mapping[str, str]) -> Originals:
    """What v1 files allowed before the agent, in millicores and MiB."""
    quota = int(values.get("cpu.cfs_quota_us", "-1"))
    period = int(values.get("cpu.cfs_period_us", "100000"))
    cpu = quota * 1000 // period if quota > 0 else None
    memory = None
    for key in ("memory.soft_limit_in_bytes", "memory.limit_in_bytes"):
        if key not in values:
            continue
        limit = int(values[key])
        if limit < UNLIMITED_BYTES:
            memory = limit // MIB if memory is None else min(memory, limit // MIB)
    return Originals(cpu, memory)


def v1_desired_values(
    limit: Amount,
    baseline: Amount,
    originals: Mapping[str, str],
    usage: Usage,
    memory: MemoryPolicy,
) -> dict[str, str]:
    """The v1 file values for ``limit`` (pure; the simulator's backend uses it too).
    Memory files are only produced when ``originals`` has them."""
    values: dict[str, str] = {}
    if limit.cpu_millicores >= baseline.cpu_millicores:
        values["cpu.cfs_quota_us"] = originals["cpu.cfs_quota_us"]
        values["cpu.shares"] = originals["cpu.shares"]
    else:
        period = int(originals.get("cpu.cfs_period_us", "100000"))
        values["cpu.cfs_quota_us"] = str(quota_us(limit.cpu_millicores, period))
        shares = scaled_weight(
            int(originals["cpu.shares"]), limit.cpu_millicores, baseline.cpu_millicores, 2
        )
        values["cpu.shares"] = str(shares)
    if "memory.soft_limit_in_bytes" in originals:
        values.update(_memory_values(limit, baseline, originals, usage, memory))
    return values


def _memory_values(
    limit: Amount,
    baseline: Amount,
    originals: Mapping[str, str],
    usage: Usage,
    memory: MemoryPolicy,
) -> dict[str, str]:
    if limit.memory_mb >= baseline.memory_mb:
        return {
            "memory.soft_limit_in_bytes": originals["memory.soft_limit_in_bytes"],
            "memory.limit_in_bytes": originals["memory.limit_in_bytes"],
        }
    original_hard = int(originals["memory.limit_in_bytes"])
    hard = original_hard
    if memory.hard_limit:
        hard = hard_limit_bytes(limit.memory_mb, usage.memory_bytes, original_hard, memory)
    return {
        "memory.soft_limit_in_bytes": str(limit.memory_mb * MIB),
        "memory.limit_in_bytes": originals["memory.limit_in_bytes"]
        if hard >= original_hard
        else str(hard),
    }


def _oom_kills(oom_control: str) -> int:
    for line in oom_control.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill":
            return int(value)
    return 0  # kernels before 4.13 do not count
