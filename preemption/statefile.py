"""The agent's state file: every original value, written BEFORE the change it allows.

Before the agent writes a cgroup file for the first time it records the file's
original value here, and before it creates a cgroup or moves a process it records
that too; only after the record is in the file (temp file, rename over) does it touch
the cgroup. So at any instant the file lists everything that differs from how the
agent found the node, and :func:`restore` can put it back: on SIGTERM, on
``yarn-adapt agent restore`` and on the next start after a crash or SIGKILL.

The file must outlive the agent, not the machine: what it describes (cgroups, their
limits, which process sits where) lives in the kernel and is gone after a reboot too.
So it is not fsynced: a rename is atomic to every process whether or not the page
reached the disk, and an fsync under a busy node's writeback held the agent's loop
50 s (docs/flakes.md). The file names the boot it was written in; one written in an
earlier boot (or left unreadable by a power cut, older than this boot) is set aside
as ``<name>.boot-<mtime>`` with a warning, and the agent starts with nothing to restore.

Format (JSON, one object)::

    {"format": 1,
     "boot": "<the kernel's boot_id when it was written>",
     "backend": {"version": "v1", "cpu": "/sys/fs/cgroup/cpu", ...},
     "originals": [{"group": "hadoop-yarn/container_..", "key": "cpu.cfs_quota_us",
                    "value": "-1"}, ...],
     "created": ["yarn-adapt/container_..", ...],
     "adopted": ["yarn-adapt/container_..", ...],
     "moved": [{"pid": 4242, "group": "yarn-adapt/container_..",
                "from": {"cpu": "", "cpuacct": "", "memory": "system.slice/nm"}}]}

``created`` are the cgroups the agent made (removed on restore); ``adopted`` the ones
it found already there and moved processes into (emptied of them on restore, not
removed). ``adopted`` and ``boot`` may be missing (files written before they existed).

Every cgroup path in the file is relative to the backend's root: one that is
absolute, has a ``..`` (or ``.``, or empty) component would reach outside the
hierarchy, and the file is refused as corrupt, naming the entry.

A journal without a path (the simulator's) keeps the same records in memory only.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from preemption import lazyfree
from preemption.cgroups.base import Cgroup, CgroupBackend, relpath_problem
from preemption.errors import CgroupError, CgroupVanished, StateFileCorrupt
from preemption.pinned import Moved as MoveOutcome
from preemption.pinned import checked_move, start_of
from preemption.procfs import ProcFs

log = logging.getLogger(__name__)
FORMAT = 1


@dataclass(frozen=True)
class Moved:
    pid: int
    group: str
    origin: Mapping[str, str]


@dataclass
class JournalContent:
    backend: dict[str, str] = field(default_factory=dict)
    boot: str | None = None
    originals: dict[tuple[str, str], str] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    moved: dict[int, Moved] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.originals or self.created or self.adopted or self.moved)

    @property
    def owned(self) -> list[str]:
        """The cgroups the agent put processes into: made by it, or found and adopted."""
        return [*self.created, *self.adopted]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "boot": self.boot,
            "backend": self.backend,
            "originals": [
                {"group": group, "key": key, "value": value}
                for (group, key), value in sorted(self.originals.items())
            ],
            "created": sorted(self.created),
            "adopted": sorted(self.adopted),
            "moved": [
                {"pid": m.pid, "group": m.group, "from": dict(m.origin)}
                for m in sorted(self.moved.values(), key=lambda m: m.pid)
            ],
        }


def parse_content(text: str, where: str) -> JournalContent:
    """The state file's text -> records; ``StateFileCorrupt`` naming what is wrong."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"not a format-{FORMAT} state file")
        content = JournalContent(backend={str(k): str(v) for k, v in raw["backend"].items()})
        boot = raw.get("boot")
        content.boot = None if boot is None else str(boot)
        for n, entry in enumerate(raw["originals"]):
            group = _relpath(entry["group"], f"originals[{n}].group")
            content.originals[(group, str(entry["key"]))] = str(entry["value"])
        content.created = [_relpath(g, f"created[{n}]") for n, g in enumerate(raw["created"])]
        adopted = raw.get("adopted", [])
        content.adopted = [_relpath(g, f"adopted[{n}]") for n, g in enumerate(adopted)]
        for n, entry in enumerate(raw["moved"]):
            origin = {
                str(k): _relpath(v, f"moved[{n}].from[{k!r}]", root_allowed=True)
                for k, v in entry["from"].items()
            }
            group = _relpath(entry["group"], f"moved[{n}].group")
            content.moved[int(entry["pid"])] = Moved(int(entry["pid"]), group, origin)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateFileCorrupt(where, f"{exc.__class__.__name__}: {exc}") from exc
    return content


