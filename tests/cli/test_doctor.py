"""``yarn-adapt doctor``'s checks, each a pure function of what was read: the readings
here are made from answers recorded from the real mini cluster (its node list, a node,
a guard's status) or written out as the edge makes them. Also the edge's own small
parts that need no server (the Date header, resource types, the guard's lock, the
entry services of stored traces) and the command's lines, JSON and exit codes."""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import pytest

from tests.client.rest_faults import recorded_json
from tests.tracing.conftest import span
from tracing.convert import columns_from_spans
from tracing.forest import build_forest
from tracing.model import SpanKind
from yarn_adapt.cli import main
from yarn_adapt.cli.conventions import json_key_problems
from yarn_adapt.doctor import observe as doctor_observe
from yarn_adapt.doctor.checks import (
    check_agents,
    check_clocks,
    check_redis,
    check_rm,
    check_traces,
    diagnose,
    expectations,
)
from yarn_adapt.doctor.model import (
    NOT_ENABLED,
    AgentsReading,
    ClockReading,
    Expectations,
    FileProbe,
    MutationProbe,
    NodeResourceProbe,
    NotProbed,
    Observation,
    RedisReading,
    RmReading,
    Status,
    TracesReading,
    Unprobed,
    Unread,
)
from yarn_adapt.doctor.observe import (
    agents_reading,
    date_clock,
    entry_ends,
    other_resource_types,
    service_url,
    take_guard_lock,
)
from yarn_adapt.model import NodeState, Resources
from yarn_adapt.service.settings import HttpSection, settings_from_mapping
from yarn_adapt.yarn.apply import ApplySettings
from yarn_adapt.yarn.parse import parse_nodes

MB = 1 << 20
NOW = 1_800_000_000.0
NODES = parse_nodes(recorded_json("rm/capacity-nodes.json"), "recorded")  # one RUNNING node
NODE = NODES[0].id
TOTAL = NODES[0].total
EXPECTED = Expectations(
    colocation_enabled=True,
    services=("frontend",),
    stale_after_s=300.0,
    report_within_s=15.0,
    max_clock_ahead_s=5.0,
    memory_budget_mb=256.0,
)


def in_step(source: str) -> ClockReading:
    return ClockReading(source, NOW, NOW + 0.01, NOW, 1.0)


RM = RmReading("http://rm:8088", "ACTIVE", NODES, in_step("RM"))
REDIS = RedisReading("redis://trace-host:6379/0", 3 * MB, 512 * MB, "noeviction", MB // 2,
                     ClockReading("Redis", NOW, NOW + 0.05, NOW + 0.02, 1e-6))  # fmt: skip
TRACES = TracesReading(NOW, 300.0, {"frontend": NOW - 3.0}, frozenset({"pricing"}), NOW - 1.0)
AGENTS = AgentsReading("http://127.0.0.1:8765", {NODE: 2.5}, "recommend")
ALL_OK = Observation(RM, NodeResourceProbe("alice", NODE, TOTAL, 200, after=TOTAL), REDIS,
                     TRACES, AGENTS)  # fmt: skip


# --------------------------------------------------------------------------- clocks


@pytest.mark.parametrize(
    ("sent", "received", "remote", "resolution", "least"),
    [
        (100.0, 100.2, 100.0, 1.0, 0.0),  # the same second
        (100.9, 101.0, 100.0, 1.0, 0.0),  # a Date header truncates: 100 may mean 100.95
        (100.0, 100.2, 107.0, 1.0, 6.8),  # 7 s ahead, less the round trip
        (100.0, 100.2, 90.0, 1.0, -9.0),  # 10 s behind, less the header's second
        (100.0, 100.001, 100.5, 1e-6, 0.499),  # Redis TIME: microseconds
    ],
)
def test_a_clock_reading_allows_for_the_round_trip_and_the_resolution(
    sent: float, received: float, remote: float, resolution: float, least: float
) -> None:
    reading = ClockReading("RM", sent, received, remote, resolution)
    assert reading.least_skew_s() == pytest.approx(least, abs=1e-6)


