"""The guard on its own clock: the shared node cache and its age, the loop's cadence,
health and error budget (an RM that cannot be read -- a real client against a closed
port -- gives every node back after ``failure_budget`` cycles and keeps trying),
reclaim requests that expire on the guard's clock, what the loop records, and the
per-node allowance the tuner reads."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.colocation.factories import NOW_S, qos, risk
from tests.colocation.test_edges import (
    PAPER,
    WHOLE,
    FixedRisk,
    NoDemands,
    RecordingActuator,
    rm_node,
)
from yarn_adapt.colocation.guard import ColocationGuard, MemoryRecorder
from yarn_adapt.colocation.model import GuardMode, GuardSettings, RiskReading
from yarn_adapt.colocation.nodes import NodeCache
from yarn_adapt.colocation.observe import GuardObserver
from yarn_adapt.errors import InputError, YarnUnavailable
from yarn_adapt.model import Node, Resources
from yarn_adapt.service.guard.loop import GuardLoop
from yarn_adapt.service.guard.metrics import GuardCollector
from yarn_adapt.service.guard.records import GuardStore
from yarn_adapt.service.guard.step import GuardStep, parse_agent_report
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

FLOOR = Resources(1024, 1)


class Clock:
    def __init__(self, at_s: float = NOW_S) -> None:
        self.at_s = at_s

    def __call__(self) -> float:
        return self.at_s


class RmThatGoesAway:
    """The node list from a stand-in while ``up``; else from a real RM client whose
    address refuses connections (the fault: an RM that cannot be read)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(nodes)
        self.up = True
        self.dead = ResourceManagerClient(
            ["http://127.0.0.1:1"], HttpSettings(read_timeout_s=2.0, retries=0)
        )

    def __call__(self) -> tuple[Node, ...]:
        return self.nodes if self.up else self.dead.nodes()


def _guard(clock: Clock, settings: GuardSettings = PAPER, **kw: object) -> ColocationGuard:
    observer = GuardObserver(FixedRisk(RiskReading(risk({"a:1": 1.0}))), NoDemands(),
                             clock=clock)  # fmt: skip
    return ColocationGuard(settings, observer, RecordingActuator(), MemoryRecorder(),
                           mode=GuardMode.AUTO, clock=clock, **kw)  # type: ignore[arg-type]  # fmt: skip


# --------------------------------------------------------------------------- node cache


def test_the_node_cache_reads_the_rm_at_most_once_a_period_and_says_how_old() -> None:
    clock = Clock()
    rm = RmThatGoesAway([rm_node("a:1")])
    cache = NodeCache(rm, max_age_s=5.0, clock=clock)
    first = cache.read()
    clock.at_s += 4.0
    assert cache.read() is first and cache.reads == 1  # the guard and the configurator share it
    assert first.age_s(clock()) == pytest.approx(4.0)
    clock.at_s += 1.0
    assert cache.read() is not first and cache.reads == 2
    rm.up = False
    clock.at_s += 10.0
    with pytest.raises(YarnUnavailable):
        cache.read()
    latest = cache.latest()
    assert latest is not None and latest.age_s(clock()) == pytest.approx(10.0)  # kept, aged


def test_a_list_read_before_a_change_is_never_handed_to_the_one_who_changed() -> None:
    clock = Clock()
    cache = NodeCache(RmThatGoesAway([rm_node("a:1")]), max_age_s=60.0, clock=clock)
    first = cache.read()
    clock.at_s += 1.0
    assert cache.read(newer_than_s=first.read_at_s - 1.0) is first
    assert cache.read(newer_than_s=first.read_at_s) is not first  # changed as it was read


