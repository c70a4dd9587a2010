"""The cluster co-location model and bench colocation: DAG critical path, batch
contention raising the services' latency, Algorithm 1 and the guard acting in the
run, and bad input."""

from __future__ import annotations

import statistics
from dataclasses import asdict
from pathlib import Path

import pytest

from preemption.model import Amount, Locality
from preemption.reclaim import ReclaimSettings
from yarn_adapt.bench import BenchOptions, get
from yarn_adapt.bench.colocation import read_loads
from yarn_adapt.colocation.model import GuardPolicy, GuardSettings
from yarn_adapt.cosim.colocation import SimJob, SimTask
from yarn_adapt.cosim.interference import CoreInterference, load_core_interference
from yarn_adapt.cosim.lra_model import (
    AppSpec,
    Cluster,
    ClusterModel,
    Policy,
    ServiceSpec,
    piggymetrics,
)
from yarn_adapt.cosim.toposch import ToposchSettings
from yarn_adapt.errors import SettingsError, TraceError
from yarn_adapt.model.apps import TaskType

MILD = CoreInterference(cpu=0.3)  # a mild per-core interference for the small clusters

RECLAIM = ReclaimSettings(
    per_task=Amount(1000, 0), mini_step=Amount(500, 0), floor=Amount(100, 0),
    grace_period_s=60.0, settle_s=2.0,
)  # fmt: skip
APP = AppSpec(
    (
        ServiceSpec("front", ("db", "cache"), 2.0, 1.0),
        ServiceSpec("db", (), 4.0, 1.5),
        ServiceSpec("cache", (), 1.0, 0.5),
    ),
    entry="front",
)


def test_critical_path_is_the_slowest_chain() -> None:
    app = piggymetrics()
    assert len(app.services) == 12
    latency = {s.name: 1.0 for s in app.services} | {"kafka": 10.0}
    total, path = app.critical_path(latency)
    assert path[0] == "gateway" and path[-1] == "kafka" and total == 1.0 + 1.0 + 1.0 + 10.0


def test_unknown_callee_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown services"):
        AppSpec((ServiceSpec("a", ("b",), 1.0),), entry="a")


def _jobs(count: int) -> list[SimJob]:
    jobs = []
    for j in range(count):
        maps = [
            SimTask(j, TaskType.MAP, 30.0, 1.0, 0.1, Locality.LOCAL, remaining_s=30.0)
            for _ in range(12)
        ]
        jobs.append(SimJob(j * 5.0, maps, [], len(maps)))
    return jobs


def _run(policy: Policy, jobs: list[SimJob], *, lc: bool = True) -> tuple[float, Cluster]:
    model = ClusterModel(nodes=3, interference=MILD, risk_interval_s=20.0)
    loads = [100.0, 160.0, 120.0, 100.0] * 3
    cluster = Cluster(
        model, APP, jobs, loads, policy, reclaim=RECLAIM, qos_models={}, seed=1, lc_silent=not lc
    )
    run = cluster.run(len(loads) * model.node.load_interval_s)
    return statistics.fmean(run.e2e_p95_ms) if run.e2e_p95_ms else 0.0, cluster


def test_batch_contention_raises_latency_and_every_job_finishes() -> None:
    yarn = Policy("yarn", ToposchSettings(nu=0.0, max_retry_time=0))
    alone, _ = _run(yarn, [])
    shared, cluster = _run(yarn, _jobs(8))
    assert shared > alone * 1.05
    assert all(job.finished_s is not None for job in cluster.jobs)


def test_toposch_steers_batch_away_from_the_risky_node() -> None:
    toposch = Policy("toposch-n", ToposchSettings(nu=1.0, max_retry_time=1))
    _, cluster = _run(toposch, _jobs(8))
    assert max(cluster.risk.values()) == 1.0  # tracing's normalised node risk
    reasons = cluster.placements
    assert (
        reasons.get("lowest risk after retries", 0) + reasons.get("locality after retries", 0) > 0
    )


