"""Reuses a pid for real, inside a new PID namespace, between the agent's scan and its
``cgroup.procs`` write, and reports what the agent moved (test_pid_reuse.py runs it
as ``unshare --pid --fork --mount-proc python -m tests.preemption.pid_reuse_helper
HIERARCHY STATE_DIR``; it is the namespace's init, so nothing else takes pids there
and ``ns_last_pid`` steers the next one without touching the host's).

Two cases, printed as one JSON object:

* ``before_write``: the scanned process exits and a newcomer takes its pid before the
  agent moves it (the window between two intervals' scan and adopt);
* ``during_write``: the same happens after the agent's checks, right before its
  write reaches the kernel (injected at ``CgroupFiles.raw_write``, the cgroupfs seam):
  the write moves the newcomer, and the agent must move it back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from preemption.adopt import Adopter
from preemption.cgroups import CgroupFiles, V1Backend
from preemption.cgroups.procfile import cgroup_membership
from preemption.procfs import ProcessInfo, ProcFs
from preemption.statefile import StateJournal

CONTROLLERS = ("cpu", "cpuacct", "memory")
NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
SLEEP = ["sleep", "600"]


def start_at(pid: int) -> subprocess.Popen[bytes]:
    """A process given ``pid`` (free: its last holder was reaped)."""
    NS_LAST_PID.write_text(str(pid - 1))
    process = subprocess.Popen(SLEEP)
    if process.pid != pid:
        raise SystemExit(f"wanted pid {pid}, got {process.pid}")
    return process


def scanned() -> tuple[subprocess.Popen[bytes], ProcessInfo]:
    """A container's process, and what the agent's scan saw of it."""
    process = subprocess.Popen(SLEEP)
    info = ProcFs().process(process.pid)
    assert info is not None
    return process, info


def replaced(process: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """The process exits (and is reaped); a newcomer takes its pid. (It lived 50 ms: a
    newcomer started in its very clock tick would look like it; see preemption.pinned.)"""
    time.sleep(0.05)
    process.kill()
    process.wait()
    return start_at(process.pid)


class ReusesBeforeTheWrite(CgroupFiles):
    """The scanned process is replaced right before the first ``cgroup.procs`` write."""

    def __init__(self) -> None:
        self.victim: subprocess.Popen[bytes] | None = None
        self.newcomer: subprocess.Popen[bytes] | None = None

    def raw_write(self, path: Path, value: str) -> None:
        if path.name == "cgroup.procs" and self.victim is not None and self.newcomer is None:
            self.newcomer = replaced(self.victim)
        super().raw_write(path, value)


def where(pid: int) -> dict[str, str]:
    return cgroup_membership(Path("/proc"), pid, CONTROLLERS)


def before_write(backend: V1Backend, journal: StateJournal, hierarchy: str) -> dict[str, object]:
    adopter = Adopter(backend, journal, hierarchy)
    process, info = scanned()
    newcomer = replaced(process)
    home = where(newcomer.pid)
    group = adopter.adopt("container_1700000000000_0042_01_000051", [info])
    result = {
        "pid": info.pid,
        "newcomer_pid": newcomer.pid,
        "newcomer_moved": where(newcomer.pid) != home,
        "group_pids": list(backend.pids(group)),
        "journalled": info.pid in journal.content.moved,
    }
    newcomer.kill()
    newcomer.wait()
    return result


def during_write(hierarchy: str, state: Path) -> dict[str, object]:
    files = ReusesBeforeTheWrite()
    backend = V1Backend(V1Backend.from_host().mounts, files=files)
    journal = StateJournal.open(state, backend.describe())
    adopter = Adopter(backend, journal, hierarchy)
    process, info = scanned()
    home = where(process.pid)
    files.victim = process
    group = adopter.adopt("container_1700000000000_0042_01_000052", [info])
    newcomer = files.newcomer
    assert newcomer is not None
    result = {
        "pid": info.pid,
        "newcomer_pid": newcomer.pid,
        "newcomer_home": home == where(newcomer.pid),
        "group_pids": list(backend.pids(group)),
        "journalled": info.pid in journal.content.moved,
    }
    newcomer.kill()
    newcomer.wait()
    return result


def main(hierarchy: str, state_dir: str) -> None:
    backend = V1Backend.from_host()
    journal = StateJournal.open(Path(state_dir) / "before.json", backend.describe())
    report = {
        "before_write": before_write(backend, journal, hierarchy),
        "during_write": during_write(hierarchy, Path(state_dir) / "during.json"),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