def test_a_date_header_is_a_clock_reading_of_whole_seconds() -> None:
    reading = date_clock("RM", "Tue, 15 Nov 1994 08:12:31 GMT", 1.0, 2.0)
    assert reading is not None
    assert (reading.remote_s, reading.resolution_s) == (784887151.0, 1.0)
    doubled = date_clock("RM", "Tue, 15 Nov 1994 08:12:31 GMT, Tue, 15 Nov 1994 08:12:32 GMT",
                         1.0, 2.0)  # fmt: skip
    assert doubled is not None and doubled.remote_s == 784887151.0
    assert date_clock("RM", None, 1.0, 2.0) is None
    assert date_clock("RM", "yesterday", 1.0, 2.0) is None


@pytest.mark.parametrize(
    ("rm", "redis", "status", "words"),
    [
        (RM, REDIS, Status.OK, "the RM's clock within 1 s, Redis's clock within 0.03 s (max 5 s)"),
        (replace(RM, clock=ClockReading("RM", NOW, NOW + 0.1, NOW + 9.0, 1.0)), REDIS,
         Status.WRONG, "the RM's clock is at least 8.9 s ahead of this host's (max 5 s"),
        (RM, replace(REDIS, clock=ClockReading("Redis", NOW, NOW, NOW - 60, 1e-6)),
         Status.WRONG, "Redis's clock is at least 1 m behind this host's"),
        (Unread("refused"), REDIS, Status.OK, "; the RM's clock not checked: RM unreachable"),
        (replace(RM, clock=None), REDIS, Status.OK,
         "(max 5 s); the RM's clock not checked: its answer had no Date header"),
        (Unread("refused"), Unread("down"), Status.SKIPPED, "RM unreachable; Redis unreachable"),
    ],
)  # fmt: skip
def test_clocks(
    rm: RmReading | Unread, redis: RedisReading | Unread, status: Status, words: str
) -> None:
    finding = check_clocks(rm, redis, EXPECTED)
    assert finding.status is status
    assert words in finding.summary
    assert ("NTP" in finding.fix) is (status is Status.WRONG)


# --------------------------------------------------------------------------- the RM


@pytest.mark.parametrize(
    ("access", "allowed", "words", "fix"),
    [
        (None, True, "", ""),
        (NodeResourceProbe("alice", NODE, TOTAL, 200, after=TOTAL), True,
         "alice may call updateNodeResource (node localhost:43411's own total 8192 MB / 8 "
         "vcores sent back, overcommit timeout -1: unchanged)", ""),
        (NodeResourceProbe("alice", NODE, TOTAL, 403, "Only admins can carry out this "
                           "operation."), False, "refused updateNodeResource for alice (HTTP 403",
         "make alice a YARN admin (yarn.admin.acl"),
        (NodeResourceProbe("alice", NODE, TOTAL, 500, "Failed to update the node resource "
                           "localhost:43411."), False, "HTTP 500: Failed to update",
         'actuator = "queue-cap"'),
        (NodeResourceProbe("alice", NODE, TOTAL, 401, "Authentication required"), False,
         "did not authenticate alice", "kerberos"),
        (NodeResourceProbe("alice", NODE, TOTAL, 404, "not found"), False, "vanished",
         "run the doctor again"),
        (NodeResourceProbe("alice", NODE, TOTAL, 200, after=Resources(4096, 4)), False,
         "total changed during the check, 8192 MB / 8 vcores -> 4096 MB / 4 vcores",
         "guard status"),
        (NodeResourceProbe("alice", NODE, TOTAL, 200, after=None), False,
         "could not be read afterwards", "yarn node -status"),
        (MutationProbe("alice", "http://rm:8088/ws/v1/cluster/scheduler-conf", 200), True,
         "alice may change the scheduler configuration", ""),
        (MutationProbe("alice", "u", 400, "This API only supports to retrieve scheduler "
                       "configuration from a mutable-conf scheduler"), False, "not mutable",
         "yarn.scheduler.configuration.store.class"),
        (MutationProbe("alice", "u", 403, "Only admins can carry out this operation."), False,
         "refuses the scheduler-conf API to alice", "make alice a YARN admin"),
        (FileProbe("/etc/hadoop/capacity-scheduler.xml"), True, "may rewrite the scheduler "
         "file", ""),
        (FileProbe("/etc/hadoop/capacity-scheduler.xml", "this user may not write it"), False,
         "cannot be rewritten: this user may not write it", 'via = "mutation"'),
        (NotProbed("alice", Unprobed.NO_NODE, "the RM lists no RUNNING node"), False,
         "cannot be told: the RM lists no RUNNING node", "start the NodeManagers"),
        (NotProbed("alice", Unprobed.GUARD_BUSY, "another apply holds it"), False,
         "the guard is changing a node now", "again in a few seconds"),
        (NotProbed("alice", Unprobed.NO_LOCK, "cannot open the guard's lock"), False,
         "cannot open the guard's lock", "as the service's user"),
        (NotProbed("alice", Unprobed.OTHER_RESOURCES, "n:1 has yarn.io/gpu"), False,
         "beyond memory and vcores (n:1 has yarn.io/gpu)", "queue-cap"),
        (Unread("cannot read node n:1: timed out"), False, "cannot be told: cannot read node",
         "run the doctor again"),
    ],
)  # fmt: skip
def test_the_rm_and_the_guards_write(access: object, allowed: bool, words: str, fix: str) -> None:
    finding = check_rm(RM, access)  # type: ignore[arg-type]
    assert finding.status is (Status.OK if allowed else Status.WRONG)
    assert finding.summary.startswith("http://rm:8088 (active)")
    assert words in finding.summary
    assert fix in finding.fix and bool(finding.fix) is not allowed


