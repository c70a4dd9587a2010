"""Reading ``/proc``: process tree, states, start times, owners, command lines, working
directories.

The edge the process-tree discovery and the "process alive" check stand on. A process
that exits while it is being read is simply absent from the answer (every reader
returns ``None`` or skips it), never an error: processes come and go all the time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# R running, S sleeping, D disk wait, I idle: alive. T/t stopped, Z zombie, X dead: not.
RUNNING_STATES = frozenset("RSDIWP")
EXITING_STATES = frozenset("ZX")  # exited, not yet reaped by its parent


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    state: str
    start_ticks: int  # clock ticks after boot
    cpu_ticks: int  # utime + stime

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def exiting(self) -> bool:
        return self.state in EXITING_STATES


def parse_stat(text: str) -> ProcessInfo:
    """One ``/proc/<pid>/stat`` line (the command name may hold spaces and parens)."""
    pid_part, _, rest = text.partition(" (")
    fields = rest.rsplit(") ", 1)[1].split()
    # fields[0] is field 3 (state); utime, stime are 14, 15; starttime is 22.
    return ProcessInfo(
        pid=int(pid_part),
        ppid=int(fields[1]),
        state=fields[0],
        start_ticks=int(fields[19]),
        cpu_ticks=int(fields[11]) + int(fields[12]),
    )


class ProcFs:
    """``/proc`` of this host (or another directory laid out like it)."""

    def __init__(self, root: Path = PROC) -> None:
        self.root = root
        self.clock_ticks = os.sysconf("SC_CLK_TCK")
        self._boot_time_s: float | None = None

    def pids(self) -> list[int]:
        return sorted(int(entry.name) for entry in self.root.iterdir() if entry.name.isdigit())

    def process(self, pid: int) -> ProcessInfo | None:
        text = self._read(pid, "stat")
        return parse_stat(text) if text else None

    def processes(self) -> dict[int, ProcessInfo]:
        found = {}
        for pid in self.pids():
            info = self.process(pid)
            if info is not None:
                found[pid] = info
        return found

    def uids(self, pid: int) -> tuple[int, ...] | None:
        """Real, effective, saved and file-system uid (``Uid:`` of ``status``)."""
        for line in self._read(pid, "status").splitlines():
            if line.startswith("Uid:"):
                return tuple(int(field) for field in line.split()[1:])
        return None

    def cwd(self, pid: int) -> str | None:
        """The process's working directory (root may read any process's)."""
        try:
            return str((self.root / str(pid) / "cwd").readlink())
        except OSError:
            return None

    def cmdline(self, pid: int) -> list[str]:
        raw = self._read_bytes(pid, "cmdline")
        return [part.decode(errors="replace") for part in raw.split(b"\0") if part]

    def boot_time_s(self) -> float:
        if self._boot_time_s is None:
            for line in (self.root / "stat").read_text().splitlines():
                if line.startswith("btime "):
                    self._boot_time_s = float(line.split()[1])
                    break
            else:
                self._boot_time_s = 0.0
        return self._boot_time_s

    def started_at_s(self, info: ProcessInfo) -> float:
        """The process's start as seconds since the epoch."""
        return self.boot_time_s() + info.start_ticks / self.clock_ticks

    def rss_bytes(self, pid: int) -> int:
        fields = self._read(pid, "statm").split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE") if len(fields) > 1 else 0

    def cpu_time_ns(self, info: ProcessInfo) -> int:
        return info.cpu_ticks * 1_000_000_000 // self.clock_ticks

    def _read(self, pid: int, name: str) -> str:
        return self._read_bytes(pid, name).decode(errors="replace")

    def _read_bytes(self, pid: int, name: str) -> bytes:
        try:
            return (self.root / str(pid) / name).read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return b""
