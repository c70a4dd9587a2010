"""The journal of each node's original total, written before the guard changes it.

``<state dir>/guard/originals.json`` holds, per node the guard has touched, the total
the node had before (``original``), what the guard last confirmed (``last_set``) and
what it is about to set (``intended``, written *before* the POST). Whatever stops the
guard -- a clean stop, ``yarn-adapt recover`` after kill -9, disabling it -- puts
every node back from this file, and only a node whose total is still one the guard
set: a total someone else changed since is theirs, and is left alone (and said so).

The original is the node's capacity only while nobody else changes the node: every
round (and every restore) first drops the entries of nodes that are whole again,
were changed outside the guard, or came back under a new id
(:mod:`~yarn_adapt.colocation.follow`), so a NodeManager that re-registers smaller is
never "restored" to its old size.

Every write replaces the whole file atomically (a temporary file in the same
directory, fsynced, renamed, the directory fsynced), under an ``flock`` so the
service and ``yarn-adapt recover`` never interleave.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from yarn_adapt.errors import InputError
from yarn_adapt.model import Resources

FILE_NAME = "originals.json"
VERSION = 1


class GuardStateDamaged(InputError):
    """The originals journal cannot be read: the nodes' original totals are unknown."""


@dataclass(frozen=True)
class NodeOriginal:
    node_id: str
    original: Resources
    since_s: float
    last_set: Resources | None = None
    intended: Resources | None = None

    def set_by_guard(self, total: Resources) -> bool:
        """``total`` is one the guard set (or was about to set)."""
        return total in (self.last_set, self.intended)


class OriginalTotals:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME

    # ------------------------------------------------------------------ reading

    def load(self) -> dict[str, NodeOriginal]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise GuardStateDamaged(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        try:
            document = json.loads(text)
            return {n["node_id"]: _entry(n) for n in document["nodes"]}
        except (ValueError, KeyError, TypeError) as exc:
            raise GuardStateDamaged(
                f"{self.path}: damaged ({exc.__class__.__name__}: {exc}); the nodes' original "
                "totals are unknown: compare each node's total with its NodeManager's "
                "configuration before removing this file"
            ) from exc

    def get(self, node_id: str) -> NodeOriginal | None:
        return self.load().get(node_id)

    # ------------------------------------------------------------------ writing

    def intend(self, node_id: str, current: Resources, target: Resources) -> NodeOriginal:
        """Before setting ``target``: remember the original (``current`` the first
        time) and the intention, durably."""
        with self._locked() as entries:
            known = entries.get(node_id)
            if known is None:
                known = NodeOriginal(node_id, current, time.time())
            entries[node_id] = replace(known, intended=target)
            return entries[node_id]

    def confirmed(self, node_id: str, total: Resources) -> None:
        """The RM reports ``total``; forget the node once it is its original again."""
        with self._locked() as entries:
            known = entries.get(node_id)
            if known is None:
                return
            if total == known.original:
                del entries[node_id]
            else:
                entries[node_id] = replace(known, last_set=total, intended=None)

    def abandoned(self, node_id: str) -> None:
        """The intended change did not happen (the RM refused it)."""
        with self._locked() as entries:
            known = entries.get(node_id)
            if known is None:
                return
            if known.last_set is None:
                del entries[node_id]
            else:
                entries[node_id] = replace(known, intended=None)

    def forget(self, node_id: str) -> None:
        with self._locked() as entries:
            entries.pop(node_id, None)

    def editing(self) -> contextlib.AbstractContextManager[dict[str, NodeOriginal]]:
        """The entries, to change in place under the lock; written back on exit."""
        return self._locked()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, NodeOriginal]]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / "originals.lock").open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            entries = self.load()
            before = dict(entries)
            yield entries
            if entries != before:
                self._write(entries)

    def _write(self, entries: dict[str, NodeOriginal]) -> None:
        document = {"version": VERSION, "nodes": [_json(e) for e in entries.values()]}
        partial = self.path.with_name(f".{self.path.name}.partial")
        with partial.open("w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=1, sort_keys=True)
            stream.flush()
            os.fsync(stream.fileno())
        partial.replace(self.path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _resources(raw: Any) -> Resources | None:
    if raw is None:
        return None
    memory, vcores = raw["memory_mb"], raw["vcores"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (memory, vcores)):
        raise ValueError(f"not a resource amount: {raw!r}")
    return Resources(memory, vcores)


def _entry(raw: dict[str, Any]) -> NodeOriginal:
    original = _resources(raw["original"])
    if original is None or not isinstance(raw["node_id"], str):
        raise ValueError(f"entry without node id or original: {raw!r}")
    return NodeOriginal(
        node_id=raw["node_id"],
        original=original,
        since_s=float(raw.get("since_s", 0.0)),
        last_set=_resources(raw.get("last_set")),
        intended=_resources(raw.get("intended")),
    )


def _json(entry: NodeOriginal) -> dict[str, Any]:
    def amount(value: Resources | None) -> dict[str, int] | None:
        return None if value is None else {"memory_mb": value.memory_mb, "vcores": value.vcores}

    return {
        "node_id": entry.node_id,
        "original": amount(entry.original),
        "since_s": entry.since_s,
        "last_set": amount(entry.last_set),
        "intended": amount(entry.intended),
    }