def test_an_rm_that_cannot_be_reached_says_where_to_look() -> None:
    finding = check_rm(Unread("no ResourceManager answered: http://rm:8088 unreachable"), None)
    assert finding.status is Status.WRONG
    assert finding.line() == (
        "ResourceManager: cannot reach the ResourceManager: no ResourceManager answered: "
        "http://rm:8088 unreachable. Fix: check that [yarn] rm (or yarn-site.xml in "
        "$HADOOP_CONF_DIR) names the RM's web address and that the RM runs"
    )


# --------------------------------------------------------------------------- Redis


@pytest.mark.parametrize(
    ("reading", "problems", "fix"),
    [
        (REDIS, [], ""),
        (replace(REDIS, maxmemory_bytes=0), ["no memory cap"], "set maxmemory above"),
        (replace(REDIS, maxmemory_bytes=200 * MB), ["maxmemory 200 MB is not above "
         "[tracing] memory_budget_mb 256 MB"], "raise maxmemory above 256 MB"),
        (replace(REDIS, policy="allkeys-lru"), ["maxmemory-policy allkeys-lru"],
         "noeviction"),
        (replace(REDIS, used_memory_bytes=480 * MB), ["nearly full (480.0 of 512 MB)"],
         "ingest worker"),
        (replace(REDIS, store_bytes=300 * MB), ["the trace store holds 300.0 MB, above its "
         "budget of 256 MB"], "yarn-adapt-ingest"),
        (replace(REDIS, maxmemory_bytes=0, policy="volatile-lru"),
         ["no memory cap", "volatile-lru"], "noeviction"),
    ],
)  # fmt: skip
def test_redis_memory(reading: RedisReading, problems: list[str], fix: str) -> None:
    finding = check_redis(reading, EXPECTED)
    assert finding.status is (Status.WRONG if problems else Status.OK)
    for problem in problems:
        assert problem in finding.summary
    assert fix in finding.fix
    if not problems:
        assert finding.summary == (
            "redis://trace-host:6379/0: 3.0 MB used of maxmemory 512 MB (noeviction); the "
            "trace store holds 0.5 MB of its 256 MB budget"
        )


def test_redis_that_does_not_answer_says_which_settings_reach_it() -> None:
    finding = check_redis(Unread("redis redis://h:6379/0: Connection refused"), EXPECTED)
    assert finding.status is Status.WRONG
    assert "cannot reach Redis: redis redis://h:6379/0: Connection refused" in finding.summary
    assert "redis_password_file" in finding.fix and "redis_url" in finding.fix