def _relpath(value: object, entry: str, *, root_allowed: bool = False) -> str:
    """A cgroup path of the file, checked: ``ValueError`` naming the entry if it is not
    a path below the backend's root (``root_allowed``: the root itself, ``""``)."""
    text = str(value)
    problem = relpath_problem(text, root_allowed=root_allowed)
    if problem:
        raise ValueError(f"{entry} {text!r}: {problem}")
    return text


class StateJournal:
    """Records originals before changes; persists atomically when ``path`` is set."""

    def __init__(
        self, path: Path | None, backend: Mapping[str, str], boot: BootClock | None = None
    ) -> None:
        self.path = path
        self.boot = boot or BootClock()
        self.content = JournalContent(backend=dict(backend))
        self._deferring = 0  # inside one_save(): saves wait for its end
        self._unsaved = False

    @contextmanager
    def one_save(self) -> Iterator[None]:
        """Every record made inside reaches the file in one save at its end: for
        journalling several changes before making any of them (dozens of saves, when
        each was fsynced, took the agent minutes on a busy node). Nothing may be
        changed inside, only remembered."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
        if not self._deferring and self._unsaved:
            self.save()

    @classmethod
    def open(
        cls, path: Path | None, backend: Mapping[str, str], boot: BootClock | None = None
    ) -> StateJournal:
        """A journal holding whatever a previous run of this boot left in ``path``."""
        journal = cls(path, backend, boot)
        if path is None or not path.exists():
            return journal
        boot = journal.boot
        try:
            content = parse_content(path.read_text(errors="replace"), str(path))
        except StateFileCorrupt:
            if path.stat().st_mtime >= boot.started_at():
                raise  # written in this boot: a real fault, not a power cut's leftover
            set_aside(path, "unreadable, written before this boot")
            return journal
        if content.boot is not None and content.boot != boot.boot_id():
            set_aside(path, f"written in an earlier boot ({content.boot})")
            return journal
        journal.content = content
        return journal

    @property
    def empty(self) -> bool:
        return self.content.empty

    def original(self, group: Cgroup, key: str) -> str | None:
        return self.content.originals.get((group.relpath, key))

    def originals_of(self, group: Cgroup) -> dict[str, str]:
        return {k: v for (g, k), v in self.content.originals.items() if g == group.relpath}

    def remember_original(self, group: Cgroup, key: str, value: str) -> None:
        if (group.relpath, key) not in self.content.originals:
            self.content.originals[(group.relpath, key)] = value
            self.save()

    def remember_created(self, group: Cgroup) -> None:
        if group.relpath not in self.content.created:
            self.content.created.append(group.relpath)
            self.save()

    def remember_adopted(self, group: Cgroup) -> None:
        """A cgroup that existed before the agent moved processes into it."""
        if group.relpath not in self.content.owned:
            self.content.adopted.append(group.relpath)
            self.save()

    def remember_moved(self, pid: int, group: Cgroup, origin: Mapping[str, str]) -> None:
        if pid not in self.content.moved:
            self.content.moved[pid] = Moved(pid, group.relpath, dict(origin))
            self.save()

    def owns(self, group: Cgroup) -> bool:
        return group.relpath in self.content.owned

    def forget_values(self, group: Cgroup) -> None:
        """The group's files hold their originals again (or the group is gone)."""
        before = len(self.content.originals)
        self.content.originals = {
            k: v for k, v in self.content.originals.items() if k[0] != group.relpath
        }
        if len(self.content.originals) != before:
            self.save()

    def forget_group(self, group: Cgroup) -> None:
        """Nothing of the group needs restoring any more (removed, or vanished)."""
        self.content.originals = {
            k: v for k, v in self.content.originals.items() if k[0] != group.relpath
        }
        self.content.created = [g for g in self.content.created if g != group.relpath]
        self.content.adopted = [g for g in self.content.adopted if g != group.relpath]
        self.content.moved = {
            pid: moved for pid, moved in self.content.moved.items() if moved.group != group.relpath
        }
        self.save()

    def forget_pid(self, pid: int) -> None:
        if self.content.moved.pop(pid, None) is not None:
            self.save()

    def origin_of(self, group: Cgroup) -> Mapping[str, str] | None:
        """Where the group's processes came from (a moved pid's origin that lies
        outside the group in every controller)."""
        for moved in self.content.moved.values():
            if moved.group == group.relpath and all(
                path.strip("/") != group.relpath for path in moved.origin.values()
            ):
                return moved.origin
        return None

    def save(self) -> None:
        if self._deferring:
            self._unsaved = True
            return
        self._unsaved = False
        if self.path is None:
            return
        if self.content.empty:
            lazyfree.remove(self.path)
            return
        self.content.boot = self.content.boot or self.boot.boot_id()
        write_atomically(self.path, json.dumps(self.content.to_json(), indent=1) + "\n")


