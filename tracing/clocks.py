"""Spans from hosts whose clock runs ahead, moved back when they arrive (pure).

A span cannot have ended after the stream entry that carries it was added: Redis stamps
every entry id with its own clock (milliseconds) as an exporter adds it. A span ending
more than ``tolerance`` after its entry's stamp comes from a host whose clock runs
ahead. Left where it claims to be, one such span would be the store's newest trace for
as long as its host is ahead: the risk window would end in the future and every other
node would read "no traces".

The rule, per entry and host: when the newest span of a host in an entry ends more than
the tolerance after the entry's stamp, *every* span of that host in the entry moves back
by the same amount, so that the newest ends at the stamp. An entry comes from one
exporter, and the spans of one host share one clock, so a single shift keeps what was
measured exactly: each span's duration (the sojourns the risk is made of) and the order
and overlap of the host's spans in the entry. Only where they sit in time is estimated,
at the latest moment that can be true. Moved spans carry ``FLAG_CLOCK_AHEAD`` (the risk
snapshot counts them) and the worker counts and logs them.

Nothing is dropped. Moving a span back never invents a duration, and a span that came
from a fast clock has no truer time to keep; dropping it would lose its host's evidence
and orphan its children on other hosts. What the estimate can get wrong: two entries of
one fast host are each moved by their own newest span, so their spans may be placed up
to the difference of their export delays apart (normally below the exporter's flush
interval, 0.2 s); a parent and a child on that host that left in different entries can
be misaligned by that much (the critical path truncates a child to its parent). Spans
within the tolerance are left alone: a reader ends its window at the clock, never later.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tracing.batch import DecodedBatch
from tracing.wire import FLAG_CLOCK_AHEAD


@dataclass(frozen=True)
class HostAhead:
    """A host whose spans in one entry ended after the entry was written."""

    host: str
    spans: int  # spans moved back
    ahead_us: int  # how far its newest span ended after the entry's stamp (the shift)


def entry_stamp_us(entry_id: bytes | str) -> int:
    """When Redis added a stream entry (its id's milliseconds), in µs."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.partition("-")[0]) * 1000


def pull_back(
    batch: DecodedBatch, stamp_us: int, tolerance_us: int
) -> tuple[DecodedBatch, tuple[HostAhead, ...]]:
    """``batch`` with the spans of every host that ran ahead of ``stamp_us`` by more than
    ``tolerance_us`` moved back (see the module docstring), and those hosts."""
    records = batch.records
    if not len(records) or int(records["end"].max()) <= stamp_us + tolerance_us:
        return batch, ()
    host = records["host"].astype(np.int64)
    newest = np.full(len(batch.names), np.iinfo(np.int64).min)
    np.maximum.at(newest, host, records["end"])
    ahead = np.where(newest > stamp_us + tolerance_us, newest - stamp_us, 0)
    shift = ahead[host]
    moved = records.copy()  # the decoded records are a read-only view of the entry
    moved["start"] -= shift
    moved["end"] -= shift
    moved["flags"] |= np.where(shift > 0, FLAG_CLOCK_AHEAD, 0).astype(np.uint8)
    counts = np.bincount(host[shift > 0], minlength=len(batch.names))
    hosts = tuple(
        HostAhead(batch.names[h], int(counts[h]), int(ahead[h])) for h in np.flatnonzero(ahead)
    )
    return replace(batch, records=moved), hosts