# --------------------------------------------------------------------------- traces


@pytest.mark.parametrize(
    ("services", "redis", "traces", "status", "words", "fix"),
    [
        (("frontend",), REDIS, TRACES, Status.OK,
         "newest trace of frontend 3 s old (stale after 5 m)", ""),
        (("frontend", "checkout"), REDIS, TRACES, Status.WRONG,
         "no trace of checkout in the last 5 m (the store's newest trace of any service "
         "ended 1 s ago)", "does checkout send its spans"),
        (("pricing",), REDIS, TRACES, Status.WRONG,
         "pricing appears only below another service's spans: it is no trace's root",
         "must name the entry service"),
        (("frontend",), REDIS, replace(TRACES, newest_end_s={"frontend": NOW - 400.0}),
         Status.WRONG, "frontend's newest trace is 6 m 40 s old (stale after 5 m)",
         "ingest worker"),
        (("frontend",), REDIS, replace(TRACES, newest_end_s={}, newest_any_end_s=None),
         Status.WRONG, "(the trace store is empty)", "ingest worker"),
        (("frontend",), Unread("down"), None, Status.SKIPPED, "Redis unreachable", ""),
        (("frontend",), REDIS, Unread("reading trace segments: timed out"), Status.WRONG,
         "cannot read the traces", "redis_url"),
        ((), REDIS, TRACES, Status.WRONG, "qos_targets names no latency-critical service",
         "add qos_targets"),
    ],
)  # fmt: skip
def test_traces_per_latency_critical_service(
    services: tuple[str, ...],
    redis: RedisReading | Unread,
    traces: TracesReading | Unread | None,
    status: Status,
    words: str,
    fix: str,
) -> None:
    finding = check_traces(redis, traces, replace(EXPECTED, services=services))
    assert finding.status is status
    assert words in finding.summary
    assert fix in finding.fix


def test_the_entry_services_of_stored_traces_and_their_newest_end() -> None:
    spans = [
        span("a", None, 1_000_000, 1_200_000, service="frontend", kind=SpanKind.SERVER,
             trace="1" * 32),
        span("b", "a", 1_010_000, 1_100_000, service="pricing", trace="1" * 32),
        span("c", None, 5_000_000, 5_300_000, service="frontend", trace="2" * 32),
        span("d", None, 2_000_000, 2_050_000, service="batch-report", trace="3" * 32),
        span("e", "lost", 3_000_000, 3_100_000, service="orphan", trace="4" * 32),
        span("f", "gone", 3_000_000, 3_200_000, service="orphan", trace="4" * 32),
    ]  # fmt: skip
    newest, callees = entry_ends(build_forest(*columns_from_spans(spans)))
    assert newest == {"frontend": 5.3, "batch-report": 2.05}  # seconds
    assert callees == {"pricing", "orphan"}  # orphan: two top spans, a virtual root


# --------------------------------------------------------------------------- agents


def test_the_agents_reports_as_the_service_answers_them() -> None:
    status = {
        "mode": "auto",
        "agents": {
            NODE: {"at_epoch_s": NOW - 2.5, "age_s": 2.5, "lines": ["node at 12:00:00: trusted"]},
            "other:1": {"at_epoch_s": NOW - 90, "age_s": 90, "lines": []},
            "broken:1": None,
        },
    }
    reading = agents_reading("http://svc:8765", status)
    assert reading == AgentsReading("http://svc:8765", {NODE: 2.5, "other:1": 90.0}, "auto")


