"""Each pinned NodeManager sees its own machine in ``/proc``.

A NodeManager reports the node's utilization (the RM's ``resourceUtilization``: the
node's CPU and memory, beside what its containers use) from ``/proc/stat``,
``/proc/meminfo`` and ``/proc/cpuinfo`` (Hadoop's ``SysInfoLinux``). Two NodeManagers
on one host would each report the whole host, so the guard's observed and learned
demand (what runs on a node outside its containers) would be the host's.

With a spec's ``nm_cpusets`` each NodeManager therefore runs in a mount namespace of
its own (``unshare``), where those three files are bind-mounted from
``<cluster root>/machines/nm-<i>/``, and :class:`MachineViews` (a thread of the
cluster) rewrites them every ``interval_s``, as LXCFS does for a container:

- ``stat``: the ``cpu`` lines of the real ``/proc/stat`` for the node's CPUs only
  (their sum as the aggregate line, then one ``cpuN`` line each);
- ``cpuinfo``: one ``processor`` entry per CPU of the node;
- ``meminfo``: ``MemTotal`` the NodeManager's memory plus :data:`OS_RESERVE_MB` (the
  host's own share of a machine), ``MemFree`` that minus the resident memory of every
  process in the node's cpuset: the NodeManager, its containers and whatever else
  was placed there (the testbed's services).

Every process the NodeManager starts (its containers) inherits the view. Each file
keeps one length (fixed-width numbers written in place with one ``pwrite``): the bind
mount holds the inode, and a reader never sees a file cut short.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from yarn_adapt.minicluster import cpusets

log = logging.getLogger(__name__)

PROC_FILES = ("stat", "meminfo", "cpuinfo")
OS_RESERVE_MB = 2048
CPU_FIELDS = 10  # user nice system idle iowait irq softirq steal guest guest_nice
WIDTH = 14
BIND_SCRIPT = (
    'mount --bind "$1" /proc/stat && mount --bind "$2" /proc/meminfo && '
    'mount --bind "$3" /proc/cpuinfo || exit 125; shift 4; exec "$@"'
)
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def cpu_list(text: str) -> list[int]:
    """The CPUs of a cpuset list such as ``0-1,3``."""
    cpus: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def per_cpu_times(proc_stat: str) -> dict[int, tuple[int, ...]]:
    """``/proc/stat``'s ``cpuN`` lines: CPU number -> its :data:`CPU_FIELDS` counters."""
    times: dict[int, tuple[int, ...]] = {}
    for line in proc_stat.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            values = [int(f) for f in fields[:CPU_FIELDS]]
            times[int(name[3:])] = tuple(values + [0] * (CPU_FIELDS - len(values)))
    return times


def stat_text(cpus: Sequence[int], times: dict[int, tuple[int, ...]]) -> str:
    """The node's ``/proc/stat``: the aggregate ``cpu`` line, then its CPUs' lines."""
    zero = (0,) * CPU_FIELDS
    rows = [times.get(cpu, zero) for cpu in cpus]
    total = tuple(sum(column) for column in zip(*rows, strict=True)) if rows else zero
    lines = [_cpu_line("cpu ", total)]
    lines += [_cpu_line(f"cpu{index}", row) for index, row in enumerate(rows)]
    return "".join(lines)


def _cpu_line(name: str, values: Sequence[int]) -> str:
    return name + "".join(f" {value:0{WIDTH}d}" for value in values) + "\n"


def meminfo_text(total_mb: int, used_kb: int) -> str:
    total_kb = total_mb * 1024
    free_kb = max(0, total_kb - used_kb)
    rows = [("MemTotal", total_kb), ("MemFree", free_kb), ("MemAvailable", free_kb),
            ("Buffers", 0), ("Cached", 0), ("Inactive", 0), ("Inactive(file)", 0),
            ("SwapTotal", 0), ("SwapFree", 0)]  # fmt: skip
    return "".join(f"{name + ':':<16}{value:>{WIDTH}d} kB\n" for name, value in rows)


def cpuinfo_text(cpus: Sequence[int]) -> str:
    return "".join(f"processor\t: {index}\ncore id\t\t: {index}\n\n" for index in range(len(cpus)))


def resident_kb(pids: Sequence[int]) -> int:
    """The resident memory of these processes (those gone meanwhile count nothing)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/statm").read_text().split()
        except OSError:
            continue
        total += int(fields[1]) * PAGE_KB
    return total


@dataclass(frozen=True)
class Machine:
    """One NodeManager's view: its directory, CPUs, memory and cpuset."""

    directory: Path
    cpus: tuple[int, ...]
    memory_mb: int
    cpuset: Path

    @property
    def total_mb(self) -> int:
        return self.memory_mb + OS_RESERVE_MB

    def path(self, name: str) -> Path:
        return self.directory / name

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` in a mount namespace of its own that sees this machine's files."""
        files = [str(self.path(name)) for name in PROC_FILES]
        return ["unshare", "--mount", "--propagation", "private",
                "/bin/sh", "-c", BIND_SCRIPT, "sh", *files, "--", *command]  # fmt: skip

    def write(self, times: dict[int, tuple[int, ...]]) -> None:
        used_kb = resident_kb(cpusets.tasks(self.cpuset))
        _overwrite(self.path("stat"), stat_text(self.cpus, times))
        _overwrite(self.path("meminfo"), meminfo_text(self.total_mb, used_kb))

    def create(self, times: dict[int, tuple[int, ...]]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path("cpuinfo").write_text(cpuinfo_text(self.cpus))
        self.path("stat").write_text(stat_text(self.cpus, times))
        self.path("meminfo").write_text(meminfo_text(self.total_mb, 0))


def _overwrite(path: Path, text: str) -> None:
    """Write ``text`` over ``path`` in place (same inode, one write; the length never
    changes, so nothing is truncated)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, text.encode(), 0)
    finally:
        os.close(fd)


class MachineViews:
    """The machines of a cluster's pinned NodeManagers, kept current by a thread."""

    def __init__(self, machines: Sequence[Machine], interval_s: float = 1.0) -> None:
        self.machines = tuple(machines)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed = False
        times = per_cpu_times(Path("/proc/stat").read_text())
        for machine in self.machines:
            machine.create(times)

    def start(self) -> MachineViews:
        self._thread = threading.Thread(target=self._run, name="machine-views", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def refresh(self) -> None:
        times = per_cpu_times(Path("/proc/stat").read_text())
        for machine in self.machines:
            machine.write(times)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.refresh()
                self._failed = False
            except OSError as exc:  # the cluster is going away, or a file went missing
                if not self._failed:
                    log.warning("machine views: cannot refresh: %s", exc)
                self._failed = True
