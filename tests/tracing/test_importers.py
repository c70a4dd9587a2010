"""Importers on samples of each format (written for these tests, shaped like each
tracer's documented output) and on broken copies: strict names file and record in one
line, lenient skips and counts the bad record and keeps the good ones."""

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
    assert len(result.spans) == 4 and result.skipped == {"identical-row": 1}
    trace = by_trace(result.spans)[external_trace_id("T_10000566292")]
    assert {s.container for s in trace} >= {"MS_32255_POD_31", "MS_45753_POD_337"}
    assert critical_path(trace).service_time_us() == {"MS_32255": 3_000, "MS_45753": 4_000}


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
        "Alibaba conflicting rows for one call side",
        lambda d: write(
            d,
            "a.csv",
            (SAMPLES / "alibaba-2021.csv").read_text() + "6,0b0127181591958243219900,1006,0.1.1,"
            "svc-gateway,rpc,svc-user,if-get-user,31\n",
        ),
        r"a\.csv: line 8: duplicate span: a second caller row for rpc id 0\.1\.1",
        "duplicate-span",
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