@pytest.mark.parametrize(
    ("rm", "agents", "status", "words", "fix"),
    [
        (RM, AGENTS, Status.OK, "localhost:43411 reporting, the oldest report 2.5 s old "
         "(within 15 s)", ""),
        (RM, replace(AGENTS, report_ages_s={}), Status.WRONG,
         "no report from localhost:43411 (service http://127.0.0.1:8765, guard recommend)",
         "start the node agent there"),
        (RM, replace(AGENTS, report_ages_s={NODE: 95.0}), Status.WRONG,
         "old reports from localhost:43411 (1 m 35 s ago)", "poll_interval_s"),
        (RM, replace(AGENTS, report_ages_s={"nm-host:8041": 1.0}), Status.WRONG,
         "reports come from nm-host:8041, which the RM does not list as RUNNING", "node_id"),
        (RM, Unread("http://127.0.0.1:8765/api/guard: the service cannot be reached "
                    "(Connection refused)"), Status.WRONG,
         "cannot ask the running service for its agents' reports", "yarn-adapt serve"),
        (replace(RM, nodes=tuple(replace(n, state=NodeState.LOST) for n in NODES)), AGENTS,
         Status.WRONG, "the RM lists no RUNNING NodeManager", "start the NodeManagers"),
        (Unread("refused"), None, Status.SKIPPED, "RM unreachable", ""),
    ],
)  # fmt: skip
def test_every_running_node_has_a_reporting_agent(
    rm: RmReading | Unread, agents: AgentsReading | Unread | None, status: Status, words: str,
    fix: str,
) -> None:  # fmt: skip
    finding = check_agents(rm, agents, EXPECTED)
    assert finding.status is status
    assert words in finding.summary
    assert fix in finding.fix


def test_many_nodes_are_named_a_few_at_a_time() -> None:
    nodes = tuple(replace(NODES[0], id=f"nm-{i:02d}:8041") for i in range(8))
    finding = check_agents(replace(RM, nodes=nodes), replace(AGENTS, report_ages_s={}), EXPECTED)
    assert "no report from nm-00:8041, nm-01:8041, nm-02:8041, nm-03:8041, nm-04:8041 and " \
           "3 more" in finding.summary  # fmt: skip


# --------------------------------------------------------------------------- the whole


def test_all_pieces_ok_in_order() -> None:
    diagnosis = diagnose(ALL_OK, EXPECTED)
    assert diagnosis.ok
    assert [f.piece for f in diagnosis.findings] == ["rm", "redis", "traces", "agents", "clocks"]
    assert [line.split(": ")[:2] for line in diagnosis.lines()] == [
        ["ResourceManager", "ok"], ["Redis", "ok"], ["traces", "ok"], ["node agents", "ok"],
        ["clocks", "ok"],
    ]  # fmt: skip


def test_an_unreachable_rm_skips_what_needs_it() -> None:
    diagnosis = diagnose(replace(ALL_OK, rm=Unread("refused"), access=None, agents=None),
                         EXPECTED)  # fmt: skip
    assert not diagnosis.ok
    by_piece = {f.piece: f for f in diagnosis.findings}
    assert by_piece["rm"].status is Status.WRONG
    assert by_piece["agents"].line() == "node agents: skipped: RM unreachable"
    assert by_piece["redis"].status is Status.OK and by_piece["traces"].status is Status.OK
    assert by_piece["clocks"].status is Status.OK  # Redis's clock was still read


def test_a_stopped_redis_skips_the_traces() -> None:
    diagnosis = diagnose(replace(ALL_OK, redis=Unread("down"), traces=None), EXPECTED)
    lines = diagnosis.lines()
    assert lines[1].startswith("Redis: cannot reach Redis: down. Fix: start Redis")
    redis_said = replace(ALL_OK, redis=Unread("Error 111 connecting. Connection refused."))
    assert "Connection refused. Fix: start Redis" in diagnose(redis_said, EXPECTED).lines()[1]
    assert lines[2] == "traces: skipped: Redis unreachable"
    assert [f.status for f in diagnosis.problems] == [Status.WRONG]


def test_without_the_guard_only_the_rm_is_checked() -> None:
    diagnosis = diagnose(Observation(RM), replace(EXPECTED, colocation_enabled=False))
    assert diagnosis.ok
    assert diagnosis.lines() == [NOT_ENABLED, "ResourceManager: ok: http://rm:8088 (active)"]


