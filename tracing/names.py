"""Interned names: (service, operation) pairs become endpoint ids, (host, container)
pairs placement ids (pure: no Redis).

A stored span carries two 4-byte ids instead of four strings. The names live in the
segments that use them, not in a table of their own: a segment (:mod:`tracing.segment`)
holds the list of names its spans use, and its ids 1..n index that list (0 is none: a
virtual root's endpoint, an unknown placement). So names expire, and count in the memory
budget, with the traces that use them, however many containers come and go; and a reader
reads the names of the segments it reads, nothing more.

- The ingest worker interns in process (:class:`NameIndex`: no round trip, no shared
  state between workers) and renumbers each segment's ids densely as it writes it
  (:func:`localise`). It keeps its index small by dropping the names no held span uses
  (:meth:`NameIndex.compacted`).
- A reader merges the lists of the segments it loads into an index of its own
  (:meth:`NameIndex.adopt`) and hands :class:`NameTable` (ids -> names) to the analysis.
- Segments of the first format (``YTG1``) refer to ids that earlier workers shared
  through the Redis hashes ``{prefix}:names`` / ``{prefix}:names:rev``; the store looks
  up only the ids those segments use (:meth:`NameIndex.adopt_shared`), and deletes the
  hashes once no such segment is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from tracing.columns import TraceColumns
from tracing.npkit import distinct

ENDPOINT = "e"
PLACEMENT = "p"
UNKNOWN = "(unknown)"
_SEP = "\0"


def endpoint_text(service: str, operation: str) -> str:
    return f"{ENDPOINT}{_SEP}{service}{_SEP}{operation}"


def placement_text(host: str, container: str) -> str:
    return f"{PLACEMENT}{_SEP}{host}{_SEP}{container}"


@dataclass(frozen=True)
class NameTable:
    """The names of one read: ids -> (service, operation) and ids -> (host, container)."""

    endpoints: dict[int, tuple[str, str]]
    placements: dict[int, tuple[str, str]]

    def endpoint(self, ident: int) -> tuple[str, str]:
        return self.endpoints.get(ident, (UNKNOWN, UNKNOWN))

    def placement(self, ident: int) -> tuple[str, str]:
        return self.placements.get(ident, ("", ""))


class NameIndex:
    """Names interned in this process: id ``i`` (from 1) is ``texts[i - 1]``."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._texts: list[str] = []
        self._ids: dict[str, int] = {}
        self.ids(list(texts))

    def __len__(self) -> int:
        return len(self._texts)

    def ids(self, texts: Sequence[str]) -> list[int]:
        """The id of each text, new ones added."""
        found = []
        for text in texts:
            ident = self._ids.get(text)
            if ident is None:
                self._texts.append(text)
                ident = self._ids[text] = len(self._texts)
            found.append(ident)
        return found

    def text(self, ident: int) -> str:
        return self._texts[ident - 1]

    def table(self) -> NameTable:
        return name_table(enumerate(self._texts, start=1))

    def adopt(self, columns: TraceColumns, names: Sequence[str]) -> TraceColumns:
        """``columns`` of a segment whose ids index ``names`` (from 1), renumbered into
        this index."""
        lookup = np.array([0, *self.ids(names)], np.uint32)
        return renumbered(columns, lookup)

    def adopt_shared(self, columns: TraceColumns, shared: Mapping[int, str]) -> TraceColumns:
        """``columns`` of a ``YTG1`` segment (ids shared through Redis; ``shared``: the
        texts of those it uses) renumbered into this index; an id missing from
        ``shared`` reads as unknown."""
        return replace(
            columns,
            endpoint=self._shared(columns.endpoint, shared, endpoint_text(UNKNOWN, UNKNOWN)),
            placement=self._shared(columns.placement, shared, placement_text("", "")),
        )

    def _shared(self, ids: np.ndarray, shared: Mapping[int, str], missing: str) -> np.ndarray:
        used = used_ids(ids)
        lookup = np.zeros(int(ids.max(initial=0)) + 1, np.uint32)
        lookup[used] = self.ids([shared.get(int(i), missing) for i in used])
        renamed: np.ndarray = lookup[ids]
        return renamed

    def compacted(self, kept: np.ndarray) -> tuple[np.ndarray, NameIndex]:
        """A new index holding only the names of the ids in ``kept``, and the lookup
        (old id -> new id) that renumbers arrays of old ids."""
        used = used_ids(kept, len(self) + 1)
        lookup = np.zeros(len(self) + 1, np.uint32)
        lookup[used] = np.arange(1, len(used) + 1)
        return lookup, NameIndex(self._texts[int(i) - 1] for i in used)


def used_ids(ids: np.ndarray, size: int | None = None) -> np.ndarray:
    """The distinct non-zero ids in ``ids`` (all below ``size``), sorted."""
    present = distinct(ids.astype(np.int64), size or int(ids.max(initial=0)) + 1)
    kept: np.ndarray = present[present > 0]
    return kept


def renumbered(columns: TraceColumns, lookup: np.ndarray) -> TraceColumns:
    """``columns`` with endpoint and placement ids replaced by ``lookup[id]``."""
    return replace(columns, endpoint=lookup[columns.endpoint], placement=lookup[columns.placement])


def localise(columns: TraceColumns, index: NameIndex) -> tuple[TraceColumns, list[str]]:
    """``columns`` (ids of ``index``) renumbered 1..n over the n names they use, and
    those names: what a segment stores."""
    both = np.concatenate([columns.endpoint, columns.placement])
    used = used_ids(both, len(index) + 1)
    lookup = np.zeros(len(index) + 1, np.uint32)
    lookup[used] = np.arange(1, len(used) + 1)
    return renumbered(columns, lookup), [index.text(int(i)) for i in used]


def name_table(entries: Iterable[tuple[int, str]]) -> NameTable:
    endpoints: dict[int, tuple[str, str]] = {}
    placements: dict[int, tuple[str, str]] = {}
    for ident, text in entries:
        kind, _, rest = text.partition(_SEP)
        first, _, second = rest.partition(_SEP)
        if kind == ENDPOINT:
            endpoints[ident] = (first, second)
        elif kind == PLACEMENT:
            placements[ident] = (first, second)
    return NameTable(endpoints, placements)
