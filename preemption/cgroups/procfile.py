"""``/proc/<pid>/cgroup``: which cgroup a process is in, per controller."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from preemption.cgroups.files import CgroupFiles

UNIFIED = ""  # the cgroup v2 line "0::/path" has no controller list


def parse_membership(text: str, controllers: Iterable[str]) -> dict[str, str]:
    """``{controller: relpath}`` for the wanted controllers (``""`` = the v2 line)."""
    wanted = set(controllers)
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, listed, path = parts
        names = listed.split(",") if listed else [UNIFIED]
        for name in names:
            if name in wanted:
                found[name] = path.strip("/")
    return found


def cgroup_membership(proc: Path, pid: int, controllers: Iterable[str]) -> dict[str, str]:
    """Where ``pid`` is now; ``CgroupVanished`` when the process is gone."""
    return parse_membership(CgroupFiles().read(proc / str(pid) / "cgroup"), controllers)
