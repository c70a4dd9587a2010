"""The RM's node list, read at most once per guard period and shared.

The guard (every few seconds) and the configurator (every round) read the nodes
through one :class:`NodeCache`: a read younger than ``max_age_s`` is handed out
again, an older one is replaced by a fresh ``GET /nodes`` (one at a time: a reader
that waited for another's read gets that one). Every reader gets a
:class:`NodeSnapshot`, which says when it was read -- when the read began, so a list
that was on its way while a node changed counts as older than the change -- and each
can say how old the nodes it decided on were. A reader that changed a node itself
asks for a list read after that (``newer_than_s``): the guard never decides twice on a
total it has since changed (a stale total would be journalled as a node's capacity).
A failed read raises (a :class:`~yarn_adapt.errors.YarnError`) and leaves the last
good snapshot in place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from yarn_adapt.model import Node


@dataclass(frozen=True)
class NodeSnapshot:
    """The nodes the RM listed, and when (seconds since the epoch)."""

    nodes: tuple[Node, ...]
    read_at_s: float

    def age_s(self, now_s: float) -> float:
        return max(0.0, now_s - self.read_at_s)


class NodeCache:
    def __init__(
        self,
        fetch: Callable[[], Sequence[Node]],
        *,
        max_age_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not max_age_s > 0:
            raise ValueError(f"max_age_s must be positive, got {max_age_s!r}")
        self._fetch = fetch
        self.max_age_s = max_age_s
        self.clock = clock
        self._lock = threading.Lock()
        self._latest: NodeSnapshot | None = None
        self.reads = 0  # how many times the RM was asked

    def read(self, *, newer_than_s: float | None = None) -> NodeSnapshot:
        """The nodes, at most ``max_age_s`` old and read after ``newer_than_s`` (read
        from the RM otherwise)."""
        with self._lock:
            latest = self._latest
            if latest is not None and self._fresh(latest, newer_than_s):
                return latest
            began_s = self.clock()
            nodes = tuple(self._fetch())
            self.reads += 1
            self._latest = NodeSnapshot(nodes, began_s)
            return self._latest

    def _fresh(self, snapshot: NodeSnapshot, newer_than_s: float | None) -> bool:
        if newer_than_s is not None and snapshot.read_at_s <= newer_than_s:
            return False
        return snapshot.age_s(self.clock()) < self.max_age_s

    def nodes(self) -> tuple[Node, ...]:
        """The node list alone (the configurator's observe reads it so)."""
        return self.read().nodes

    def latest(self) -> NodeSnapshot | None:
        """The last snapshot read, however old (None before the first)."""
        return self._latest