def test_guard_decides_visibility_from_risk_and_learned_demand() -> None:
    # TopoSch as published: risk x nu with the learned demand (the service's default,
    # the slack policy, gives way only when a service's slack runs low).
    guard = GuardSettings(policy=GuardPolicy.TOPOSCH_PAPER)
    policy = Policy("yarn-adapt", ToposchSettings(nu=1.0), guard=guard, learned_demand=True)
    _, cluster = _run(policy, _jobs(8))
    full = cluster._capacity()
    assert any(v != full for v in cluster.visible_total.values())
    assert cluster.guard_reasons and "risk" in cluster.guard_reasons[0]


def test_bad_load_rows_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "load.txt"
    path.write_text("10\n12\nabc\n")
    with pytest.raises(TraceError, match=r"load.txt:3: not a request rate"):
        read_loads(path)
    path.write_text("10\nnan\n")
    with pytest.raises(TraceError, match=r":2: request rate nan"):
        read_loads(path)


def test_bench_rejects_unknown_settings() -> None:
    with pytest.raises(SettingsError, match="colocation: unknown --set bogus"):
        get("colocation").run(BenchOptions(quick=True, extra={"bogus": "1"}))
    with pytest.raises(SettingsError, match="nu=nan: expected a number"):
        get("colocation").run(BenchOptions(quick=True, extra={"nu": "nan"}))
    with pytest.raises(SettingsError, match="placement=best: expected one of tarcil, yarn"):
        get("colocation").run(BenchOptions(quick=True, extra={"placement": "best"}))


def test_bench_json_has_every_policy_and_the_best_row() -> None:
    options = BenchOptions(
        quick=True,
        extra={"load_points": "6", "profile_samples": "30", "nodes": "4", "utilization": "0.3"},
    )
    figures = get("colocation").run(options).figures
    names = {"yarn", "kube-auto", "toposch-n", "toposch-p", "yarn-adapt", "yarn-adapt+retry"}
    assert set(figures["policies"]) == names
    for row in figures["policies"].values():
        assert row["lra_p95_vs_alone"] > 0.0
        assert row["lra_p95_vs_alone_worst"] >= row["lra_p95_vs_alone_median"]
        assert row["batch_jct_increase_worst"] >= row["batch_jct_increase_median"]
        assert row["qos_violation_s"] >= 0.0
        assert 0.0 < row["batch_cpu_share"] < 1.0
    assert figures["best"] == figures["policies"]["yarn-adapt"]
    assert figures["best"]["beyond_visible"] == 0 and figures["best"]["guard_rounds"] > 0
    assert figures["policies"]["yarn-adapt"]["placements"].keys() <= {"visible"}
    # the frontier: per policy, [batch share, P95 vs alone] points by share
    assert set(figures["frontier"]) == names
    for points in figures["frontier"].values():
        assert points and all(len(p) == 2 and 0.0 < p[0] < 1.0 and p[1] > 0.0 for p in points)
        assert [p[0] for p in points] == sorted(p[0] for p in points)
    assert figures["model"]["frontier_loads"] == [0.5, 1.0]
    assert figures["model"]["service"]["period_s"] == 5.0
    assert set(figures["gap"]) == {"lra_p95_vs_alone", "batch_jct_increase", "met"}
    # the services' interference is the committed per-core fit's
    assert figures["model"]["calibration"] == "core-model.json"
    assert figures["model"]["interference"] == asdict(load_core_interference())
    # Algorithm 1's lowest-risk node goes through Tarcil's sampling unless set
    assert figures["model"]["placement"] == "tarcil"


def test_broken_batch_trace_is_a_one_line_error(tmp_path: Path) -> None:
    trace = tmp_path / "swim.tsv"
    trace.write_text("not a swim row\n")
    with pytest.raises(TraceError, match=r"swim.tsv:1: "):
        get("colocation").run(BenchOptions(quick=True, trace=trace))
