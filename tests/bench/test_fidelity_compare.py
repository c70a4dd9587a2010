"""From a real run to the simulator's jobs, the comparison and the figures."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from yarn_adapt.bench.sim_fidelity.bench import FidelitySettings, repeat_differences, repeat_figures
from yarn_adapt.bench.sim_fidelity.compare import (
    AppComparison,
    compare,
    percentile,
    scenario_workload,
    summary_figures,
)
from yarn_adapt.bench.sim_fidelity.real import RealApp, RealRun
from yarn_adapt.bench.sim_fidelity.scenarios import AM_MB, SCENARIOS, Scenario, SleepApp
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import Application, AppState, FinalStatus, Resources, TaskType
from yarn_adapt.sim import ClusterSpec
from yarn_adapt.sim.calibration import YarnOverheads

OVERHEADS = YarnOverheads(
    nm_heartbeat_s=0.5,
    am_startup_s=3.0,
    container_launch_s=0.8,
    container_exit_s=0.2,
    am_teardown_s=1.0,
)
NODE = ClusterSpec.uniform(1, Resources(4096, 8), minimum_allocation=Resources(128, 1))
EPOCH_S = 1_800_000_000.0


def application(index: int, spec: SleepApp, latency_s: float, submit_s: float) -> Application:
    submitted = int((EPOCH_S + submit_s) * 1000)
    return Application(
        id=f"application_1800000000000_{index:04d}",
        name=f"t-{index}",
        user="root",
        queue=f"root.{spec.queue}",
        state=AppState.FINISHED,
        final_status=FinalStatus.SUCCEEDED,
        application_type="YARN",
        submitted_ms=submitted,
        finished_ms=submitted + int(latency_s * 1000),
    )


def real_run(scenario: Scenario, latencies: list[float], delay_s: float = 2.0) -> RealRun:
    """The scenario as if each app reached the RM ``delay_s`` after its offset."""
    apps = tuple(
        RealApp(spec, application(i + 1, spec, latency, spec.offset_s + delay_s), None, None)
        for i, (spec, latency) in enumerate(zip(scenario.apps, latencies, strict=True))
    )
    return RealRun(scenario, apps, NODE, wall_s=60.0)


SMALL = Scenario(
    "small",
    "capacity",
    SCENARIOS[0].queues_xml,
    (SleepApp(0.0, "a", 2, 5.0, 512), SleepApp(4.0, "b", 3, 10.0, 256)),
)


def test_each_app_becomes_an_am_and_its_sleep_tasks_at_its_rm_submit_time() -> None:
    workload = scenario_workload(real_run(SMALL, [12.0, 20.0]), OVERHEADS)
    first, second = workload.jobs
    assert [j.id for j in workload.jobs] == [
        "application_1800000000000_0001",
        "application_1800000000000_0002",
    ]
    assert (first.submit_s, second.submit_s) == pytest.approx((0.0, 4.0))
    assert (first.queue, second.queue) == ("a", "b")
    assert first.am_resources == Resources(AM_MB, 1)
    assert [t.resources for t in second.tasks] == [Resources(256, 1)] * 3
    assert all(t.kind is TaskType.MAP for t in first.tasks + second.tasks)
    assert [t.duration_s for t in first.tasks] == pytest.approx([6.0, 6.0])  # 0.8 + 5 + 0.2
    assert [t.duration_s for t in second.tasks] == pytest.approx([11.0] * 3)


def test_an_uncontended_app_is_simulated_as_the_sum_of_its_overheads() -> None:
    """Alone on the node: AM wait (< one 0.5 s heartbeat) + startup 3 + wait for a
    heartbeat + task 6 (+ at most two more heartbeats for its second grant, one
    per heartbeat off-switch) + teardown 1."""
    alone = Scenario("alone", "capacity", SMALL.queues_xml, (SleepApp(0.0, "a", 2, 5.0, 512),))
    (comparison,) = compare(real_run(alone, [11.0]), OVERHEADS, seed=1)
    assert 10.0 <= comparison.sim_latency_s <= 12.0
    assert comparison.sim_wait_s is not None and comparison.sim_wait_s < 0.5
    assert comparison.rel_err == pytest.approx(abs(comparison.sim_latency_s - 11.0) / 11.0)


@pytest.mark.parametrize("scenario", SCENARIOS[:2], ids=lambda s: s.scheduler)
def test_every_app_of_a_scenario_is_simulated_to_the_end(scenario: Scenario) -> None:
    comparisons = compare(real_run(scenario, [60.0] * len(scenario.apps)), OVERHEADS, seed=1)
    assert [c.app_id[-4:] for c in comparisons] == [
        f"{i:04d}" for i in range(1, len(scenario.apps) + 1)
    ]
    for comparison, app in zip(comparisons, scenario.apps, strict=True):
        least = OVERHEADS.am_startup_s + 1.0 + app.sleep_s + OVERHEADS.am_teardown_s
        assert comparison.sim_latency_s >= least


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([1.0], 90, 1.0), ([1.0, 2.0], 50, 1.5), ([3.0, 1.0, 2.0, 4.0, 5.0], 90, 4.6)],
)
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_summary_figures() -> None:
    comparisons = [
        AppComparison("s", f"app{i}", real, sim, real_wait, sim_wait)
        for i, (real, sim, real_wait, sim_wait) in enumerate(
            [
                (10.0, 11.0, 1.0, 1.5),
                (20.0, 18.0, 5.0, 4.0),
                (40.0, 40.0, None, 2.0),
                (50.0, 60.0, 10.0, 12.0),
            ]
        )
    ]
    figures = summary_figures(comparisons, scenarios=1)
    # relative errors 0.1, 0.1, 0.0, 0.2
    assert figures["median_rel_err"] == pytest.approx(0.1)
    assert figures["p90_rel_err"] == pytest.approx(0.17)
    assert figures["scenarios"] == 1
    assert figures["apps"] == 4
    # waits (sim - real): +0.5, -1.0, +2.0 -> mean 0.5; the rest: +0.5, -1.0, +8.0
    assert figures["wait_bias_s"] == pytest.approx(0.5)
    assert figures["run_bias_s"] == pytest.approx(2.5)
    assert figures["median_abs_wait_err_s"] == pytest.approx(1.0)


def test_repeated_runs_are_compared_real_against_real() -> None:
    first = real_run(SMALL, [20.0, 40.0])
    second = real_run(SMALL, [22.0, 30.0])
    other = real_run(replace(SMALL, name="other"), [10.0, 10.0])
    assert repeat_differences([first, other, second]) == pytest.approx([0.1, 0.25])
    assert repeat_figures([first, other]) == {}
    figures = repeat_figures([first, second])
    assert figures["repeat_median_rel_diff"] == pytest.approx(0.175)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, FidelitySettings()),
        ({"calibrate": "true", "submit": "client"}, FidelitySettings(True, False, "client")),
        ({"keep_going": "1", "repeat": "2"}, FidelitySettings(keep_going=True, repeat=2)),
        ({"apps_per_scenario": "12"}, FidelitySettings(apps_per_scenario=12)),
    ],
)
def test_settings(extra: dict[str, str], expected: FidelitySettings) -> None:
    assert FidelitySettings.parse(extra) == expected


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"nodes": "3"}, "sim-fidelity: unknown --set nodes (known: apps_per_scenario,"),
        ({"submit": "ssh"}, "--set submit=ssh: expected one of rest, client"),
        ({"repeat": "0"}, "--set repeat=0: expected a whole number >= 1"),
        ({"apps_per_scenario": "x"}, "--set apps_per_scenario=x: expected a whole number >= 2"),
        ({"keep_going": "on"}, "--set keep_going=on: expected yes or no"),
    ],
)
def test_bad_settings_are_refused(extra: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(message)):
        FidelitySettings.parse(extra)
