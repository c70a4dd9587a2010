"""Feeding the latency-critical applications' learners: request tallies from real
traces in a real trace store (each request counted once), the CPU of real
processes, the round's allocation and split, the observer's feed-then-ask order,
and warm-start files."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.colocation.conftest import open_store, write_traces
from tests.colocation.factories import NOW_S, node, risk
from tracing.model import NodeRisk, RiskSnapshot
from tracing.redisconn import RedisConfig
from tracing.risk import RiskSettings
from yarn_adapt.colocation.lra import (
    LearnedLraDemand,
    NodeUtilizationUsage,
    ProcessCpuUsage,
    load_warm_start,
    process_cpu_seconds,
)
from yarn_adapt.colocation.model import RequestTally, RiskReading
from yarn_adapt.colocation.observe import GuardObserver, TraceStoreRisk
from yarn_adapt.demand.lra import LraDemandLearner, LraSettings, LraSpec
from yarn_adapt.demand.model import DemandSource
from yarn_adapt.errors import TraceError
from yarn_adapt.model import Node, NodeState, NodeUtilization, Resources

WHOLE = Resources(8192, 8)


def rm_node(node_id: str, *, batch_cores: float = 0.0, outside_cores: float = 0.0) -> Node:
    use = NodeUtilization(batch_cores + outside_cores, 1024, batch_cores, 512)
    return Node(node_id, node_id.split(":")[0], "/default-rack", NodeState.RUNNING, WHOLE,
                Resources(0, 0), utilization=use)  # fmt: skip


# --------------------------------------------------------------------------- tallies


def test_requests_are_tallied_once_each_against_the_entry_services_target(
    trace_config: RedisConfig,
) -> None:
    # Each trace: the frontend (root, 6.5 ms end to end) calls one service per host.
    # Both batches end in the past, so none of it is a clock running ahead.
    end_s = time.time() - 6.0
    write_traces(trace_config, {"a": 1000, "b": 5000}, traces=30, end_s=end_s)
    source = TraceStoreRisk(lambda: open_store(trace_config), window_s=60.0,
                            risk_settings=RiskSettings(),
                            targets_ms={"frontend": 10.0})  # fmt: skip
    first = source.read(end_s)
    (tally,) = [t for t in first.tallies if t.service == "frontend"]
    assert (tally.requests, tally.within_target, tally.target_ms) == (30, 30, 10.0)
    assert set(tally.hosts) == {"a", "b"}  # where its traces ran
    again = source.read(end_s)  # nothing new since: nothing tallied twice
    assert sum(t.requests for t in again.tallies) == 0
    write_traces(trace_config, {"a": 1000, "b": 5000}, traces=12, end_s=end_s + 5.0)
    later = source.read(end_s + 5.0)
    (tally,) = [t for t in later.tallies if t.service == "frontend"]
    assert tally.requests == 12 and tally.since_us >= first.tallies[0].until_us
    strict = TraceStoreRisk(lambda: open_store(trace_config), window_s=60.0,
                            risk_settings=RiskSettings(), targets_ms={"frontend": 5.0})  # fmt: skip
    (tally,) = [t for t in strict.read(end_s + 5.0).tallies if t.service == "frontend"]
    assert tally.requests == 42 and tally.within_target == 0  # 6.5 ms > 5 ms


# --------------------------------------------------------------------------- cpu


def test_the_cpu_of_a_real_busy_process_is_measured_from_proc() -> None:
    """Compared with the kernel's own run time of the process (``schedstat``, another
    counter than the ``stat`` ticks the reader uses) over the same interval, so the
    check holds whatever else the machine runs (a fixed floor failed under load)."""
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\n"
                             "while time.time() < end: pass"])  # fmt: skip
    try:
        usage = ProcessCpuUsage(lambda: {"shop": {"n0": [busy.pid, 999_999_999]}})
        ran_ns, began = run_time_ns(busy.pid), time.monotonic()
        assert usage.read([], None, 0.0) is None  # the first read only starts the clock
        time.sleep(1.0)
        cores = usage.read([], None, 1.0)
        ran_ns, took_s = run_time_ns(busy.pid) - ran_ns, time.monotonic() - began
        assert cores is not None
        kernel_cores = ran_ns / 1e9 / took_s
        assert cores["shop"]["n0"] > 0.0
        assert abs(cores["shop"]["n0"] - kernel_cores) <= 0.1, (cores, kernel_cores)
    finally:
        busy.kill()
        busy.wait()
    assert process_cpu_seconds(busy.pid) is None


def run_time_ns(pid: int) -> int:
    """Nanoseconds the process has spent on a CPU (``/proc/<pid>/schedstat``)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def test_node_utilization_outside_containers_goes_to_the_applications_traced_there() -> None:
    snapshot = RiskSnapshot(0, 1, 0.5, 10, 30, (), (
        NodeRisk("a", ("frontend", "ads-api"), 1.0, 1.0),
        NodeRisk("b", ("pricing",), 0.5, 0.5),
    ))  # fmt: skip
    usage = NodeUtilizationUsage({"shop": ["frontend", "pricing"], "ads": ["ads-api"]})
    nodes = [rm_node("a:1", batch_cores=2.0, outside_cores=1.0),
             rm_node("b:1", batch_cores=0.0, outside_cores=0.5)]  # fmt: skip
    assert usage.read(nodes, snapshot, 0.0) == {
        "shop": {"a:1": 0.5, "b:1": 0.5},
        "ads": {"a:1": 0.5},
    }
    assert usage.read(nodes, None, 0.0) is None