def test_expectations_come_from_the_settings() -> None:
    settings = settings_from_mapping({
        "colocation": {"enabled": True, "qos_targets": [" frontend =200", "checkout=90"],
                       "period_s": 4.0, "stale_after_s": 120.0, "actuator": "queue-cap",
                       "batch_queue": "root.batch"},
        "tracing": {"max_clock_ahead_s": 2.0, "memory_budget_mb": 64.0},
    })  # fmt: skip
    assert expectations(settings) == Expectations(
        colocation_enabled=True, actuator="queue-cap", services=("frontend", "checkout"),
        stale_after_s=120.0, report_within_s=12.0, max_clock_ahead_s=2.0,
        memory_budget_mb=64.0,
    )  # fmt: skip


# --------------------------------------------------------------------------- edge parts


def test_resource_types_beyond_memory_and_vcores_are_seen() -> None:
    document = recorded_json("rm/capacity-node.json")
    assert other_resource_types(document) == ()
    assert isinstance(document, dict)
    infos = document["node"]["totalResource"]["resourceInformations"]["resourceInformation"]
    infos.append({"name": "yarn.io/gpu", "value": 2, "units": ""})
    infos.append({"name": "yarn.io/fpga", "value": 0, "units": ""})
    assert other_resource_types(document) == ("yarn.io/gpu",)
    assert other_resource_types({"node": {}}) == ()


def test_the_guards_lock_is_taken_when_a_guard_keeps_its_state_here(tmp_path: Path) -> None:
    assert take_guard_lock(ExitStack(), tmp_path, "alice") is None  # no guard here
    assert not (tmp_path / "guard").exists()  # and nothing made
    (tmp_path / "guard").mkdir()
    with ExitStack() as held:
        assert take_guard_lock(held, tmp_path, "alice") is None
        waits: list[float] = []
        refused = take_guard_lock(ExitStack(), tmp_path, "alice", sleep=waits.append)
        assert isinstance(refused, NotProbed) and refused.reason is Unprobed.GUARD_BUSY
        assert len(waits) == doctor_observe.GUARD_LOCK_TRIES - 1
    with ApplySettings(state_dir=tmp_path / "guard").lock:
        pass  # released: the guard may have it again


@pytest.mark.parametrize(
    ("http", "url"),
    [
        (HttpSection(), "http://127.0.0.1:8765"),
        (HttpSection(host="0.0.0.0", port=9000), "http://127.0.0.1:9000"),
        (HttpSection(host="::1", port=9000), "http://[::1]:9000"),
        (HttpSection(public_url="https://adapt.example:443"), "https://adapt.example:443"),
    ],
)
def test_the_services_address_as_guard_status_finds_it(http: HttpSection, url: str) -> None:
    assert service_url(http) == url


# --------------------------------------------------------------------------- the command


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(
        f'[state]\ndir = "{tmp_path / "state"}"\n[yarn]\nrm = ["http://127.0.0.1:1"]\n'
        '[colocation]\nenabled = true\nqos_targets = ["frontend=100"]\n'
    )
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    ("seen", "code"),
    [(ALL_OK, 0), (replace(ALL_OK, agents=replace(AGENTS, report_ages_s={})), 1)],
)
def test_the_command_prints_a_line_per_piece_and_exits_by_the_verdict(
    seen: Observation, code: int, config: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(doctor_observe, "observe", lambda settings: seen)
    assert main(["doctor", "--config", str(config)]) == code
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 5
    assert ("no report from localhost:43411" in out) is (code == 1)
    assert err == ("" if code == 0 else "yarn-adapt: doctor: 1 of 5 piece(s) not ok\n")
    assert main(["doctor", "--config", str(config), "--json"]) == code
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is (code == 0) and document["colocation_enabled"] is True
    assert [p["status"] for p in document["pieces"]].count("wrong") == code
    assert json_key_problems(document) == []


def test_a_settings_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[colocation]\nenabled = maybe\n")
    assert main(["doctor", "--config", str(bad)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["doctor", "--config", str(tmp_path / "missing.toml")]) == 2


def test_no_rm_address_is_a_settings_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        monkeypatch.delenv(variable, raising=False)
    empty = tmp_path / "empty.toml"
    empty.write_text(f'[state]\ndir = "{tmp_path}"\n')
    assert main(["doctor", "--config", str(empty)]) == 2
    assert "[yarn] rm is empty and HADOOP_CONF_DIR is not set" in capsys.readouterr().err
