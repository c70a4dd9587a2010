"""Importers on samples of each format (written for these tests, shaped like each
tracer's documented output; the ``*-casper-small.csv.gz`` files are real Alibaba
call-graph rows, see samples/README.md) and on broken copies: strict names file and
record in one line and says --lenient would skip it, lenient skips and counts the bad
record and keeps the good ones."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.tracing.conftest import SAMPLES
from tracing.errors import TraceInputError
from tracing.graph import critical_path
from tracing.importers import load_spans
from tracing.importers.common import external_trace_id
from tracing.model import Span, SpanKind, Status


def by_trace(spans: tuple[Span, ...]) -> dict[str, list[Span]]:
    grouped: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        grouped[s.trace_id].append(s)
    return grouped


def test_otlp_sample() -> None:
    result = load_spans(SAMPLES / "otlp.json")
    assert (result.format, result.records, len(result.spans)) == ("otlp", 6, 6)
    spans = {s.span_id: s for s in result.spans}
    root = spans["eee19b7ec3c1b174"]
    assert (root.service, root.kind, root.host, root.start_us) == (
        "frontend",
        SpanKind.SERVER,
        "node-1",
        1_700_000_000_000_000,
    )
    assert root.container == "container_1_0001_01_000002"
    assert spans["eee19b7ec3c1b176"].status is Status.ERROR
    consumer = spans["bbb19b7ec3c1b102"]
    assert consumer.kind is SpanKind.CONSUMER and consumer.follows_from
    assert consumer.parent_id == "bbb19b7ec3c1b101"  # its link in the same trace
    path = critical_path(result.spans)
    assert path.service_time_us() == {"frontend": 28_000, "cart": 26_000, "payment": 46_000}


def test_jaeger_sample() -> None:
    result = load_spans(SAMPLES / "jaeger.json")
    assert result.format == "jaeger" and len(result.spans) == 4
    spans = {s.span_id: s for s in result.spans}
    assert spans["a000000000000001"].trace_id == "00000000000000003f6a2c1e9b7d4a01"
    server = spans["a000000000000003"]
    assert server.status is Status.ERROR and server.host == "node-2"
    assert server.container.startswith("container_e01")
    assert spans["a000000000000004"].follows_from
    assert critical_path(result.spans).service_time_us() == {
        "gateway": 24_000,
        "account-service": 26_000,
    }


def jaeger_trace(suffix: str) -> dict[str, Any]:
    """The sample's one trace, its trace id ending in ``suffix`` instead of 4a01."""
    text = json.dumps(json.loads((SAMPLES / "jaeger.json").read_text())["data"][0])
    trace: dict[str, Any] = json.loads(text.replace("3f6a2c1e9b7d4a01", f"3f6a2c1e9b7d{suffix}"))
    return trace


def test_jaeger_accepts_a_bare_list_of_traces(tmp_path: Path) -> None:
    path = tmp_path / "jaeger-list.json"
    document = [jaeger_trace("4a01"), jaeger_trace("4a02")]
    path.write_text(json.dumps(document))
    result = load_spans(path)  # sniffed, no --format
    assert result.format == "jaeger" and result.traces == 2 and len(result.spans) == 8
    assert result.spans[:4] == load_spans(SAMPLES / "jaeger.json").spans
    assert {s.trace_id[-4:] for s in result.spans[4:]} == {"4a02"}
    del document[1]["spans"][2]["spanID"]
    path.write_text(json.dumps(document))
    with pytest.raises(TraceInputError) as caught:
        load_spans(path)
    assert f"{path}: record 7 ([1].spans[2]): " in caught.value.one_line()
    lenient = load_spans(path, lenient=True)
    assert len(lenient.spans) == 7 and sum(lenient.skipped.values()) == 1


