"""Reclaim targets from the service over HTTP (token-guarded), and bad answers: each is
a clear one-line problem, counted, and the last valid target is kept until it expires.

The service side of this contract is served by the co-location guard (a later issue);
here a real HTTP server on 127.0.0.1 answers with the bodies under test."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from preemption.agent import Agent, AgentParts
from preemption.cgroups import V2Backend
from preemption.errors import ReclaimRequestError
from preemption.metrics import AgentMetrics
from preemption.model import Amount
from preemption.settings import agent_settings_from_mapping
from preemption.statefile import StateJournal
from preemption.targets import ServiceTarget, parse_reclaim

from .factories import ListedBy

NODE = "worker-7:8041"
TOKEN = "s3cret-token-for-tests"
GOOD = {
    "node": NODE,
    "generation": 17,
    "reclaim": {"cpu_millicores": 1500, "memory_mb": 256},
    "ttl_s": 30,
    "qos": {"service": "mongo", "satisfied": False, "latency_ms": 180.0, "target_ms": 100.0,
            "load": 2450.0, "measured_at": 1000.0},
}  # fmt: skip


@dataclass
class Answers:
    status: int = 200
    body: str = json.dumps(GOOD)
    seen_paths: list[str] = field(default_factory=list)
    seen_tokens: list[str] = field(default_factory=list)
    reports: list[object] = field(default_factory=list)  # the agent's POSTed reports
    report_status: int = 204


@pytest.fixture
def service() -> Iterator[tuple[str, Answers]]:
    answers = Answers()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answers.seen_paths.append(self.path)
            answers.seen_tokens.append(self.headers.get("Authorization", ""))
            status = answers.status
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                status = 401
            payload = answers.body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            answers.reports.append(json.loads(self.rfile.read(length)))
            self.send_response(answers.report_status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", answers
    server.shutdown()
    server.server_close()
    thread.join()


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def source(url: str, clock: Clock, token: str = TOKEN) -> ServiceTarget:
    return ServiceTarget(url, NODE, token, poll_interval_s=0.0, ttl_s=60.0, clock=clock)


def test_a_valid_answer_becomes_the_target_and_the_token_is_sent(
    service: tuple[str, Answers],
) -> None:
    url, answers = service
    fetched = source(url, Clock()).current()
    assert fetched.problem is None
    assert fetched.target.reclaim == Amount(1500, 256)
    assert fetched.target.generation == 17
    assert fetched.target.qos.satisfied is False and fetched.target.qos.load == 2450.0
    assert fetched.target.expires_at_s == 1030.0
    assert answers.seen_paths == ["/api/agent/nodes/worker-7%3A8041/reclaim"]
    assert answers.seen_tokens == [f"Bearer {TOKEN}"]


def test_404_means_nothing_is_asked_of_this_node(service: tuple[str, Answers]) -> None:
    url, answers = service
    answers.status = 404
    assert source(url, Clock()).current().target.reclaim == Amount(0, 0)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("{not json", "body is not JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        (json.dumps({**GOOD, "node": "other:1"}), "answer is for node 'other:1'"),
        (json.dumps({**GOOD, "generation": -1}), "generation: expected an integer >= 0"),
        (json.dumps({**GOOD, "reclaim": {"cpu_millicores": -5}}), "cpu_millicores: out of range"),
        (json.dumps({**GOOD, "reclaim": {"cpu": 5}}), "unknown keys ['cpu']"),
        (json.dumps({**GOOD, "reclaim": {"cpu_millicores": "lots"}}), "expected a number"),
        ('{"node": "worker-7:8041", "generation": 1, "reclaim": {"cpu_millicores": NaN}}',
         "out of range: nan"),
        (json.dumps({**GOOD, "ttl_s": 0}), "ttl_s: out of range"),
        (json.dumps({**GOOD, "qos": {"satisfied": "no"}}), "satisfied: expected true/false"),
        (json.dumps({**GOOD, "extra": 1}), "unknown keys ['extra']"),
    ],
)  # fmt: skip
def test_a_malformed_answer_is_one_clear_problem_and_the_last_target_stays(
    service: tuple[str, Answers], body: str, problem: str
) -> None:
    url, answers = service
    clock = Clock()
    target = source(url, clock)
    assert target.current().target.reclaim == Amount(1500, 256)
    answers.body = body
    clock.now += 5
    fetched = target.current()
    assert fetched.problem_kind == "malformed"
    assert problem in (fetched.problem or "")
    assert "\n" not in (fetched.problem or "")
    assert fetched.target.reclaim == Amount(1500, 256)  # the last valid one, until it expires
    clock.now += 60
    assert target.current().target.expired(clock.now)


def test_an_unreachable_service_or_a_refused_token_is_counted_as_unreachable(
    service: tuple[str, Answers],
) -> None:
    url, _ = service
    refused = source(url, Clock(), token="wrong").current()
    assert refused.problem_kind == "unreachable" and "HTTP 401" in (refused.problem or "")
    gone = source("http://127.0.0.1:9", Clock()).current()
    assert gone.problem_kind == "unreachable" and "ConnectionError" in (gone.problem or "")
    assert gone.target.reclaim == Amount(0, 0)


def test_polling_waits_for_the_poll_interval(service: tuple[str, Answers]) -> None:
    url, answers = service
    clock = Clock()
    target = ServiceTarget(url, NODE, TOKEN, poll_interval_s=5.0, clock=clock)
    target.current()
    clock.now += 1
    target.current()
    clock.now += 5
    target.current()
    assert len(answers.seen_paths) == 2


def test_the_token_is_never_shown() -> None:
    assert TOKEN not in repr(ServiceTarget("http://x", NODE, TOKEN))


def service_agent(url: str, tmp_path: Path) -> Agent:
    """An agent in service mode polling ``url`` every tick, on a v2 tree in ``tmp_path``."""
    settings = agent_settings_from_mapping(
        {"agent": {"mode": "service", "node_id": NODE, "state_file": str(tmp_path / "s.json")},
         "service": {"url": url, "poll_interval_s": 0.0},
         "discovery": {"source": "cgroup", "cgroup_version": "v2",
                       "cgroup_root": str(tmp_path)}},
    )  # fmt: skip
    backend = V2Backend(tmp_path)
    parts = AgentParts(
        backend=backend,
        journal=StateJournal.open(tmp_path / "s.json", backend.describe()),
        target=ServiceTarget(url, NODE, TOKEN, poll_interval_s=0.0),
        nodemanager=ListedBy(os.getpid()),
        metrics=AgentMetrics(),
    )
    return Agent(settings, parts)


def test_the_agent_counts_bad_answers_and_keeps_running(
    service: tuple[str, Answers], tmp_path: Path
) -> None:
    url, answers = service
    agent = service_agent(url, tmp_path)
    answers.body = "{broken"
    for _ in range(3):
        agent.tick()
    assert agent.metrics.value("yarn_adapt_agent_request_errors_total", kind="malformed") == 3


def test_parse_reclaim_rejects_a_non_object_qos() -> None:
    with pytest.raises(ReclaimRequestError, match="qos: expected an object"):
        parse_reclaim(
            {**GOOD, "qos": [1]}, node=NODE, where="x", received_at_s=0.0, default_ttl_s=60.0
        )


@pytest.mark.parametrize("with_qos", [True, False])
def test_what_the_co_location_guard_serves_is_what_the_agent_reads(with_qos: bool) -> None:
    # The service's own code builds the answer (yarn_adapt/colocation/guard.py).
    from yarn_adapt.colocation.guard import ReclaimRequest
    from yarn_adapt.colocation.model import QosReading

    qos = QosReading("frontend", 182.4567, 95.0, 1200, 410.5, (NODE,), 999.0, target_ms=100.0)
    served = ReclaimRequest(NODE, 4, 1500, 256, 90.0, 998.0, qos if with_qos else None)
    wire = json.loads(json.dumps(served.to_json()))
    target = parse_reclaim(wire, node=NODE, where="guard", received_at_s=1000.0, default_ttl_s=5)
    assert target.reclaim == Amount(1500, 256)
    assert target.generation == 4 and target.expires_at_s == 1090.0
    if with_qos:
        assert target.qos.service == "frontend" and target.qos.satisfied is False
        assert target.qos.latency_ms == pytest.approx(182.457)
        assert (target.qos.load, target.qos.target_ms) == (410.5, 100.0)
    else:
        assert target.qos.satisfied is None


def test_the_agent_reports_what_it_does_with_its_next_poll(
    service: tuple[str, Answers], tmp_path: Path
) -> None:
    url, answers = service
    agent = service_agent(url, tmp_path)
    agent.tick()
    assert answers.reports == []  # the first poll comes before there is anything to say
    agent.tick()
    [report] = answers.reports
    assert isinstance(report, dict)
    assert report["lines"][0].startswith(f"node {NODE} at ")
    answers.report_status = 404  # a service that does not know the route: the poll goes on
    agent.tick()
    assert agent.last_report is not None and len(answers.reports) == 2
    assert agent.metrics.value("yarn_adapt_agent_request_errors_total", kind="unreachable") == 0


def test_a_report_is_cut_to_its_bounds(service: tuple[str, Answers]) -> None:
    url, answers = service
    target = source(url, Clock())
    target.report([f"line {n} " + "x" * 400 for n in range(20)])
    target.current()
    [report] = answers.reports
    assert isinstance(report, dict)
    assert len(report["lines"]) == 12 and all(len(line) == 300 for line in report["lines"])
