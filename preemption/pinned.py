"""Moving a process between cgroups by pid without ever moving another one.

A pid names a process only while that process lives: between the agent's ``/proc``
scan and its ``cgroup.procs`` write the process can exit and the kernel can give
its pid to an unrelated one, which the write would then move. So every move is
checked around the write:

1. **before**: a pidfd (``os.pidfd_open``) pins the process the pid names now, and
   its start time and parent (``/proc/<pid>/stat``) must be the ones the scan saw: a
   pid reused since the scan is not moved at all (start times are clock ticks, 10 ms:
   the newcomer would have to start in the same tick its predecessor did and take its
   parent too);
2. **the write** (the caller's);
3. **after**: the pinned process must still be alive
   (``signal.pidfd_send_signal(fd, 0)``): alive after the write means the pid named
   it during the write. If it died meanwhile the pid may have gone to a newcomer
   that the write moved; a newcomer found in the destination is moved back to where
   its parent is (a new process starts in its parent's cgroup).

Without pidfds (kernels before 5.3) the start time read again after the write
stands in for step 3.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from preemption.cgroups.base import CgroupBackend
from preemption.errors import CgroupError, CgroupVanished
from preemption.procfs import ProcessInfo, ProcFs

log = logging.getLogger(__name__)


class Moved(StrEnum):
    MOVED = "moved"  # the intended process, and only it, was moved
    GONE = "gone"  # it exited (or its pid was reused) before the write: nothing moved
    UNDONE = "undone"  # it exited around the write; a newcomer moved by it was moved back
    STRAY = "stray"  # as UNDONE, but the newcomer could not be moved back


@dataclass(frozen=True)
class Expected:
    """The process a move is meant for: its pid, start (clock ticks after boot) and
    parent as a scan saw them."""

    pid: int
    start_ticks: int
    ppid: int

    @classmethod
    def of(cls, info: ProcessInfo) -> Expected:
        return cls(info.pid, info.start_ticks, info.ppid)


class _Pin:
    """A pidfd on a process, or (without pidfds) its start time to compare."""

    def __init__(self, expected: Expected, procfs: ProcFs, fd: int | None) -> None:
        self.expected = expected
        self.procfs = procfs
        self.fd = fd

    def alive(self) -> bool:
        if self.fd is not None:
            try:
                signal.pidfd_send_signal(self.fd, 0)
            except ProcessLookupError:
                return False
            return True
        return _same(self.procfs, self.expected)


def _same(procfs: ProcFs, expected: Expected) -> bool:
    info = procfs.process(expected.pid)
    return info is not None and Expected.of(info) == expected


@contextmanager
def pinned(expected: Expected, procfs: ProcFs) -> Iterator[_Pin | None]:
    """The process pinned, or None if the pid no longer names it."""
    fd = _pidfd(expected.pid)
    try:
        # Opened first, compared second: if the start time matches now, the pidfd
        # holds the process that had it (a pid is not reused while its process lives).
        if fd == -1 or not _same(procfs, expected):
            yield None
        else:
            yield _Pin(expected, procfs, fd)
    finally:
        if fd is not None and fd >= 0:
            os.close(fd)


def _pidfd(pid: int) -> int | None:
    """A pidfd; -1 when no process has the pid; None when this kernel has no pidfds."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return -1
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EPERM):
            return None
        raise


def start_of(procfs: ProcFs, pid: int) -> Expected | None:
    """The process the pid names now (for moves of pids read from ``cgroup.procs``)."""
    info = procfs.process(pid)
    return Expected.of(info) if info is not None else None


def checked_move(
    backend: CgroupBackend,
    procfs: ProcFs,
    expected: Expected,
    destination: Mapping[str, str],
    write: Callable[[], None],
) -> Moved:
    """Run ``write`` (a move of ``expected.pid`` to ``destination``, ``{controller:
    relpath}``) only for the expected process, and undo it for any other.
    ``CgroupError`` of the write propagates."""
    with pinned(expected, procfs) as pin:
        if pin is None:
            return Moved.GONE
        try:
            write()
        except CgroupVanished:
            if pin.alive():
                raise
            return Moved.GONE  # it exited before the write: nothing was there to move
        if pin.alive():
            return Moved.MOVED
    return _undo_newcomer(backend, procfs, expected, destination)


def _undo_newcomer(
    backend: CgroupBackend, procfs: ProcFs, expected: Expected, destination: Mapping[str, str]
) -> Moved:
    newcomer = procfs.process(expected.pid)
    if newcomer is None or Expected.of(newcomer) == expected:
        return Moved.GONE
    try:
        where = backend.membership(newcomer.pid)
        home = backend.membership(newcomer.ppid)
    except CgroupVanished:
        return Moved.GONE
    moved_by_us = any(
        where.get(controller) == path != home.get(controller)
        for controller, path in destination.items()
    )
    if not moved_by_us:
        return Moved.GONE  # it is where its parent is, or somewhere we did not send it
    log.warning(
        "pid %d was reused by another process during a move: moving it back to %s",
        expected.pid, home,
    )  # fmt: skip
    try:
        backend.move_back(newcomer.pid, home)
    except CgroupVanished:
        return Moved.UNDONE  # the newcomer exited too
    except CgroupError as error:
        log.warning("pid %d could not be moved back: %s", newcomer.pid, error.one_line())
        return Moved.STRAY
    return Moved.UNDONE