def test_jaeger_accepts_one_trace_object(tmp_path: Path) -> None:
    path = tmp_path / "jaeger-trace.json"
    document = jaeger_trace("4a01")
    path.write_text(json.dumps(document))
    result = load_spans(path)
    assert result.format == "jaeger" and result.traces == 1
    assert result.spans == load_spans(SAMPLES / "jaeger.json").spans
    document["spans"][1]["startTime"] = "soon"
    path.write_text(json.dumps(document))
    with pytest.raises(TraceInputError) as caught:
        load_spans(path)
    assert f"{path}: record 2 (trace.spans[1]): " in caught.value.one_line()
    path.write_text(json.dumps({"traceID": "abc", "processes": {}}))
    with pytest.raises(TraceInputError, match="no data\\[\\] and no spans\\[\\]"):
        load_spans(path, "jaeger")


def test_zipkin_sample_splits_the_shared_rpc_span() -> None:
    result = load_spans(SAMPLES / "zipkin.json")
    assert result.format == "zipkin" and len(result.spans) == 4
    client = next(s for s in result.spans if s.kind is SpanKind.CLIENT and s.service == "frontend")
    server = next(s for s in result.spans if s.service == "backend" and s.kind is SpanKind.SERVER)
    db_call = next(s for s in result.spans if s.operation == "select")
    assert server.parent_id == client.span_id != server.span_id
    assert db_call.parent_id == server.span_id  # children of the shared id follow the server
    assert server.status is Status.ERROR and server.host == "10.0.0.2"
    path = critical_path(result.spans)
    assert path.latency_us == 80_000
    assert path.service_time_us() == {"frontend": 24_000, "backend": 56_000}


def test_alibaba_2021_sample() -> None:
    result = load_spans(SAMPLES / "alibaba-2021.csv")
    assert result.format == "alibaba-2021" and result.traces == 2
    trace = by_trace(result.spans)[external_trace_id("0b0127181591958243219900")]
    kinds = sorted((s.service, s.kind.name) for s in trace)
    assert kinds == [
        ("db-user", "SERVER"),
        ("svc-audit", "CONSUMER"),
        ("svc-gateway", "CLIENT"),
        ("svc-gateway", "SERVER"),
        ("svc-user", "SERVER"),
    ]
    path = critical_path(trace)
    # 0.1 (60 ms) calls 0.1.1 (client 30 ms, server 26 ms, which calls db 12 ms); the
    # message consumed by svc-audit does not block.
    assert path.service_time_us() == {"svc-gateway": 34_000, "svc-user": 14_000, "db-user": 12_000}


def test_alibaba_2022_sample_counts_identical_rows_once() -> None:
    result = load_spans(SAMPLES / "alibaba-2022.csv")
    assert result.format == "alibaba-2022"
    assert len(result.spans) == 4 and result.skipped == {}
    assert result.merged == {"identical-row": 1}
    trace = by_trace(result.spans)[external_trace_id("T_10000566292")]
    assert {s.container for s in trace} >= {"MS_32255_POD_31", "MS_45753_POD_337"}
    assert critical_path(trace).service_time_us() == {"MS_32255": 3_000, "MS_45753": 4_000}


@pytest.mark.parametrize(
    ("sample", "fmt", "traces", "spans", "merged"),
    [
        ("alibaba-2021-casper-small.csv.gz", "alibaba-2021", 17, 943,
         {"identical-row": 24, "caller+callee": 70}),
        ("alibaba-2022-casper-small.csv.gz", "alibaba-2022", 196, 897,
         {"identical-row": 103, "caller+callee": 52}),
    ],
)  # fmt: skip
def test_real_alibaba_samples_import_strictly_with_both_views_merged(
    sample: str, fmt: str, traces: int, spans: int, merged: dict[str, int]
) -> None:
    result = load_spans(SAMPLES / sample)  # strict: one refused row would raise
    assert (result.format, result.traces, len(result.spans)) == (fmt, traces, spans)
    assert result.skipped == {} and result.merged == merged
    rows = len(gzip.decompress((SAMPLES / sample).read_bytes()).decode().splitlines()) - 1
    assert result.records == rows - merged["identical-row"]  # every other row is a span
    for trace in by_trace(result.spans).values():
        ids = {s.span_id for s in trace}
        assert len(ids) == len(trace)
        assert all(s.parent_id is None or s.parent_id in ids for s in trace)
        assert critical_path(trace).latency_us >= 0


