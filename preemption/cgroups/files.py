"""The one seam between the agent and the cgroup file system.

Every read, write, mkdir and rmdir of a cgroup goes through :class:`CgroupFiles`,
which maps ``OSError`` into the agent's error tree in one place
(:func:`_mapped`): a path that is gone (``ENOENT``, ``ENODEV``, ``ESRCH`` - the
container exited) is :class:`~preemption.errors.CgroupVanished`; ``EACCES``,
``EPERM`` and ``EROFS`` are :class:`~preemption.errors.CgroupPermissionDenied`;
anything else (``EINVAL`` for a value the kernel refuses, ``EBUSY`` for a non-empty
cgroup) is :class:`~preemption.errors.CgroupError`. Tests subclass it to inject
faults a root process cannot provoke on demand.

Cgroup interface files are written in place with one ``write`` (the kernel applies
each write atomically); they are never renamed over.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from preemption.errors import CgroupError, CgroupPermissionDenied, CgroupVanished

log = logging.getLogger(__name__)

SLOW_WRITE_S = 1.0  # a cgroup write normally takes well under a millisecond

_GONE = frozenset({errno.ENOENT, errno.ENODEV, errno.ESRCH, errno.ENOTDIR})
_DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


@contextmanager
def _mapped(path: Path, doing: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        problem = f"{doing} failed: {os.strerror(exc.errno) if exc.errno else exc}"
        if exc.errno in _GONE:
            raise CgroupVanished(str(path), problem) from exc
        if exc.errno in _DENIED:
            raise CgroupPermissionDenied(str(path), problem) from exc
        raise CgroupError(str(path), problem) from exc


class CgroupFiles:
    """Reads and writes cgroup interface files; every failure is a CgroupError."""

    def read(self, path: Path) -> str:
        with _mapped(path, "read"):
            return path.read_text().strip()

    def write(self, path: Path, value: str) -> None:
        """One write; one taking longer than ``SLOW_WRITE_S`` is logged (the kernel
        made the agent wait: a move waits for the cgroup locks, which other cgroup
        work on the node holds)."""
        started = time.monotonic()
        with _mapped(path, f"write {value!r}"):
            self.raw_write(path, value)
        took_s = time.monotonic() - started
        if took_s > SLOW_WRITE_S:
            log.warning("%s: writing %r took %.1f s", path, value, took_s)

    def raw_write(self, path: Path, value: str) -> None:
        """The system calls of a write; tests override this to inject an ``OSError``."""
        # No O_CREAT: a vanished cgroup must not become a regular file. O_TRUNC as the
        # shell's "echo > file" (the kernel ignores it; a laid-out copy needs it).
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def exists(self, path: Path) -> bool:
        return path.exists()

    def owner_uid(self, path: Path) -> int:
        """Who owns the cgroup directory (who could create it)."""
        with _mapped(path, "stat"):
            return path.lstat().st_uid

    def make_dir(self, path: Path) -> bool:
        """Create the cgroup (and its parents); False when it already existed."""
        with _mapped(path, "mkdir"):
            if path.is_dir():
                return False
            path.mkdir(parents=True)
            return True

    def remove_dir(self, path: Path) -> None:
        """rmdir an empty cgroup; a cgroup already gone is fine."""
        try:
            with _mapped(path, "rmdir"):
                path.rmdir()
        except CgroupVanished:
            return

    def list_dirs(self, path: Path) -> list[Path]:
        with _mapped(path, "list"):
            return sorted(child for child in path.iterdir() if child.is_dir())
