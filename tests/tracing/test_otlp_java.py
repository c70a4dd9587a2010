"""The OpenTelemetry Java SDK against the OTLP/HTTP receiver on a port, a real
redis-server behind it: a Java program (tests/tracing/java, compiled here with javac
against the SDK's jars from Maven Central) sends the call tree of
:mod:`tests.tracing.test_otlp_exporters` as four services would, one
``SdkTracerProvider`` and ``OtlpHttpSpanExporter`` each (gzip, so chunked bodies), with
a bearer token; the ingest worker stores the spans and ``yarn-adapt trace
critical-path`` / ``trace risk`` find the path and the risk worked out by hand. A wrong
token is refused and stores nothing.

The jars are resolved once into ~/.cache/yarn-adapt (tests/setup.sh does it too); with
``CI=true`` a missing JDK or Maven fails these tests, elsewhere they are skipped."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.tracing.conftest import unavailable
from tests.tracing.test_otlp_exporters import TRACES, TREE, check_paths_and_risk, ingested
from tracing.receiver import OtlpReceiver, ReceiverConfig, ReceiverServer, Reply
from tracing.redisconn import Keys, RedisConfig
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.jars import find_java_home, resolve_maven_jars
from yarn_adapt.minicluster.javacmd import FAST_START

pytestmark = pytest.mark.slow  # a JVM per test, javac once

PROJECT = Path(__file__).resolve().parent / "java"
SOURCE = PROJECT / "src/main/java/io/github/yarnadapt/otlp/OtlpCallTree.java"
MAIN_CLASS = "io.github.yarnadapt.otlp.OtlpCallTree"
TOKEN = "s3cret"
EXPORT_FAILED = 3  # OtlpCallTree's exit status when an export failed


@dataclass(frozen=True)
class JavaProgram:
    java: Path
    classpath: str

    def run(self, url: str, token: str, lines: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.java), "-Xmx128m", *FAST_START, "-cp", self.classpath, MAIN_CLASS]
        return subprocess.run(
            [*command, url, token], input=lines, capture_output=True, text=True, timeout=180
        )


@pytest.fixture(scope="module")
def java_program(tmp_path_factory: pytest.TempPathFactory) -> JavaProgram:
    """OtlpCallTree compiled against the SDK's jars (resolved with Maven once)."""
    try:
        java_home = find_java_home()
        lib_dir = resolve_maven_jars(PROJECT / "pom.xml")
    except MiniClusterError as exc:
        unavailable(f"the OpenTelemetry Java SDK cannot be had: {exc.one_line()}")
        raise
    javac = java_home / "bin" / "javac"
    if not javac.is_file():
        unavailable(f"{java_home} is a JRE without javac (tests/setup.sh installs a JDK)")
    classes = tmp_path_factory.mktemp("otlp-java")
    classpath = f"{lib_dir}/*"
    compiled = subprocess.run(
        [str(javac), "-d", str(classes), "-cp", classpath, str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compiled.returncode == 0, compiled.stderr
    return JavaProgram(java_home / "bin" / "java", f"{classes}:{classpath}")


class HeadersSeen(OtlpReceiver):
    """The receiver, noting the headers of every request it answers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.headers: list[dict[str, str]] = []

    def before_body(self, method: str, path: str, headers: Mapping[str, str]) -> Reply | None:
        self.headers.append(dict(headers))
        return super().before_body(method, path, headers)


@pytest.fixture
def server(client: redis.Redis, store_config: RedisConfig) -> Iterator[ReceiverServer]:
    """A receiver on 127.0.0.1, a free port, that wants TOKEN."""
    config = ReceiverConfig(host="127.0.0.1", port=0, token=TOKEN)
    receiver = HeadersSeen(client, Keys(store_config.prefix).stream, config)
    started = ReceiverServer(receiver).start()
    yield started
    started.stop()


def program_input(first_ns: int) -> str:
    """TREE and TRACES requests a second apart, the second one's db failing, as
    OtlpCallTree reads them."""
    spans = [
        f"span\t{name}\t{service}\t{host}\t{kind.name}\t{start}\t{end}\t{parent or '-'}\t{op}"
        for name, (service, host, op, kind, start, end, parent) in TREE.items()
    ]
    requests = [
        f"request\t{first_ns + n * 1_000_000_000}\t{'db' if n == 1 else '-'}" for n in range(TRACES)
    ]
    return "\n".join([*spans, *requests]) + "\n"


def five_minutes_ago_ns() -> int:
    return (time.time_ns() // 1000 - 300_000_000) * 1000  # whole µs


def test_a_call_tree_exported_by_the_java_sdk_gives_the_critical_path_and_risk(
    java_program: JavaProgram,
    server: ReceiverServer,
    client: redis.Redis,
    store_config: RedisConfig,
    settings_file: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first_ns = five_minutes_ago_ns()
    done = java_program.run(server.url, TOKEN, program_input(first_ns))
    assert done.returncode == 0, done.stderr
    trace_ids = done.stdout.split()
    assert len(trace_ids) == TRACES and len(set(trace_ids)) == TRACES, done.stdout

    receiver = server.receiver
    assert isinstance(receiver, HeadersSeen)
    stats = receiver.stats()
    assert set(stats.answers) == {200} and stats.spans_accepted == TRACES * len(TREE)
    # what the Java exporter sends: gzip, streamed chunked, protobuf, the token
    assert receiver.headers and all(
        (h["content-type"], h.get("content-encoding"), h.get("transfer-encoding"))
        == ("application/x-protobuf", "gzip", "chunked")
        and "content-length" not in h
        and h["authorization"] == f"Bearer {TOKEN}"
        for h in receiver.headers
    ), receiver.headers
    assert len(ingested(client, store_config)) == TRACES * len(TREE)

    check_paths_and_risk(capsys, settings_file, trace_ids, first_ns)


def test_the_java_exporter_with_a_wrong_token_is_refused_and_nothing_is_stored(
    java_program: JavaProgram,
    server: ReceiverServer,
    client: redis.Redis,
    store_config: RedisConfig,
) -> None:
    done = java_program.run(server.url, "not-the-token", program_input(five_minutes_ago_ns()))
    assert done.returncode == EXPORT_FAILED, done.stderr
    assert "401" in done.stderr  # the exporter's log says why
    stats = server.receiver.stats()
    assert set(stats.answers) == {401} and stats.spans_accepted == 0
    assert stats.answers[401] >= 4  # each service's exporter tried (401: not retried)
    assert ingested(client, store_config) == []