HEADER_2021 = "traceid,timestamp,rpcid,um,rpctype,dm,interface,rt\n"
HEADER_2022 = (
    "timestamp,traceid,service,rpc_id,rpctype,um,uminstanceid,interface,dm,dminstanceid,rt\n"
)


def alibaba(tmp_path: Path, header: str, rows: list[str]) -> list[Span]:
    result = load_spans(write(tmp_path, "calls.csv", header + "\n".join(rows) + "\n"))
    return sorted(result.spans, key=lambda s: (s.start_us, -s.end_us, s.kind))


def test_alibaba_2021_zero_rt_is_the_missing_side_and_an_unknown_dm_is_filled(
    tmp_path: Path,
) -> None:
    spans = alibaba(
        tmp_path,
        HEADER_2021,
        [
            "t1,100,0.1,(?),http,gw,login,-40",
            "t1,105,0.1.1,gw,rpc,(?),get,20",  # the caller did not know its callee
            "t1,106,0.1.1,gw,rpc,user,get,0",  # the callee's -0 ms
        ],
    )
    gateway, client, server = spans
    assert (client.service, client.kind, server.service, server.kind) == (
        "gw", SpanKind.CLIENT, "user", SpanKind.SERVER,
    )  # fmt: skip
    assert server.parent_id == client.span_id and client.parent_id == gateway.span_id
    assert (server.start_us, server.end_us) == (106_000, 106_000)


def test_alibaba_one_view_calls_sharing_an_rpc_id_are_each_a_call(tmp_path: Path) -> None:
    spans = alibaba(
        tmp_path,
        HEADER_2021,
        [
            "t1,100,0.1,(?),http,gw,login,-40",
            "t1,101,0.1.1,gw,mc,cache-a,,2",
            "t1,101,0.1.1,gw,mc,cache-b,,3",
            "t1,104,0.1.1,gw,rpc,user,get,10",
            "t1,105,0.1.1,gw,rpc,user,get,-8",
            "t1,106,0.1.1.1,user,db,users,,5",
        ],
    )
    by_service = {s.service: s for s in spans if s.kind is not SpanKind.CLIENT}
    gateway = by_service["gw"]
    assert {s.service for s in spans if s.parent_id == gateway.span_id} == {
        "cache-a",
        "cache-b",
        "gw",
    }  # fmt: skip  (the gateway's CLIENT span of the user call)
    # the db call hangs from the call at 0.1.1 whose DM is its UM (user), not a cache
    assert by_service["users"].parent_id == by_service["user"].span_id
    assert len({s.span_id for s in spans}) == len(spans) == 6


def test_alibaba_2022_both_views_positive_the_earlier_longer_one_is_the_caller(
    tmp_path: Path,
) -> None:
    spans = alibaba(
        tmp_path,
        HEADER_2022,
        [
            "1000,T_1,S_1,0,http,USER,USER,home,MS_1,MS_1_POD_1,20.0",
            "1004,T_1,S_1,0.1,rpc,MS_1,MS_1_POD_1,get,MS_2,MS_2_POD_7,6.0",
            "1002,T_1,S_1,0.1,rpc,MS_1,MS_1_POD_1,fetch,MS_2,MS_2_POD_7,9.0",
            "1005,T_1,S_1,0.1.1,rpc,MS_2,MS_2_POD_7,put,MS_3,MS_3_POD_1,1.0",
        ],
    )
    root, client, server, leaf = spans
    assert (client.kind, client.service, client.start_us, client.end_us) == (
        SpanKind.CLIENT, "MS_1", 1_002_000, 1_011_000,
    )  # fmt: skip
    assert (server.kind, server.service, server.container) == (
        SpanKind.SERVER,
        "MS_2",
        "MS_2_POD_7",
    )
    assert (server.parent_id, client.parent_id) == (client.span_id, root.span_id)
    assert leaf.parent_id == server.span_id
    path = critical_path([root, client, server, leaf])
    assert path.service_time_us() == {"MS_1": 14_000, "MS_2": 5_000, "MS_3": 1_000}