def test_the_loop_rereads_the_nodes_after_the_guard_changed_one() -> None:
    clock = Clock()
    rm = RmThatGoesAway([rm_node("a:1")])
    cache = NodeCache(rm, max_age_s=60.0, clock=clock)
    guard = _guard(clock)
    guard.set_mode(GuardMode.RECOMMEND, "test")
    loop = GuardLoop(guard, cache, period_s=5.0, failure_budget=3, clock=clock)
    for _ in range(3):  # deciding without acting: the cached list serves
        loop.run_cycle()
        clock.at_s += 1.0
    assert cache.reads == 1
    guard.set_mode(GuardMode.AUTO, "test")
    loop.run_cycle()  # acts on a:1
    clock.at_s += 1.0
    loop.run_cycle()  # must see what the RM reports after that change
    assert cache.reads == 2


# --------------------------------------------------------------------------- the loop


def test_after_the_failure_budget_every_node_is_given_back_and_the_loop_keeps_trying() -> None:
    clock = Clock()
    guard = _guard(clock)
    actuator = guard.actuator
    assert isinstance(actuator, RecordingActuator)
    rm = RmThatGoesAway([rm_node("a:1")])
    loop = GuardLoop(guard, NodeCache(rm, max_age_s=1.0, clock=clock), period_s=1.0,
                     failure_budget=3, clock=clock)  # fmt: skip
    assert loop.run_cycle() is not None and actuator.pending == ["a:1"]  # lowered
    rm.up = False
    for failed in (1, 2):
        clock.at_s += 1.0
        assert loop.run_cycle() is None
        assert loop.health().consecutive_failures == failed
        assert actuator.restored == 0  # within the budget: nothing given back yet
    clock.at_s += 1.0
    assert loop.run_cycle() is None
    health = loop.health()
    assert health.budget_spent and actuator.restored == 1 and actuator.pending == []
    assert "3 guard cycles in a row failed" in health.gave_back_why
    assert "a:1 done" in health.gave_back_why
    assert "127.0.0.1:1" in health.last_error
    recorder = guard.recorder
    assert isinstance(recorder, MemoryRecorder)
    assert any(action == "guard gives every node back" for action, _ in recorder.audit_log)
    assert guard.mode is GuardMode.AUTO  # the mode stays: the next good cycle decides again
    clock.at_s += 1.0
    loop.run_cycle()
    assert loop.health().consecutive_failures == 4 and actuator.restored == 1  # none pending
    rm.up = True
    clock.at_s += 1.0
    assert loop.run_cycle() is not None
    health = loop.health()
    assert (health.consecutive_failures, health.last_error) == (0, "")
    assert actuator.pending == ["a:1"] and not health.budget_spent


def test_the_loop_cycles_on_its_own_clock_in_its_own_thread() -> None:
    guard = _guard(Clock())
    loop = GuardLoop(guard, NodeCache(lambda: [rm_node("a:1")], max_age_s=0.05), period_s=0.05,
                     failure_budget=3)  # fmt: skip
    loop.start()
    try:
        deadline = time.monotonic() + 10.0
        while loop.health().cycles < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert loop.running and loop.health().cycles >= 5
    finally:
        loop.stop()
    stopped = loop.health().cycles
    time.sleep(0.2)
    assert loop.health().cycles == stopped and not loop.running
    assert loop.health().healthy(time.time()) is False  # not running any more


def test_an_off_guard_cycles_without_reading_the_rm() -> None:
    reads: list[int] = []

    def nodes() -> list[Node]:
        reads.append(1)
        return [rm_node("a:1")]

    guard = _guard(Clock())
    guard.set_mode(GuardMode.OFF, "test")
    loop = GuardLoop(guard, NodeCache(nodes, max_age_s=1.0), period_s=1.0, failure_budget=3)
    report = loop.run_cycle()
    assert report is not None and report.plan is None and reads == []


