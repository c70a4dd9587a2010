"""The placers as the YARN simulator's placement hook, and ``yarn-adapt sim
--placement`` / ``yarn-adapt bench placement`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sim.factories import CONTAINER, capacity_leaf, capacity_tree, job, workload
from yarn_adapt.cli import main
from yarn_adapt.placement.profiles import ProfileBook
from yarn_adapt.placement.sim_hook import SimPlacement, sim_placement
from yarn_adapt.placement.workloads import synthetic_classes
from yarn_adapt.sim import (
    ClusterSpec,
    HeartbeatNodePlacement,
    SimulationHooks,
    SimulationOptions,
    simulate,
)

DEMO = Path(__file__).resolve().parents[2] / "yarn_adapt" / "data" / "demo"
BOOK = ProfileBook(synthetic_classes(6, seed=2))


@pytest.mark.parametrize("policy", ["tarcil", "greedy", "random", "least-loaded"])
def test_every_container_lands_where_it_fits_and_every_job_ends(policy: str) -> None:
    cluster = ClusterSpec.of_containers(6, 4, CONTAINER)
    hook = sim_placement(policy, cluster, BOOK, seed=1)
    assert isinstance(hook, SimPlacement)
    jobs = [job(f"j{i}", "root.a", maps=5, duration=20.0, submit=float(i)) for i in range(12)]
    options = SimulationOptions(am_containers=False, record_allocations=True,
                                hooks=SimulationHooks(placement=hook))  # fmt: skip
    result = simulate(workload(*jobs), capacity_tree(capacity_leaf("a", 100)), cluster, options)
    assert all(j.finish_s is not None for j in result.jobs)
    assert hook.stats.decisions >= 60 - hook.stats.declined
    per_node: dict[str, int] = {}
    for allocation in result.allocations:
        per_node[allocation.node_id] = per_node.get(allocation.node_id, 0) + allocation.count
    assert len(per_node) > 1  # spread beyond the heartbeating node
    if policy in ("tarcil", "greedy"):
        assert hook.stats.quality and all(0 <= q <= 1 for q in hook.stats.quality)


def test_yarn_is_the_simulators_own_placement() -> None:
    cluster = ClusterSpec.of_containers(2, 4, CONTAINER)
    assert isinstance(sim_placement("yarn", cluster, BOOK), HeartbeatNodePlacement)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _swim(path: Path, jobs: int) -> Path:
    rows = [f"job{i}\t{i * 7}\t7\t{(i % 5 + 1) * 10**8}\t{10**7}\t{10**6}" for i in range(jobs)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_sim_command_takes_a_placement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _swim(tmp_path / "tiny.tsv", 20)
    args = ["sim", "--trace", str(trace), "--scheduler-file", str(DEMO / "capacity-scheduler.xml"),
            "--nodes", "8", "--placement", "tarcil", "--json"]  # fmt: skip
    code, out, _ = _run(args, capsys)
    assert code == 0
    summary = json.loads(out)
    assert summary["placement"]["policy"] == "tarcil"
    assert summary["placement"]["decisions"] > 0
    assert summary["all"]["jobs"] > 0


def test_bench_runs_on_an_unseen_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _swim(tmp_path / "tiny.tsv", 40)
    args = ["bench", "placement", "--trace", str(trace), "--set", "scales=10",
            "--set", "horizon_10=120", "--set", "policies=tarcil,greedy,yarn"]  # fmt: skip
    code, out, _ = _run(args, capsys)
    assert code == 0
    figures = json.loads(out.strip().splitlines()[-1])
    scale = figures["scales"][0]
    assert scale["trace"] == str(trace) and scale["rus"] == 80
    tarcil = scale["policies"]["tarcil"]
    for key in ("perf_vs_optimal", "worst_degradation", "decision_ms", "decision_ms_median",
                "decision_ms_p99", "queued_share"):  # fmt: skip
        assert tarcil[key] is not None
    assert scale["policies"]["greedy"]["perf_vs_greedy"] == 1.0
    assert 0 < tarcil["perf_vs_optimal"] <= 1.0  # against each job's ideal (paper §6.3)
    assert 0 <= tarcil["p99_degradation"] <= tarcil["worst_degradation_vs_ideal"] <= 1.0
    # against the best RUs free at arrival (§6.3's optimal), never worse than the ideal
    worst = tarcil["worst_degradation"]
    assert 0 <= tarcil["p99_degradation_vs_best_available"] <= worst
    assert worst <= tarcil["worst_degradation_vs_ideal"]
    assert tarcil["worst_job"]["slowdown"] >= 1.0
    assert figures["sample_size_check"]["unloaded"]["derived_r"] == 31
    assert figures["targets"]["decision_ms"]["target"] == "<= 0.2"


def test_bench_refuses_unknown_settings(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["bench", "placement", "--quiet", "--set", "policies=tarcil,magic"], capsys)
    assert code == 2 and "--set policies=tarcil,magic: expected" in err and err.count("\n") == 1
    code, _, err = _run(["bench", "placement", "--quiet", "--set", "migrate=maybe"], capsys)
    assert code == 2 and "placement: --set migrate=maybe: expected yes or no" in err
    assert err.count("\n") == 1
