"""The backend interface every cgroup implementation offers (v1, v2, the simulator's).

A backend names cgroups by their path below the hierarchy root (``Cgroup.relpath``,
e.g. ``hadoop-yarn/container_..._000002``) and files by their interface name
(``key``, e.g. ``cpu.cfs_quota_us``); it knows which controller directory holds
which file. It also translates the agent's decision (a limit as an
:class:`~preemption.model.Amount`) into interface-file values with
:meth:`CgroupBackend.desired_values`, a pure function of the limit, the task's
baseline, the original values and the current usage, so the v1 and v2 rules live
beside the files they govern and the simulator runs the same translation.

Rules every backend keeps:

* a limit back at the baseline writes the *original* values (nothing invented stays);
* CPU: quota = limit × period, never below 1 ms per period (the kernel's minimum);
  the weight (``cpu.shares`` / ``cpu.weight``) shrinks in proportion to the quota;
* memory: v1's soft limit (``memory.soft_limit_in_bytes``) follows the limit; a
  limit that throttles or kills (v1 ``memory.limit_in_bytes``, v2 ``memory.high``)
  is never set below current usage plus headroom, nor above its original; v2's
  ``memory.max`` is never written;
* a cgroup path is relative and stays below the root: an absolute one, or one with a
  ``..``, ``.`` or empty component, is refused (:func:`below_root`) before any file
  is touched.

The isolation loop's caps (suppress quota, batch weight, memory cap) tighten these
values afterwards, in one place: :func:`preemption.cgroups.caps.capped`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from preemption.errors import CgroupError
from preemption.model import Amount

MIB = 1 << 20
MIN_QUOTA_US = 1000  # the kernel refuses a CFS quota below 1 ms


@dataclass(frozen=True)
class Cgroup:
    """A cgroup, by its path below the hierarchy root (no leading slash)."""

    relpath: str

    @property
    def name(self) -> str:
        return self.relpath.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Usage:
    """Cumulative CPU time, memory in use now, and OOM kills so far."""

    cpu_usage_ns: int
    memory_bytes: int
    oom_kills: int = 0


@dataclass(frozen=True)
class Originals:
    """What a cgroup allowed before the agent changed it, in the agent's units
    (None: no limit of that kind was set)."""

    cpu_millicores: int | None
    memory_mb: int | None


@dataclass(frozen=True, kw_only=True)
class MemoryPolicy:
    """How far memory limits may go. ``hard_limit`` enables v1's
    ``memory.limit_in_bytes``; it and v2's ``memory.high`` never go below usage +
    ``hard_headroom_mb``."""

    hard_limit: bool = True
    hard_headroom_mb: int = 128


class CgroupBackend(Protocol):
    """What the agent (and the simulator) need from a cgroup implementation."""

    version: str
    limit_keys: tuple[str, ...]  # the files the agent may change (and must restore)
    read_keys: tuple[str, ...]  # limit_keys and the files their translation reads

    def describe(self) -> dict[str, str]:
        """How to reach this backend again (written to the state file)."""
        ...

    def exists(self, group: Cgroup) -> bool: ...

    def read(self, group: Cgroup, key: str) -> str: ...

    def write(self, group: Cgroup, key: str, value: str) -> None: ...

    def usage(self, group: Cgroup) -> Usage: ...

    def pids(self, group: Cgroup) -> tuple[int, ...]: ...

    def children(self, group: Cgroup) -> tuple[Cgroup, ...]: ...

    def create(self, group: Cgroup) -> None: ...

    def remove(self, group: Cgroup) -> None: ...

    def membership(self, pid: int) -> dict[str, str]:
        """The pid's cgroup per controller (``{controller: relpath}``), to move it back."""
        ...

    def move(self, pid: int, group: Cgroup) -> None: ...

    def move_back(self, pid: int, membership: Mapping[str, str]) -> None: ...

    def originals(self, values: Mapping[str, str]) -> Originals: ...

    def desired_values(
        self,
        limit: Amount,
        baseline: Amount,
        originals: Mapping[str, str],
        usage: Usage,
    ) -> dict[str, str]: ...


@runtime_checkable
class OwnerAware(Protocol):
    """A backend that can say who owns a cgroup (the host's v1 and v2 backends)."""

    def owner_uid(self, group: Cgroup) -> int: ...


# ----------------------------------------------------------------- paths


def relpath_problem(relpath: str, *, root_allowed: bool = False) -> str | None:
    """Why ``relpath`` is not a cgroup path below the root, or None if it is one."""
    if relpath == "":
        return None if root_allowed else "empty (the hierarchy's root)"
    if relpath.startswith("/"):
        return "an absolute path (it would replace the cgroup root)"
    if "\0" in relpath:
        return "a NUL byte"
    if any(part in ("", ".", "..") for part in relpath.split("/")):
        return "a '..', '.' or empty component (it could reach outside the cgroup root)"
    return None


def below_root(root: Path, relpath: str) -> Path:
    """``root / relpath``, or ``CgroupError`` if that is not inside ``root`` (checked
    lexically and, where the path exists, with its symbolic links resolved)."""
    problem = relpath_problem(relpath, root_allowed=True)
    if problem:
        raise CgroupError(f"{root}/{relpath}", f"refused cgroup path {relpath!r}: {problem}")
    path = root / relpath
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        raise CgroupError(str(path), f"refused cgroup path {relpath!r}: resolves outside {root}")
    return path


# ----------------------------------------------------------------- shared rules


def quota_us(millicores: int, period_us: int) -> int:
    return max(MIN_QUOTA_US, millicores * period_us // 1000)


def scaled_weight(original: int, limit: int, baseline: int, lowest: int) -> int:
    """A CPU weight shrunk with the quota, never below the kernel's minimum."""
    if baseline <= 0:
        return original
    return max(lowest, round(original * min(limit, baseline) / baseline))


def hard_limit_bytes(
    limit_mb: int, usage_bytes: int, original_bytes: int | None, policy: MemoryPolicy
) -> int:
    """A throttling or killing memory limit that never cuts below usage + headroom,
    nor rises above the original (None: there was none)."""
    floor = usage_bytes + policy.hard_headroom_mb * MIB
    wanted = max(limit_mb * MIB, floor)
    return wanted if original_bytes is None else min(original_bytes, wanted)


def page_aligned(value: int, page: int = 4096) -> int:
    return max(page, value // page * page)
