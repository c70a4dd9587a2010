"""The testbed's policies side by side (issue 25 item 4), on made-up windows: each
phase is its policy's row, the tail is relative to the same run's alone windows, an
SLO-violation second is a second whose requests' P95 missed the client's target, and
batch work is the CPU seconds batch used per wall second, set beside the static
answer's."""

from __future__ import annotations

import pytest

from yarn_adapt.testbed import options as tb_options
from yarn_adapt.testbed import results as tb_results

Window = tb_results.Window


def figures(p95: float, p99: float, seconds: tuple[float, ...] = ()) -> tb_results.LatencyFigures:
    return tb_results.LatencyFigures(100, 0, p95 / 2, p95, p99, seconds)


def run_of(phases: dict[str, list[tuple[float, float, tuple[float, ...]]]]) -> dict[str, object]:
    """A result with two alone windows (P95 20 ms, P99 40 ms) and, per phase, windows
    of (P95, batch CPU share of node 0 = of node 1, per-second P95s)."""
    options = tb_options.TestbedOptions(qos_target_factor=1.5)
    result = tb_results.TestbedResult(options)
    for _ in range(2):
        result.windows.append((Window("alone", 0.0, 6.0), figures(20.0, 40.0)))
    for phase, runs in phases.items():
        for p95, share, seconds in runs:
            window = Window(phase, 0.0, 8.0, batch_cpu_share=(share, share))
            result.windows.append((window, figures(p95, 2 * p95, seconds)))
    result.makespans_s["static"] = 30.0
    return result.side_by_side()


def test_each_phase_is_its_policys_row_with_median_and_worst() -> None:
    found = run_of({
        "on": [(22.0, 0.4, (25.0, 31.0, 35.0)), (24.0, 0.5, (20.0,)), (30.0, 0.3, (40.0,))],
        "off": [(200.0, 0.9, (300.0, 300.0)), (100.0, 0.8, (100.0,)), (150.0, 0.9, ())],
        "static": [(21.0, 0.25, ()), (22.0, 0.3, ()), (23.0, 0.35, ())],
    })  # fmt: skip
    assert found["slo_target_ms"] == 30.0  # 1.5 x the alone P95
    rows = found["policies"]
    assert isinstance(rows, dict) and set(rows) == {"yarn-adapt", "off", "static"}
    ours = rows["yarn-adapt"]
    assert ours["runs"] == 3
    assert ours["p95_vs_alone_median"] == pytest.approx(1.2)  # 24 / 20
    assert ours["p95_vs_alone_worst"] == pytest.approx(1.5)  # 30 / 20
    assert ours["p99_vs_alone_median"] == pytest.approx(1.2)  # 48 / 40
    # seconds over 30 ms: 31 and 35 in the first window, none, 40 in the third
    assert (ours["slo_violation_s_median"], ours["slo_violation_s_worst"]) == (1, 2)
    # batch work: both nodes' shares, CPU seconds per wall second; worst is the least
    assert ours["batch_work_runs"] == [0.8, 1.0, 0.6]
    assert (ours["batch_work_median"], ours["batch_work_worst"]) == (0.8, 0.6)
    assert rows["static"]["batch_work_median"] == 0.6 and rows["static"]["makespan_s"] == 30.0
    assert ours["makespan_s"] is None
    assert found["batch_work_vs_static"] == pytest.approx(0.8 / 0.6, abs=0.001)
    targets = found["targets"]
    assert isinstance(targets, dict)
    assert targets["p95_met"] is True  # 1.2 <= 1.2
    assert targets["batch_work_met"] is True  # 1.333 >= 1.3


def test_without_a_static_row_there_is_no_ratio_and_the_target_is_not_met() -> None:
    found = run_of({"on": [(40.0, 0.5, ())]})
    assert found["batch_work_vs_static"] is None
    targets = found["targets"]
    assert isinstance(targets, dict)
    assert targets == {**targets, "p95_met": False, "batch_work_met": False}


def test_a_seconds_p95_takes_the_requests_that_arrived_in_it() -> None:
    window = Window("on", 100.0, 103.5)  # three whole seconds
    records = [(100.1, 10.0, True), (100.9, 30.0, True), (101.5, 50.0, True),
               (102.2, 70.0, False), (103.6, 999.0, True), (99.9, 999.0, True)]  # fmt: skip
    assert tb_results.second_p95s(records, window) == pytest.approx((29.0, 50.0, 70.0))
    empty = Window("on", 200.0, 203.0)
    assert tb_results.second_p95s(records, empty) == ()


def test_the_learned_demands_progress_is_the_share_of_samples_it_decided() -> None:
    progress = tb_results.LearnedProgress()
    assert progress.to_json() is None  # the guard's demand was not learned
    observed = {"application": "shop", "cpu_used": "observed", "rounds": 1}
    learned = {"application": "shop", "cpu_used": "learned", "rounds": 4}
    for apps in ([observed], [learned], [learned, observed], [learned]):
        progress.note(apps)
    found = progress.to_json()
    assert found == {"samples": 4, "learned_share": 0.5, "last": [learned]}