def test_health_and_cycle_metrics_are_exported() -> None:
    clock = Clock()
    registry = CollectorRegistry()
    guard = _guard(clock)
    rm = RmThatGoesAway([rm_node("a:1")])
    loop = GuardLoop(guard, NodeCache(rm, max_age_s=1.0, clock=clock), period_s=1.0,
                     failure_budget=2, registry=registry, clock=clock)  # fmt: skip
    registry.register(GuardCollector(guard, loop))
    loop.run_cycle()
    rm.up = False
    clock.at_s += 2.0
    loop.run_cycle()
    guard.repushes["a:1"] = 2  # what the guard counts when YARN forgot its total
    guard.repush_gap_s["a:1"] = 7.5
    text = generate_latest(registry).decode()
    assert 'yarn_adapt_guard_repushes_total{node="a:1"} 2.0' in text
    assert 'yarn_adapt_guard_repush_gap_seconds{node="a:1"} 7.5' in text
    assert 'yarn_adapt_guard_cycle_duration_seconds_count{result="ok"} 1.0' in text
    assert 'yarn_adapt_guard_cycle_duration_seconds_count{result="failed"} 1.0' in text
    assert "yarn_adapt_guard_cycle_failures_total 1.0" in text
    assert "yarn_adapt_guard_consecutive_failures 1.0" in text
    assert "yarn_adapt_guard_nodes_age_seconds 2.0" in text
    assert 'yarn_adapt_guard_actions_total{action="lower",result="done"} 1.0' in text
    body = loop.health().to_json(clock())
    assert body["consecutive_failures"] == 1 and body["nodes_age_s"] == 2.0
    assert {"last_cycle_age_s", "last_cycle_duration_s", "period_s", "failure_budget"} <= set(body)


# --------------------------------------------------------------------------- guard clock


def test_a_reclaim_request_expires_on_the_guards_clock() -> None:
    clock = Clock()
    guard = _guard(clock, reclaim_ttl_s=15.0)
    guard.run_round([rm_node("a:1", used=WHOLE)])
    assert guard.reclaim_for("a:1") is not None
    clock.at_s += 15.0
    assert guard.reclaim_for("a:1") is not None
    clock.at_s += 0.5  # no newer cycle decided: the request is not served any more
    assert guard.reclaim_for("a:1") is None
    guard.observer.clock = clock  # type: ignore[attr-defined]
    guard.run_round([rm_node("a:1", used=WHOLE)])
    assert guard.reclaim_for("a:1") is not None


def test_allowances_give_the_tuner_real_capacity_what_batch_sees_and_what_is_kept() -> None:
    guard = _guard(Clock())
    assert guard.allowances() == {}
    guard.run_round([rm_node("a:1", used=WHOLE), rm_node("b:1")])
    allowance = guard.allowances()["a:1"]
    assert (allowance.capacity, allowance.total, allowance.reserved) == (
        WHOLE, FLOOR, Resources(3072, 3))  # fmt: skip
    other = guard.allowances()["b:1"]
    assert other.total == WHOLE and other.reserved == Resources(0, 0)


# --------------------------------------------------------------------------- records


def test_the_loop_records_what_changed_and_a_heartbeat_not_every_cycle(tmp_path: Path) -> None:
    clock = Clock()
    store = GuardStore(tmp_path / "db.sqlite", record_every_s=60.0)
    guard = _guard(clock)
    step = GuardStep(guard, store)
    for _ in range(10):  # the same decision every 5 s
        store.record(None, guard.run_round([rm_node("a:1")]))
        clock.at_s += 5.0
    assert [row["action"] for row in store.history("a:1", 100)] == ["lower"]
    guard.set_mode(GuardMode.RECOMMEND, "test")
    store.record(None, guard.run_round([rm_node("a:1")]))  # a change: recorded at once
    assert [row["mode"] for row in store.history("a:1", 100)] == ["recommend", "auto"]
    clock.at_s += 60.0
    store.record(None, guard.run_round([rm_node("a:1")]))
    assert len(store.history("a:1", 100)) == 3  # the heartbeat
    status = step.status()
    assert status["nodes"][0]["node"] == "a:1" and status["nodes"][0]["agent"] is None
    assert status["health"] is None and status["policy"] == "toposch-paper"
    store.close()


