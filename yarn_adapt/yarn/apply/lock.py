"""One apply at a time: an exclusive, non-blocking ``flock`` on a lock file.

The lock is held by an open file descriptor, so a crashed process releases it; the
file records the holder's pid for the error message.

An apply to a scheduler file locks a file *beside that file* (:meth:`ApplyLock.beside`,
``.<name>.yarn-adapt.lock`` in the same directory, found through the file's real path),
so the CLI and the service exclude each other on the same target whatever their state
directories. Appliers without a file (the mutation API, node resources) lock a file
in their state directory.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from yarn_adapt.errors import ApplyInProgress

LOCK_SUFFIX = ".yarn-adapt.lock"


class ApplyLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @classmethod
    def beside(cls, target: Path) -> ApplyLock:
        """The lock of one target file: ``.<name>.yarn-adapt.lock`` next to the file
        the path resolves to (a symlinked path and the real one share it)."""
        real = Path(os.path.realpath(target))
        return cls(real.parent / f".{real.name}{LOCK_SUFFIX}")

    def __enter__(self) -> ApplyLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ApplyInProgress(
                f"another apply holds {self.path} (pid {holder}); nothing was changed"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