def test_alibaba_a_second_caller_row_is_a_second_call_not_an_error(tmp_path: Path) -> None:
    rows = (SAMPLES / "alibaba-2021.csv").read_text().splitlines()[1:]
    spans = alibaba(
        tmp_path,
        (SAMPLES / "alibaba-2021.csv").read_text().splitlines()[0] + "\n",
        [*rows, "6,0b0127181591958243219900,1006,0.1.1,svc-gateway,rpc,svc-user,if-get-user,31"],
    )
    user_calls = [s for s in spans if s.operation == "if-get-user"]
    assert sorted(s.kind.name for s in user_calls) == ["CLIENT", "SERVER", "SERVER"]
    assert len({s.span_id for s in spans}) == len(spans) == 7


# --------------------------------------------------------------------------- malformed


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def jaeger(spans: list[dict[str, Any]]) -> str:
    return json.dumps(
        {
            "data": [
                {
                    "traceID": "ab",
                    "spans": spans,
                    "processes": {"p": {"serviceName": "s", "tags": []}},
                }
            ]
        }
    )


def jspan(
    span_id: str, parent: str | None = None, start: int = 0, duration: int = 10, name: str = "op"
) -> dict[str, Any]:
    refs = [{"refType": "CHILD_OF", "traceID": "ab", "spanID": parent}] if parent else []
    return {
        "traceID": "ab",
        "spanID": span_id,
        "operationName": name,
        "references": refs,
        "startTime": start,
        "duration": duration,
        "tags": [],
        "processID": "p",
    }


GOOD = [jspan("1", None, 0, 100), jspan("2", "1", 10, 20)]
ZIPKIN = json.loads((SAMPLES / "zipkin.json").read_text())
Case = tuple[str, Callable[[Path], Path], str, str]

CASES: list[Case] = [
    (
        "wrong schema",
        lambda d: write(d, "j.json", jaeger([*GOOD, {**jspan("3", "1"), "startTime": "soon"}])),
        r"j\.json: record 3 \(data\[0\]\.spans\[2\]\): startTime must be an integer",
        "schema",
    ),
    (
        "end before start",
        lambda d: write(d, "j.json", jaeger([*GOOD, jspan("3", "1", 50, -5)])),
        r"j\.json: record 3 .*ends before it starts",
        "end-before-start",
    ),
    (
        "duplicate span ids",
        lambda d: write(d, "j.json", jaeger([*GOOD, jspan("2", "1", 30, 5)])),
        r"j\.json: record 3 .*duplicate span id 0000000000000002 .*first at record 2",
        "duplicate-span",
    ),
    (
        "parent cycle",
        lambda d: write(d, "j.json", jaeger([*GOOD, jspan("3", "4"), jspan("4", "3")])),
        r"j\.json: record [34] .*on a cycle of parent links",
        "parent-cycle",
    ),
    (
        "non-UTF-8 name",
        lambda d: write(
            d,
            "j.json",
            jaeger([*GOOD, jspan("3", "1", name="NAME")]).encode().replace(b"NAME", b"caf\xe9"),
        ),
        r"j\.json: record 3 .*operationName is not UTF-8",
        "not-utf8",
    ),
    (
        "OTLP document without resourceSpans",
        lambda d: write(
            d,
            "o.jsonl",
            (SAMPLES / "otlp.json").read_text().replace("\n", "") + "\n" + '{"resource": {}}\n',
        ),
        r"o\.jsonl: line 2 record 7: not an ExportTraceServiceRequest",
        "schema",
    ),
    (
        "JSON Lines with a broken line",
        lambda d: write(
            d,
            "o.jsonl",
            (SAMPLES / "otlp.json").read_text().replace("\n", "") + "\n" + '{"resourceSpans": [\n',
        ),
        r"o\.jsonl: line 2: invalid JSON",
        "invalid-json",
    ),
    (
        "OTLP end before start",
        lambda d: write(
            d,
            "o.json",
            (SAMPLES / "otlp.json")
            .read_text()
            .replace('"1700000000040000000"', '"1700000000000000000"'),
        ),
        r"o\.json: record 2 \(resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[1\]\): .*ends before",
        "end-before-start",
    ),
    (
        "Zipkin duplicate span id",
        lambda d: write(d, "z.json", json.dumps([*ZIPKIN, {**ZIPKIN[3], "name": "again"}])),
        r"z\.json: record 5 \(\[4\]\): duplicate span id 5e2f11d1ec0121ec",
        "duplicate-span",
    ),
    (
        "Alibaba row with a broken rt",
        lambda d: write(
            d, "a.csv", (SAMPLES / "alibaba-2021.csv").read_text() + "6,tx,10,0.1,a,rpc,b,i,fast\n"
        ),
        r"a\.csv: line 8: rt 'fast' is not a number",
        "malformed",
    ),
    (
        "Alibaba rpc id that is not dotted numbers",
        lambda d: write(
            d,
            "a.csv",
            (SAMPLES / "alibaba-2021.csv").read_text() + "6,0b0127181591958243219900,1006,0.x,"
            "svc-gateway,rpc,svc-user,if-get-user,31\n",
        ),
        r"a\.csv: line 8: rpc id '0\.x' is not dotted numbers",
        "malformed",
    ),
    (
        "Alibaba non-UTF-8 row",
        lambda d: write(
            d,
            "a.csv",
            (SAMPLES / "alibaba-2021.csv").read_bytes() + b"6,tx,10,0.1,a,rpc,b\xff,i,-3\n",
        ),
        r"a\.csv: line 8: dm is not UTF-8",
        "not-utf8",
    ),
]