def test_an_older_guard_table_gets_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE guard_nodes (id INTEGER PRIMARY KEY, round_id INTEGER,"
                   " at REAL NOT NULL, mode TEXT NOT NULL, node TEXT NOT NULL)")  # fmt: skip
    store = GuardStore(path)
    columns = {row["name"] for row in store._db.execute("PRAGMA table_info(guard_nodes)")}
    assert {"policy", "state", "paths"} <= columns
    store.close()


def test_the_slack_policy_shows_each_applications_slack_in_the_status(tmp_path: Path) -> None:
    clock = Clock()
    reading = RiskReading(risk({}, paths={("frontend", "a:1"): 4.0}),
                          (qos(19.0, 20.0, ["a:1"]),))  # fmt: skip
    observer = GuardObserver(FixedRisk(reading), NoDemands(), clock=clock)
    guard = ColocationGuard(GuardSettings(), observer, RecordingActuator(), MemoryRecorder(),
                            mode=GuardMode.RECOMMEND, clock=clock)  # fmt: skip
    store = GuardStore(tmp_path / "db.sqlite")
    step = GuardStep(guard, store)
    store.record(1, guard.run_round([rm_node("a:1")], 1))
    status = step.status()
    [app] = status["applications"]
    assert (app["application"], app["state"], app["slack_ratio"]) == ("frontend", "throttle", 0.05)
    [row] = status["nodes"]
    assert row["state"] == "throttle" and row["cycle"] == 1
    assert row["paths"] == [
        {"application": "frontend", "self_ms": 4.0, "target_ms": 20.0, "share_ratio": 0.2,
         "slack_ratio": 0.05, "state": "throttle"}
    ]  # fmt: skip
    [stored] = store.history("a:1")
    assert stored["state"] == "throttle" and stored["policy"] == "slack"
    store.close()


def test_the_loop_is_thread_safe_against_mode_switches() -> None:
    guard = _guard(Clock())
    loop = GuardLoop(guard, NodeCache(lambda: [rm_node("a:1")], max_age_s=0.01), period_s=0.01,
                     failure_budget=3)  # fmt: skip
    loop.start()
    try:
        for mode in [GuardMode.RECOMMEND, GuardMode.AUTO, GuardMode.OFF] * 10:
            guard.set_mode(mode, "test")
            time.sleep(0.005)
    finally:
        loop.stop()
    assert loop.health().consecutive_failures == 0 and loop.health().cycles > 0


def test_each_node_shows_its_agents_newest_report_and_its_age(tmp_path: Path) -> None:
    clock = Clock()
    guard = _guard(clock)
    store = GuardStore(tmp_path / "db.sqlite")
    step = GuardStep(guard, store)
    store.record(1, guard.run_round([rm_node("a:1")], 1))
    assert step.status()["nodes"][0]["agent"] is None and step.status()["agents"] == {}
    step.note_agent_report("a:1", parse_agent_report({"lines": ["old"]}, clock()))
    said = ["node a:1 at 12:00:00: trusted", "  suppress: batch quota 650m", "bell\x07"]
    step.note_agent_report("a:1", parse_agent_report({"lines": said}, clock()))
    clock.at_s += 5.0
    [row] = step.status()["nodes"]
    expected = {"at_epoch_s": NOW_S, "age_s": 5.0, "lines": [*said[:2], "bell "]}
    assert row["agent"] == expected
    assert step.status()["agents"] == {"a:1": expected}
    store.close()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (["a line"], 'an agent report is {"lines": [string, ...]}'),
        ({"lines": "a line"}, 'an agent report is {"lines": [string, ...]}'),
        ({"lines": ["ok", 7]}, 'an agent report is {"lines": [string, ...]}'),
        ({"lines": ["x"] * 13}, "at most 12 lines, not 13"),
        ({"lines": ["x" * 301]}, "at most 300 characters, not 301"),
    ],
)
def test_a_report_of_another_shape_is_refused_in_one_line(body: object, error: str) -> None:
    with pytest.raises(InputError, match=re.escape(error)):
        parse_agent_report(body, NOW_S)
