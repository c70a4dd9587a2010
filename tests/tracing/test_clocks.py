"""The rule for spans from a clock that runs ahead (tracing.clocks), pure: which spans
move, by how much, what they keep; and how the risk snapshot counts them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.tracing.conftest import span
from tests.tracing.test_clock_ahead import AHEAD_US
from tracing.batch import DecodedBatch, decode_batch
from tracing.clocks import HostAhead, entry_stamp_us, pull_back
from tracing.convert import columns_from_spans
from tracing.fastpath import critical_paths
from tracing.forest import build_forest
from tracing.model import Span, SpanKind
from tracing.risk import RiskSettings, assess, assess_paths, inputs_from_paths
from tracing.wire import FLAG_CLOCK_AHEAD, FLAG_CYCLE_CUT, encode_batch


def decoded(spans: list[Span]) -> DecodedBatch:
    return decode_batch(encode_batch(spans))


STAMP = 1_000_000_000_000_000
TOLERANCE = 5_000_000


@pytest.mark.parametrize(
    ("ahead_us", "moved"),
    [(0, False), (TOLERANCE, False), (TOLERANCE + 1, True), (AHEAD_US, True)],
)
def test_a_hosts_spans_move_back_only_past_the_tolerance(ahead_us: int, moved: bool) -> None:
    batch = decoded([span("a", None, STAMP - 500 + ahead_us, STAMP + ahead_us, host="node-3")])
    after, hosts = pull_back(batch, STAMP, TOLERANCE)
    assert (after is not batch) == moved
    assert int(after.records["end"][0]) == (STAMP if moved else STAMP + ahead_us)
    assert hosts == ((HostAhead("node-3", 1, ahead_us),) if moved else ())


def test_one_shift_per_host_keeps_durations_order_and_the_other_hosts() -> None:
    """node-3 (5 minutes fast) sends a backlog spanning 10 minutes: every one of its
    spans moves by the same amount; node-1's spans stay where they are."""
    minute = 60_000_000
    ends = [STAMP + 5 * minute - k * minute for k in range(10)]
    spans = [span(f"s{k}", None, e - 100 * (k + 1), e, host="node-3") for k, e in enumerate(ends)]
    spans.append(span("n1", None, STAMP - 2000, STAMP - 1000, host="node-1"))
    batch = decoded(spans)
    after, hosts = pull_back(batch, STAMP, TOLERANCE)
    shift = batch.records["end"] - after.records["end"]
    assert list(shift) == [5 * minute] * 10 + [0]
    assert np.array_equal(
        after.records["end"] - after.records["start"], batch.records["end"] - batch.records["start"]
    )
    assert list(after.records["flags"] & FLAG_CLOCK_AHEAD) == [FLAG_CLOCK_AHEAD] * 10 + [0]
    assert hosts == (HostAhead("node-3", 10, 5 * minute),)


def test_a_sender_cannot_set_the_workers_flags() -> None:
    payload = bytearray(encode_batch([span("a", None, 0, 10)]))
    payload[-1] |= FLAG_CLOCK_AHEAD | FLAG_CYCLE_CUT  # the last record's flags byte
    assert int(decode_batch(bytes(payload)).records["flags"][0]) == 0


def test_an_entry_id_is_its_stamp() -> None:
    assert entry_stamp_us(b"1700000000123-7") == 1_700_000_000_123_000


def test_the_reference_and_the_fast_risk_count_the_moved_spans_alike() -> None:
    spans = [
        span("r", None, 0, 900, service="gw", kind=SpanKind.SERVER),
        span("c", "r", 100, 800, service="gw", kind=SpanKind.CLIENT),
        span("p", "c", 200, 700, service="pricing", kind=SpanKind.SERVER, host="node-3"),
    ]
    columns, names = columns_from_spans(spans)
    pricing = columns.span == int(spans[2].span_id, 16)  # as if node-3 had been moved back
    flagged = np.where(pricing, FLAG_CLOCK_AHEAD, 0).astype(np.uint8)
    paths = critical_paths(build_forest(replace(columns, flags=columns.flags | flagged), names))
    fast = assess_paths(paths, RiskSettings(), 0, STAMP)
    reference = assess(inputs_from_paths(paths, 0, STAMP), RiskSettings())
    for snapshot in (fast, reference):
        assert (snapshot.clock_ahead_spans, snapshot.clock_ahead_hosts) == (1, ("node-3",))
    assert fast.clock_note().startswith("1 span(s) in the window came from host(s)")
    assert fast.to_dict()["clock_ahead_hosts"] == ["node-3"]