def write_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory, renamed over ``path`` (the replaced file is
    freed in the background: :mod:`preemption.lazyfree`). No fsync: see the module."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
        lazyfree.replace(Path(temp), path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class BootClock:
    """This boot's identity and start, as the kernel tells them (``proc``: tests)."""

    proc: Path = Path("/proc")

    def boot_id(self) -> str:
        return (self.proc / "sys/kernel/random/boot_id").read_text().strip()

    def started_at(self) -> float:
        """The boot's wall-clock start (``btime`` of ``/proc/stat``), in seconds."""
        for line in (self.proc / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
        raise OSError(f"{self.proc / 'stat'}: no btime line")


def set_aside(path: Path, why: str) -> None:
    """Rename a previous boot's state file out of the way, with one warning: the
    cgroups it describes went with that boot."""
    stamp = int(path.stat().st_mtime)
    aside = path.with_name(f"{path.name}.boot-{stamp}")
    for again in itertools.count(1):  # never over an earlier one set aside
        if not aside.exists():
            break
        aside = path.with_name(f"{path.name}.boot-{stamp}.{again}")
    path.replace(aside)
    log.warning("%s: %s; its cgroups went with that boot: kept as %s, nothing to restore",
                path, why, aside.name)  # fmt: skip


# ----------------------------------------------------------------- restore


@dataclass
class RestoreReport:
    restored_values: int = 0
    moved_back: int = 0
    removed_groups: int = 0
    vanished: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        text = (
            f"restored {self.restored_values} values, moved back {self.moved_back} processes, "
            f"removed {self.removed_groups} agent cgroups ({self.vanished} already gone)"
        )
        if self.failures:
            text += f"; {len(self.failures)} failed: {self.failures[0]}"
        return text


DISSOLVE_PASSES = 5
"""How often a group being dissolved is listed again for processes forked meanwhile."""


def restore(
    journal: StateJournal, backend: CgroupBackend, procfs: ProcFs | None = None
) -> RestoreReport:
    """Put back every recorded original; keep in the journal what could not be."""
    report = RestoreReport()
    _restore_values(journal, backend, report)
    for relpath in journal.content.owned:
        dissolve(journal, backend, Cgroup(relpath), report, procfs)
    journal.save()
    return report


def put_back(backend: CgroupBackend, group: Cgroup, key: str, original: str) -> None:
    """Write ``original`` unless the file already holds it (a refused write never
    changed it: nothing to undo, and writing could be refused again)."""
    if backend.read(group, key) != original:
        backend.write(group, key, original)


def _restore_values(journal: StateJournal, backend: CgroupBackend, report: RestoreReport) -> None:
    for (relpath, key), value in sorted(journal.content.originals.items()):
        try:
            put_back(backend, Cgroup(relpath), key, value)
        except CgroupVanished:
            report.vanished += 1
        except CgroupError as error:
            report.failures.append(error.one_line())
            continue
        else:
            report.restored_values += 1
        del journal.content.originals[(relpath, key)]


def origin_outside(
    recorded: Mapping[str, str], group: Cgroup, fallback: Mapping[str, str]
) -> dict[str, str] | None:
    """``recorded`` with every controller that names ``group`` itself replaced by
    ``fallback``'s (the group's origin): a process forked while its parent was being
    moved sits in the group in some controllers only, and putting it back "there"
    would leave it in the group. ``None`` when ``fallback`` lacks such a controller."""
    inside = [c for c, path in recorded.items() if path.strip("/") == group.relpath]
    if any(c not in fallback for c in inside):
        return None
    return {c: fallback[c] if c in inside else path for c, path in recorded.items()}


def dissolve(
    journal: StateJournal,
    backend: CgroupBackend,
    group: Cgroup,
    report: RestoreReport,
    procfs: ProcFs | None = None,
) -> None:
    """Move the processes of an agent-owned cgroup back; remove it if the agent made
    it (an adopted one stays, as the agent found it)."""
    procfs = procfs or ProcFs()
    made = group.relpath in journal.content.created
    failures_before = len(report.failures)
    origin = journal.origin_of(group) or {}
    # A process forks while its siblings are moved back: the child is born in the group
    # after it was listed. So list again until a pass finds nothing more to move.
    for _ in range(DISSOLVE_PASSES):
        moved_before = report.moved_back
        _move_back_listed(journal, backend, procfs, group, origin, made, report)
        if report.moved_back == moved_before or len(report.failures) > failures_before:
            break
    if not made and len(report.failures) > failures_before:
        return  # some processes are still in it: stays journalled, tried again later
    if made:
        try:
            backend.remove(group)
        except CgroupError as error:
            report.failures.append(error.one_line())
            return
        report.removed_groups += 1
    journal.content.created = [g for g in journal.content.created if g != group.relpath]
    journal.content.adopted = [g for g in journal.content.adopted if g != group.relpath]
    journal.content.moved = {
        p: m for p, m in journal.content.moved.items() if m.group != group.relpath
    }


def _move_back_listed(
    journal: StateJournal, backend: CgroupBackend, procfs: ProcFs, group: Cgroup,
    origin: Mapping[str, str], made: bool, report: RestoreReport,
) -> None:  # fmt: skip
    """Every process the group holds now back to where it came from."""
    try:
        pids = backend.pids(group)
    except CgroupVanished:
        return
    for pid in pids:
        moved = journal.content.moved.get(pid)
        back_to = (origin_outside(moved.origin, group, origin) or {}) if moved else origin
        if not back_to:
            if made:
                # Nothing says where it came from: the root cgroup would free it from
                # the NodeManager's limits, so it stays (the group stays journalled).
                report.failures.append(f"{group.relpath}: process {pid} has no recorded origin")
            continue  # in an adopted group: it was there before the agent
        _move_back(backend, procfs, pid, back_to, report)


def _move_back(
    backend: CgroupBackend, procfs: ProcFs, pid: int, back_to: Mapping[str, str],
    report: RestoreReport,
) -> None:  # fmt: skip
    """One process back to its origin, never another that took its pid meanwhile."""
    expected = start_of(procfs, pid)
    if expected is None:
        return  # exited since the group was listed
    try:
        outcome = checked_move(
            backend, procfs, expected, back_to, lambda: backend.move_back(pid, back_to)
        )
    except CgroupVanished:
        return  # the process exited meanwhile
    except CgroupError as error:
        report.failures.append(error.one_line())
        return
    if outcome is MoveOutcome.MOVED:
        report.moved_back += 1
    elif outcome is MoveOutcome.STRAY:
        report.failures.append(f"pid {pid} was reused during its move back; see the log")
