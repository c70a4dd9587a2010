"""Replacing and removing the agent's files without waiting for their blocks to be freed.

When a rename or an unlink drops a file's last link and nothing holds it open, the
kernel frees its blocks inside that system call; on a file system mounted with online
discard (ext4 ``-o discard``, common on cloud disks and VMs) that includes a discard
request to the disk, which a busy disk answers in seconds. The agent rewrites its
status file every interval and its state file on every change, so its control loop
would stall there (CI once saw the loop in ``rename`` in D state, in
``blkdev_issue_discard``, for over 30 s).

Here the replaced or removed file is opened first, so the rename or unlink only drops
the name; a daemon thread closes it afterwards, and the freeing (and any discard) waits
in that thread. Past ``MAX_PENDING`` files waiting, the caller closes its own: the loop
slows rather than holding open files without bound.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from pathlib import Path

MAX_PENDING = 256

_pending: queue.Queue[int] = queue.Queue()
_started = threading.Lock()
_closer: threading.Thread | None = None


def replace(temp: Path, path: Path) -> None:
    """``temp`` renamed over ``path``; the file it replaced is freed in the background."""
    held = _hold(path)
    try:
        temp.replace(path)
    finally:
        _release(held)


def remove(path: Path) -> None:
    """``path`` unlinked (gone already is fine); its blocks are freed in the background."""
    held = _hold(path)
    try:
        path.unlink(missing_ok=True)
    finally:
        _release(held)


def pending() -> int:
    """Files replaced or removed whose blocks are not freed yet."""
    return _pending.qsize()


def _hold(path: Path) -> int | None:
    with contextlib.suppress(OSError):  # none yet, or unreadable: nothing to hold
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    return None


def _release(fd: int | None) -> None:
    if fd is None:
        return
    if _pending.qsize() >= MAX_PENDING:
        os.close(fd)
        return
    _ensure_closer()
    _pending.put(fd)


def _ensure_closer() -> None:
    global _closer
    with _started:
        if _closer is None or not _closer.is_alive():
            _closer = threading.Thread(target=_close_forever, name="lazyfree", daemon=True)
            _closer.start()


def _close_forever() -> None:
    while True:
        fd = _pending.get()
        with contextlib.suppress(OSError):
            os.close(fd)
