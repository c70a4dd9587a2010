"""Critical paths on hand-built traces with known answers, in the networkx reference and
the vectorised fast path (which must agree span for span), plus properties."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tracing.conftest import TRACE, pad, span
from tracing.convert import columns_from_spans
from tracing.fastpath import critical_paths
from tracing.forest import MISSING_ROOT, build_forest
from tracing.graph import VIRTUAL, critical_path
from tracing.model import CriticalPath, Span, SpanKind

CLIENT, SERVER = SpanKind.CLIENT, SpanKind.SERVER
PRODUCER, CONSUMER = SpanKind.PRODUCER, SpanKind.CONSUMER


def fast_self_times(spans: Sequence[Span]) -> tuple[dict[str, int], int, dict[str, int]]:
    """Per span id (VIRTUAL for a virtual root) its self time on the path, the latency and
    the notes, from the fast path."""
    columns, names = columns_from_spans(spans)
    forest = build_forest(columns, names)
    paths = critical_paths(forest)
    times = {}
    for row in range(forest.n_spans):
        if paths.self_us[row]:
            key = VIRTUAL if forest.span_id[row] == 0 else f"{int(forest.span_id[row]):016x}"
            times[key] = int(paths.self_us[row])
    return times, int(paths.latency_us[0]), paths.notes()


def path_of(spans: Sequence[Span]) -> CriticalPath:
    """The reference path, after checking the fast path agrees with it."""
    path = critical_path(spans)
    times, latency, notes = fast_self_times(spans)
    assert latency == path.latency_us
    assert times == {k: v for k, v in path.span_time_us().items() if v}
    assert notes == dict(path.notes)
    assert sum(s.duration_us for s in path.segments) == path.latency_us
    return path


def by_service(path: CriticalPath) -> dict[str, int]:
    return path.service_time_us()


def windows(path: CriticalPath) -> list[tuple[str, int, int]]:
    return [(s.service, s.start_us, s.end_us) for s in path.segments]


def test_sequential_children_each_bound_the_latency_in_turn() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a"),
            span("b", "a", 10, 40, service="b"),
            span("c", "a", 50, 90, service="c"),
        ]
    )
    assert path.latency_us == 100
    assert windows(path) == [
        ("a", 0, 10),
        ("b", 10, 40),
        ("a", 40, 50),
        ("c", 50, 90),
        ("a", 90, 100),
    ]


def test_parallel_fan_out_puts_only_the_slowest_call_on_the_path() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a"),
            span("b", "a", 10, 80, service="b"),
            span("c", "a", 10, 60, service="c"),
            span("d", "a", 12, 30, service="d"),
        ]
    )
    assert by_service(path) == {"a": 30, "b": 70}


def test_overlapping_children_chain_through_the_last_finishing_one() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a"),
            span("b", "a", 10, 50, service="b"),  # overlaps c: off the path
            span("c", "a", 40, 90, service="c"),
            span("d", "a", 5, 30, service="d"),  # ended before c started: on it
        ]
    )
    assert windows(path) == [
        ("a", 0, 5),
        ("d", 5, 30),
        ("a", 30, 40),
        ("c", 40, 90),
        ("a", 90, 100),
    ]


def test_equal_ends_go_to_the_earlier_start() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a"),
            span("b", "a", 30, 80, service="b"),
            span("c", "a", 20, 80, service="c"),
        ]
    )
    assert by_service(path) == {"a": 40, "c": 60}


def test_async_children_finishing_after_the_parent_are_off_the_path() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a", kind=SERVER),
            span("p", "a", 20, 30, service="a", kind=PRODUCER),
            span("c", "p", 50, 200, service="queue-worker", kind=CONSUMER),
            span("f", "a", 90, 300, service="audit", follows_from=True),
        ]
    )
    assert path.latency_us == 100
    assert by_service(path) == {"a": 100}
    assert path.notes["non_blocking"] == 2


def test_a_blocking_child_overflowing_its_parent_is_truncated() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a"),
            span("b", "a", 80, 150, service="b"),  # same host: not skew, truncated
            span("c", "a", 120, 160, service="c"),  # wholly outside: dropped
        ]
    )
    assert windows(path) == [("a", 0, 80), ("b", 80, 100)]
    assert path.notes["truncated"] == 1 and path.notes["dropped"] == 1


def test_clock_skew_between_client_and_server_is_corrected() -> None:
    spans = [
        span("a", None, 0, 100, service="gw", kind=SERVER, host="h1"),
        span("b", "a", 10, 90, service="gw", kind=CLIENT, host="h1"),
        # h2's clock is 480 µs ahead: the server span seems to run after its client.
        span("c", "b", 500, 560, service="acct", kind=SERVER, host="h2"),
        span("d", "c", 510, 550, service="acct", kind=CLIENT, host="h2"),
    ]
    path = path_of(spans)
    assert windows(path) == [
        ("gw", 0, 10),
        ("gw", 10, 20),
        ("acct", 20, 30),
        ("acct", 30, 70),
        ("acct", 70, 80),
        ("gw", 80, 90),
        ("gw", 90, 100),
    ]
    assert path.notes["skew_corrected"] == 1


def test_a_server_span_longer_than_its_client_is_aligned_then_truncated() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="gw", kind=CLIENT, host="h1"),
            span("b", "a", 1000, 1200, service="db", kind=SERVER, host="h2"),
        ]
    )
    assert by_service(path) == {"db": 100}


def test_skew_is_not_assumed_within_one_host() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="gw", kind=CLIENT, host="h1"),
            span("b", "a", 500, 560, service="db", kind=SERVER, host="h1"),
        ]
    )
    assert by_service(path) == {"gw": 100}
    assert path.notes["dropped"] == 1


def test_an_orphan_is_adopted_by_the_root() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a"),
            span("b", "a", 10, 50, service="b"),
            span("c", "lost", 60, 90, service="c"),  # its parent never arrived
        ]
    )
    assert by_service(path) == {"a": 30, "b": 40, "c": 30}
    assert path.notes["orphans_adopted"] == 1


def test_a_trace_without_its_root_gets_a_virtual_one() -> None:
    path = path_of(
        [
            span("b", "lost", 10, 50, service="b"),
            span("c", "gone", 60, 90, service="c"),
        ]
    )
    assert path.latency_us == 80
    assert windows(path) == [("b", 10, 50), (MISSING_ROOT, 50, 60), ("c", 60, 90)]


def test_two_roots_share_a_virtual_root() -> None:
    path = path_of([span("a", None, 0, 30, service="a"), span("b", None, 20, 70, service="b")])
    assert by_service(path) == {"b": 50, MISSING_ROOT: 20}  # a overlaps b: off the path


def test_a_parent_cycle_is_cut_and_its_spans_adopted() -> None:
    path = path_of(
        [
            span("a", None, 0, 100, service="a"),
            span("b", "c", 10, 50, service="b"),
            span("c", "b", 20, 60, service="c"),
        ]
    )
    assert by_service(path) == {"a": 60, "c": 40}
    assert path.notes["cycles_cut"] == 2


def test_a_span_received_twice_counts_once() -> None:
    child = span("b", "a", 10, 40, service="b")
    path = path_of([span("a", None, 0, 100, service="a"), child, child])
    assert by_service(path) == {"a": 70, "b": 30}


def test_zero_length_spans_are_never_on_the_path() -> None:
    path = path_of([span("a", None, 0, 100, service="a"), span("b", "a", 50, 50, service="b")])
    assert by_service(path) == {"a": 100}


def test_a_10000_span_deep_chain() -> None:
    """Span k runs [k, 20000 - k] inside span k - 1: each has 2 µs of self time."""
    spans = [span("n0", None, 0, 20_000, service="s0")]
    spans += [
        span(f"n{k}", f"n{k - 1}", k, 20_000 - k, service=f"s{k % 7}") for k in range(1, 10_000)
    ]
    path = path_of(spans)
    assert path.latency_us == 20_000
    assert len(path.span_time_us()) == 10_000
    assert set(path.span_time_us().values()) == {2}


def test_a_10000_span_wide_fan_out() -> None:
    """9,999 sequential calls of 5 µs each, 10 µs apart: all on the path."""
    spans = [span("root", None, 0, 100_000, service="gw")]
    spans += [span(f"c{i}", "root", i * 10, i * 10 + 5, service="db") for i in range(9_999)]
    path = path_of(spans)
    assert by_service(path) == {"db": 9_999 * 5, "gw": 100_000 - 9_999 * 5}


# --------------------------------------------------------------------------- properties


@st.composite
def well_formed(draw: st.DrawFn) -> list[Span]:
    """A tree whose children lie inside their parents, one host, any kinds."""
    count = draw(st.integers(1, 40))
    spans = [span("s0", None, 0, draw(st.integers(0, 10_000)), service="s0")]
    for i in range(1, count):
        parent = spans[draw(st.integers(0, i - 1))]
        start = draw(st.integers(parent.start_us, parent.end_us))
        end = draw(st.integers(start, parent.end_us))
        kind = draw(st.sampled_from([SpanKind.INTERNAL, CLIENT, SERVER]))
        spans.append(
            span(
                f"s{i}",
                parent.span_id and _short(parent),
                start,
                end,
                service=f"v{i % 5}",
                kind=kind,
            )
        )
    return spans


def _short(s: Span) -> str:
    return bytes.fromhex(s.span_id).lstrip(b"\0").decode()


@given(well_formed())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_path_of_a_well_formed_trace_covers_its_latency_without_gaps(
    spans: list[Span],
) -> None:
    path = path_of(spans)
    root = spans[0]
    assert path.latency_us == root.duration_us
    assert sum(s.duration_us for s in path.segments) == root.duration_us
    cursor = root.start_us
    for segment in path.segments:
        assert segment.start_us == cursor and segment.end_us > segment.start_us
        cursor = segment.end_us
    assert cursor == root.end_us or not path.segments


@st.composite
def messy(draw: st.DrawFn) -> list[Span]:
    """Anything: missing parents, several roots, skewed hosts, async links, overflow."""
    count = draw(st.integers(1, 25))
    ids = [f"m{i}" for i in range(count)]
    spans = []
    for i in range(count):
        parent = draw(st.one_of(st.none(), st.sampled_from([*ids, "lost"])))
        if parent == ids[i]:
            parent = None
        start = draw(st.integers(0, 2_000))
        spans.append(
            span(
                ids[i],
                parent,
                start,
                start + draw(st.integers(0, 1_000)),
                service=draw(st.sampled_from("abc")),
                kind=draw(st.sampled_from(list(SpanKind))),
                host=draw(st.sampled_from(["h1", "h2", ""])),
                follows_from=draw(st.booleans()),
            )
        )
    return spans


@given(messy())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_path_and_networkx_agree_on_any_trace(spans: list[Span]) -> None:
    path_of(spans)  # asserts the agreement and that the path adds up to the latency


def test_many_traces_at_once_match_one_at_a_time() -> None:
    traces = [
        [
            span("a", None, 0, 100, trace=f"{t + 1:032x}"),
            span("b", "a", 10, 10 + t, trace=f"{t + 1:032x}"),
        ]
        for t in range(50)
    ]
    columns, names = columns_from_spans([s for trace in traces for s in trace])
    paths = critical_paths(build_forest(columns, names))
    for index in range(columns.n_traces):
        trace_id = columns.trace_ids[index].tobytes().hex()
        one = critical_path(next(t for t in traces if t[0].trace_id == trace_id))
        rows = range(int(columns.offsets[index]), int(columns.offsets[index + 1]))
        assert sum(int(paths.self_us[r]) for r in rows) == one.latency_us


def test_padding_helper_is_stable() -> None:
    assert pad("a") == span("a", None, 0, 1).span_id
    assert span("a", None, 0, 1).trace_id == TRACE


@pytest.mark.parametrize("kind", [SpanKind.INTERNAL, SERVER])
def test_a_single_span_is_its_own_path(kind: SpanKind) -> None:
    path = path_of([span("a", None, 5, 25, kind=kind)])
    assert windows(path) == [("svc", 5, 25)]