# --------------------------------------------------------------------------- rounds


class Counters:
    """CPU seconds per pid that grow at set rates (the /proc reading is tested above)."""

    def __init__(self, rates: dict[int, float]) -> None:
        self.rates = rates
        self.now = 0.0

    def __call__(self, pid: int) -> float | None:
        return self.rates[pid] * self.now if pid in self.rates else None


def test_a_round_feeds_the_learner_what_the_application_had_and_splits_by_use() -> None:
    # Two 8-vcore nodes (one core = 1 vcore); batch uses 5 cores on a:1; the shop
    # uses 1 core on a:1 and 1 on b:1. It had 1 + 2 idle on a:1, 1 + 7 idle on b:1.
    clock = Counters({1: 1.0, 2: 1.0})
    learner = LraDemandLearner([LraSpec("shop", ("frontend",), target_ms=100.0)],
                               LraSettings(min_requests=10))  # fmt: skip
    usage = ProcessCpuUsage(lambda: {"shop": {"a:1": [1], "b:1": [2]}}, clock=lambda: clock.now,
                            cpu_seconds=clock)  # fmt: skip
    provider = LearnedLraDemand(learner, usage, round_s=20.0)
    nodes = [rm_node("a:1", batch_cores=5.0), rm_node("b:1")]
    views = [node("a:1"), node("b:1")]
    for step in range(3):
        clock.now = 10.0 * step
        tally = RequestTally("frontend", 100, 99, 100.0, int(clock.now * 1e6),
                             int((clock.now + 10) * 1e6), ("a", "b"))  # fmt: skip
        provider.feed(RiskReading(risk({"a": 0.5}), tallies=(tally,)), views, nodes, clock.now)
    assert provider.rounds == 1
    (fed,) = provider.last_rounds
    # the first read's requests count (CPU starts with the second): 3 x 10 s of requests
    assert fed.requests == 300 and fed.within_target == 297 and fed.seconds == 30.0
    assert fed.had == pytest.approx(3.0 + 8.0)
    assert fed.used == pytest.approx({"a:1": 1.0, "b:1": 1.0})
    assert provider.snapshot is not None
    (demand,) = provider.snapshot.demands
    assert demand.source is DemandSource.LEARNED and demand.observations == 1
    per_node = {d.node_id: d for d in provider.demands(nodes, None, clock.now)}
    assert per_node["a:1"].vcores == pytest.approx(demand.upper / 2)
    assert per_node["b:1"].vcores == pytest.approx(demand.upper / 2)
    assert "learned upper bound" in per_node["a:1"].source


