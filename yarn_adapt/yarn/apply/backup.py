"""Timestamped backups of scheduler files, taken before every write.

Everything here is bytes: a backup is the exact content the apply replaced (whatever
its encoding), identified by its SHA-256, and a restore writes those bytes back.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from yarn_adapt.errors import ConfigFileError
from yarn_adapt.yarn.schedconf.xmlio import fsync_directory


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


class BackupStore:
    """Copies of ``<name>`` kept as ``<dir>/<name>.<UTC timestamp>.<sequence>``; the
    sequence only grows, so the newest backup is always the last one."""

    def __init__(self, directory: Path, keep: int = 50) -> None:
        self.directory = directory
        self.keep = keep

    def save(self, source: Path, content: bytes) -> Path:
        """Keep ``content`` (the bytes just read from ``source``, so the backup is
        exactly what the apply replaces) durably, with ``source``'s permission bits."""
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        sequence = 1 + max((_sequence(p) for p in self.backups_of(source.name)), default=0)
        target = self.directory / f"{source.name}.{stamp}.{sequence:06d}"
        try:
            mode = source.stat().st_mode & 0o777
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(content)
                stream.flush()
                os.fsync(stream.fileno())
            fsync_directory(self.directory)
        except OSError as exc:
            raise ConfigFileError(str(source), f"cannot back up to {target}: {exc}") from exc
        self._prune(source.name)
        return target

    def backups_of(self, name: str) -> list[Path]:
        """Oldest first."""
        return sorted(self.directory.glob(f"{name}.*"), key=_sequence)

    def _prune(self, name: str) -> None:
        for old in self.backups_of(name)[: -self.keep]:
            old.unlink(missing_ok=True)


def _sequence(path: Path) -> int:
    suffix = path.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else 0
