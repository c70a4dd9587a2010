"""The apply journal: every step of an apply is recorded before the next one starts,
so a crash at any point leaves enough behind to finish or undo the change.

The service keeps its journal in SQLite; the CLI uses :class:`JsonlJournal`, one
JSON object per line in its state directory. Both implement :class:`ApplyJournal`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from yarn_adapt.errors import SettingsError


class ApplyStep(StrEnum):
    """Steps in the order they happen. An apply whose last step is BACKED_UP,
    WRITTEN or ACTIVATED was interrupted and needs :func:`reconcile`."""

    PLANNED = "planned"
    BACKED_UP = "backed-up"
    WRITTEN = "written"
    ACTIVATED = "activated"
    VERIFIED = "verified"
    ROLLED_BACK = "rolled-back"
    FAILED = "failed"
    NOTHING_TO_DO = "nothing-to-do"

    @property
    def is_final(self) -> bool:
        return self in _FINAL_STEPS


_FINAL_STEPS = frozenset(
    {ApplyStep.VERIFIED, ApplyStep.ROLLED_BACK, ApplyStep.FAILED, ApplyStep.NOTHING_TO_DO}
)


@dataclass(frozen=True)
class JournalEntry:
    """One step of one apply. ``target`` is the file or endpoint changed; ``backup``
    the copy to restore; ``new_sha256`` identifies the text written."""

    apply_id: str
    step: ApplyStep
    applier: str
    target: str
    backup: str = ""
    new_sha256: str = ""
    detail: str = ""
    at: float = field(default_factory=time.time)


class ApplyJournal(Protocol):
    def record(self, entry: JournalEntry) -> None: ...

    def entries(self) -> list[JournalEntry]: ...


def unfinished(journal: ApplyJournal) -> list[JournalEntry]:
    """The last entry of every apply that did not reach a final step."""
    last: dict[str, JournalEntry] = {}
    for entry in journal.entries():
        last[entry.apply_id] = entry
    return [entry for entry in last.values() if not entry.step.is_final]


class MemoryJournal:
    """A journal in memory, for one-off applies and tests."""

    def __init__(self) -> None:
        self._entries: list[JournalEntry] = []

    def record(self, entry: JournalEntry) -> None:
        self._entries.append(entry)

    def entries(self) -> list[JournalEntry]:
        return list(self._entries)


class JsonlJournal:
    """Append-only JSON lines, flushed and fsynced per entry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, entry: JournalEntry) -> None:
        line = json.dumps(asdict(entry), sort_keys=True) + "\n"
        with self.path.open("a", encoding="utf-8") as stream:
            stream.write(line)
            stream.flush()
            os.fsync(stream.fileno())

    def entries(self) -> list[JournalEntry]:
        return list(self._read())

    def _read(self) -> Iterator[JournalEntry]:
        if not self.path.exists():
            return
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                yield JournalEntry(**{**raw, "step": ApplyStep(raw["step"])})
            except (ValueError, TypeError, KeyError) as exc:
                # A torn last line is what a crash mid-append leaves; anything else is
                # damage the operator must see.
                if number == _line_count(self.path):
                    return
                raise SettingsError(f"{self.path}:{number}: unreadable journal entry") from exc


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())