def test_no_traces_no_round_and_the_stated_demand_until_feedback() -> None:
    learner = LraDemandLearner([LraSpec("shop", ("frontend",), stated=0.05)])
    provider = LearnedLraDemand(learner, ProcessCpuUsage(lambda: {}), round_s=1.0)
    provider.feed(RiskReading(None, (), "trace store: down"), [], [], NOW_S)
    provider.feed(RiskReading(None, (), "trace store: down"), [], [], NOW_S + 2)
    assert provider.rounds == 0 and provider.demands([], None, NOW_S) == ()
    tally = RequestTally("frontend", 300, 0, None, 0, 30_000_000, ("a:1",))
    provider.feed(RiskReading(None, tallies=(tally,)), [], [rm_node("a:1")], NOW_S + 4)
    assert provider.snapshot is not None
    (demand,) = provider.snapshot.demands
    assert demand.source is DemandSource.STATED and demand.upper == pytest.approx(0.05 * 10.0)
    (on_node,) = provider.demands([rm_node("a:1")], None, NOW_S + 4)  # traced there: all of it
    assert on_node.node_id == "a:1" and on_node.vcores == pytest.approx(0.5)
    assert on_node.source == "vcores: shop stated demand x forecast load"


def test_the_observer_feeds_the_learner_before_asking_for_demand() -> None:
    class Source:
        def read(self, now_s: float) -> RiskReading:
            tally = RequestTally("frontend", 300, 300, 50.0, int((now_s - 1) * 1e6),
                                 int(now_s * 1e6), ("a:1",))  # fmt: skip
            return RiskReading(risk({"a:1": 0.2}), tallies=(tally,))

        def close(self) -> None:
            return None

    learner = LraDemandLearner([LraSpec("shop", ("frontend",), stated=0.01)])
    provider = LearnedLraDemand(learner, ProcessCpuUsage(lambda: {}), round_s=0.5)
    times = iter([NOW_S, NOW_S + 1.0])
    observer = GuardObserver(Source(), provider, clock=lambda: next(times))
    assert observer.inputs([rm_node("a:1")], {}).demands == ()  # the round is not over
    (fed,) = observer.inputs([rm_node("a:1")], {}).demands
    assert fed.node_id == "a:1" and fed.vcores == pytest.approx(0.01 * 300.0)


# --------------------------------------------------------------------------- warm start


def test_a_warm_start_file_becomes_a_profiled_curve(tmp_path: Path) -> None:
    path = tmp_path / "shop.csv"
    path.write_text("alloc_per_unit_load,performance,performance_lcb,performance_ucb\n"
                    "0.0,0.0,0.0,0.05\n0.02,0.5,0.45,0.55\n0.04,0.96,0.94,0.98\n")  # fmt: skip
    curve = load_warm_start(path)
    assert curve.grid.tolist() == [0.0, 0.02, 0.04]
    assert curve.estimate.tolist() == [0.0, 0.5, 0.96]
    plain = tmp_path / "plain.csv"
    plain.write_text("performance,alloc_per_unit_load\n0.1,0.01\n0.9,0.03\n")
    assert load_warm_start(plain).lower.tolist() == pytest.approx([0.0, 0.8])


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("alloc_per_unit_load\n0.1\n", ":1: missing column(s) performance"),
        ("alloc_per_unit_load,performance\n0.1,0.5\n0.05,0.6\n", ":3: alloc_per_unit_load"),
        ("alloc_per_unit_load,performance\n0.1,0.5\n0.2,0.4\n", ":3: alloc_per_unit_load must"),
        ("alloc_per_unit_load,performance\n0.1,nan\n0.2,0.4\n", ":2: performance is nan"),
        ("alloc_per_unit_load,performance\n0.1,x\n", ":2: performance is not a number"),
        ("alloc_per_unit_load,performance\n0.1,1.5\n0.2,1.6\n", ":2: need"),
        ("alloc_per_unit_load,performance\n0.1,0.5\n", ":0: a warm-start curve needs two"),
    ],
)
def test_a_broken_warm_start_file_is_one_line_naming_file_and_row(
    tmp_path: Path, text: str, where: str
) -> None:
    path = tmp_path / "broken.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as raised:
        load_warm_start(path)
    assert f"{path}{where}" in raised.value.one_line()
    assert "\n" not in raised.value.one_line()