@pytest.mark.parametrize(("name", "make", "message", "reason"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_record_is_one_line_naming_file_and_record(
    tmp_path: Path, name: str, make: Callable[[Path], Path], message: str, reason: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(TraceInputError) as caught:
        load_spans(path)
    text = caught.value.one_line()
    assert str(path) in text and "\n" not in str(caught.value)
    assert caught.value.where  # a record or line is named
    assert re.search(message, text), text
    assert text.endswith("(--lenient skips such records)")


@pytest.mark.parametrize(("name", "make", "message", "reason"), CASES, ids=[c[0] for c in CASES])
def test_lenient_skips_and_counts_the_bad_record_and_keeps_the_good(
    tmp_path: Path, name: str, make: Callable[[Path], Path], message: str, reason: str
) -> None:
    path = make(tmp_path)
    result = load_spans(path, lenient=True)
    assert result.skipped.get(reason, 0) >= 1
    good = {"j.json": 2, "o.jsonl": 6, "o.json": 5, "z.json": 4, "a.csv": 6}[path.name]
    assert len(result.spans) == good


def test_a_file_that_is_not_json_fails_even_when_lenient(tmp_path: Path) -> None:
    path = write(tmp_path, "t.json", '{"data": [ {"traceID": ')
    for lenient in (False, True):
        with pytest.raises(TraceInputError, match=r"t\.json: line 1 column \d+: invalid JSON"):
            load_spans(path, "jaeger", lenient=lenient)


def test_unknown_formats_and_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(TraceInputError, match=r"nope\.json: cannot read"):
        load_spans(tmp_path / "nope.json")
    path = write(tmp_path, "x.txt", "hello\n")
    with pytest.raises(TraceInputError, match=r"x\.txt: cannot tell the format"):
        load_spans(path)
    with pytest.raises(TraceInputError, match=r"header is not an alibaba-2022"):
        load_spans(SAMPLES / "alibaba-2021.csv", "alibaba-2022")


def test_gzip_files_are_read(tmp_path: Path) -> None:
    path = tmp_path / "z.json.gz"
    path.write_bytes(gzip.compress((SAMPLES / "zipkin.json").read_bytes()))
    assert len(load_spans(path).spans) == 4
