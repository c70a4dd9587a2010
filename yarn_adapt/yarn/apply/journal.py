"""The apply journal: every step of an apply is recorded, durably, before the next
one starts, so a crash at any point leaves enough behind to finish or undo it.

Every entry of an apply carries what recovery needs to decide on its own: the
SHA-256 of the configuration before (``old_sha256``) and after (``new_sha256``), the
backup to restore (file appliers) or the forward and reverse ``<sched-conf>`` bodies
(the mutation applier). :func:`interrupted` gives each unfinished apply's whole
history (:class:`ApplyHistory`); an applier's ``recover(history)`` compares the
target and the RM with both configurations and finishes or rolls back.

The service keeps its journal in SQLite; the CLI uses :class:`JsonlJournal`, one
JSON object per line in its state directory, fsynced per entry. Both implement
:class:`ApplyJournal`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO, Protocol

from yarn_adapt.errors import SettingsError
from yarn_adapt.yarn.schedconf.xmlio import fsync_directory


class ApplyStep(StrEnum):
    """Steps in the order they happen.

    Forward: planned -> backed-up -> written -> activated -> verified. Undoing:
    rolling-back (the decision and its reason) -> restored (the previous file or the
    reverse body is in place) -> rolled-back. The final steps say what runs at the
    end: ``verified`` the new configuration; ``rolled-back``, ``failed`` (the RM
    refused before anything changed) and ``abandoned`` (stopped before the target
    changed) the previous one; ``unresolved`` neither could be confirmed (the
    operator must act); ``nothing-to-do`` the target already said it.
    """

    PLANNED = "planned"
    BACKED_UP = "backed-up"
    WRITTEN = "written"
    ACTIVATED = "activated"
    VERIFIED = "verified"
    ROLLING_BACK = "rolling-back"
    RESTORED = "restored"
    ROLLED_BACK = "rolled-back"
    FAILED = "failed"
    ABANDONED = "abandoned"
    UNRESOLVED = "unresolved"
    NOTHING_TO_DO = "nothing-to-do"

    @property
    def is_final(self) -> bool:
        return self in _FINAL_STEPS

    @property
    def new_config_runs(self) -> bool:
        """At this final step, the configuration the apply asked for runs."""
        return self in (ApplyStep.VERIFIED, ApplyStep.NOTHING_TO_DO)


_FINAL_STEPS = frozenset(
    {
        ApplyStep.VERIFIED,
        ApplyStep.ROLLED_BACK,
        ApplyStep.FAILED,
        ApplyStep.ABANDONED,
        ApplyStep.UNRESOLVED,
        ApplyStep.NOTHING_TO_DO,
    }
)


@dataclass(frozen=True)
class JournalEntry:
    """One step of one apply. ``target`` is the file or endpoint changed;
    ``old_sha256`` / ``new_sha256`` identify the configuration before and after (the
    file's bytes, or the mutation fingerprint); ``backup`` is the copy to restore;
    ``forward_body`` / ``reverse_body`` the mutation and its inverse."""

    apply_id: str
    step: ApplyStep
    applier: str
    target: str
    backup: str = ""
    new_sha256: str = ""
    detail: str = ""
    at: float = field(default_factory=time.time)
    old_sha256: str = ""
    forward_body: str = ""
    reverse_body: str = ""


_ENTRY_FIELDS = frozenset(f.name for f in fields(JournalEntry))


class ApplyJournal(Protocol):
    def record(self, entry: JournalEntry) -> None: ...

    def entries(self) -> list[JournalEntry]: ...


@dataclass(frozen=True)
class ApplyHistory:
    """Every entry of one apply, in order: what recovery reads."""

    entries: tuple[JournalEntry, ...]

    def __post_init__(self) -> None:
        if not self.entries:
            raise ValueError("an apply history needs at least one entry")

    @property
    def first(self) -> JournalEntry:
        return self.entries[0]

    @property
    def last(self) -> JournalEntry:
        return self.entries[-1]

    @property
    def apply_id(self) -> str:
        return self.first.apply_id

    @property
    def applier(self) -> str:
        return self.first.applier

    @property
    def target(self) -> str:
        return self.first.target

    @property
    def is_finished(self) -> bool:
        return self.last.step.is_final

    def reached(self, step: ApplyStep) -> bool:
        return any(entry.step is step for entry in self.entries)

    def _known(self, name: str) -> str:
        return next((getattr(e, name) for e in self.entries if getattr(e, name)), "")

    @property
    def old_sha256(self) -> str:
        return self._known("old_sha256")

    @property
    def new_sha256(self) -> str:
        return self._known("new_sha256")

    @property
    def backup(self) -> str:
        return self._known("backup")

    @property
    def forward_body(self) -> str:
        return self._known("forward_body")

    @property
    def reverse_body(self) -> str:
        return self._known("reverse_body")

    @property
    def rollback_reason(self) -> str:
        return next((e.detail for e in self.entries if e.step is ApplyStep.ROLLING_BACK), "")


def histories(entries: Iterable[JournalEntry]) -> list[ApplyHistory]:
    """The journal grouped by apply, in the order the applies started."""
    grouped: dict[str, list[JournalEntry]] = {}
    for entry in entries:
        grouped.setdefault(entry.apply_id, []).append(entry)
    return [ApplyHistory(tuple(group)) for group in grouped.values()]


def interrupted(journal: ApplyJournal) -> list[ApplyHistory]:
    """The whole history of every apply that did not reach a final step."""
    return [history for history in histories(journal.entries()) if not history.is_finished]


def unfinished(journal: ApplyJournal) -> list[JournalEntry]:
    """The last entry of every apply that did not reach a final step."""
    return [history.last for history in interrupted(journal)]


@dataclass
class ApplyTrail:
    """The identity of one apply, stamped on every entry it records: the hashes of
    both configurations, the backup once taken, the mutation bodies."""

    journal: ApplyJournal
    apply_id: str
    applier: str
    target: str
    old_sha256: str = ""
    new_sha256: str = ""
    backup: str = ""
    forward_body: str = ""
    reverse_body: str = ""

    @classmethod
    def resume(cls, journal: ApplyJournal, history: ApplyHistory) -> ApplyTrail:
        """Carry on an interrupted apply's trail (recovery appends to it)."""
        return cls(
            journal,
            history.apply_id,
            history.applier,
            history.target,
            old_sha256=history.old_sha256,
            new_sha256=history.new_sha256,
            backup=history.backup,
            forward_body=history.forward_body,
            reverse_body=history.reverse_body,
        )

    def record(self, step: ApplyStep, detail: str = "") -> ApplyStep:
        self.journal.record(
            JournalEntry(
                apply_id=self.apply_id,
                step=step,
                applier=self.applier,
                target=self.target,
                backup=self.backup,
                new_sha256=self.new_sha256,
                detail=" ".join(detail.split()),
                old_sha256=self.old_sha256,
                forward_body=self.forward_body,
                reverse_body=self.reverse_body,
            )
        )
        return step


class MemoryJournal:
    """A journal in memory, for one-off applies and tests."""

    def __init__(self) -> None:
        self._entries: list[JournalEntry] = []

    def record(self, entry: JournalEntry) -> None:
        self._entries.append(entry)

    def entries(self) -> list[JournalEntry]:
        return list(self._entries)


class JsonlJournal:
    """Append-only JSON lines; each entry is written, flushed and fsynced (and the
    directory fsynced when the file is created) before ``record`` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, entry: JournalEntry) -> None:
        line = json.dumps(asdict(entry), sort_keys=True) + "\n"
        created = not self.path.exists()
        with self.path.open("a+b") as stream:
            _drop_torn_tail(stream)
            stream.write(line.encode("utf-8"))
            stream.flush()
            os.fsync(stream.fileno())
        if created:
            fsync_directory(self.path.parent)

    def entries(self) -> list[JournalEntry]:
        return list(self._read())

    def _read(self) -> Iterator[JournalEntry]:
        if not self.path.exists():
            return
        lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                known = {key: value for key, value in raw.items() if key in _ENTRY_FIELDS}
                yield JournalEntry(**{**known, "step": ApplyStep(raw["step"])})
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                # A torn last line is what a crash mid-append leaves; anything else is
                # damage the operator must see.
                if number == len(lines):
                    return
                raise SettingsError(f"{self.path}:{number}: unreadable journal entry") from exc


def _drop_torn_tail(stream: BinaryIO) -> None:
    """Cut a last line a crash left half-written (it was never acknowledged), so the
    next entry starts on a line of its own."""
    size = stream.seek(0, os.SEEK_END)
    if size == 0:
        return
    descriptor = stream.fileno()
    if os.pread(descriptor, 1, size - 1) == b"\n":
        return
    content = os.pread(descriptor, size, 0)
    os.ftruncate(descriptor, content.rfind(b"\n") + 1)
    stream.seek(0, os.SEEK_END)
