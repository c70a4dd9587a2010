"""The fidelity scenarios as data, and scenarios built from traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from yarn_adapt.bench.sim_fidelity.scenarios import (
    CALIBRATION,
    SCENARIOS,
    Scenario,
    SleepApp,
    capacity_xml,
    compressed_offsets,
    quick_scenarios,
    scenarios_from_trace,
    sleep_apps_from_jobs,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    JobSpec,
    Resources,
    TaskSpec,
    TaskType,
    Workload,
)
from yarn_adapt.workload import load_trace

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "workload"


def test_at_least_eight_scenarios_on_both_schedulers() -> None:
    assert len(SCENARIOS) >= 8
    kinds = [s.scheduler for s in SCENARIOS]
    assert kinds.count("capacity") >= 4
    assert kinds.count("fair") >= 4
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_shape(scenario: Scenario) -> None:
    leaves = scenario.leaf_names()
    assert 2 <= len(leaves) <= 3
    assert 5 <= len(scenario.apps) <= 15
    assert {app.queue for app in scenario.apps} == set(leaves)  # every queue contends
    offsets = [app.offset_s for app in scenario.apps]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)  # staggered
    for app in scenario.apps:
        assert 1 <= app.containers <= 6
        assert 3 <= app.sleep_s <= 40
        assert 256 <= app.container_mb <= 1024


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_demand_exceeds_the_node(scenario: Scenario) -> None:
    """Queues contend: all apps together ask for more than the 4 GiB node."""
    demand = sum(256 + a.containers * a.container_mb for a in scenario.apps)
    assert demand > 2 * 4096


def test_calibration_is_not_an_evaluated_scenario() -> None:
    assert CALIBRATION.name not in {s.name for s in SCENARIOS}
    assert CALIBRATION.queues_xml not in {s.queues_xml for s in SCENARIOS}
    assert CALIBRATION.leaf_names() == ["cal"]


def test_quick_takes_the_first_scenario_of_each_scheduler() -> None:
    quick = quick_scenarios(SCENARIOS)
    assert [s.scheduler for s in quick] == ["capacity", "fair"]
    firsts = [next(s for s in SCENARIOS if s.scheduler == kind) for kind in ("capacity", "fair")]
    assert quick == firsts


def test_capacity_xml_parses_into_the_queues_given() -> None:
    xml = capacity_xml(
        {"x": {"capacity": "25", "maximum-capacity": "50"}, "y": {"capacity": "75"}},
        am_percent=0.2,
    )
    scenario = Scenario("t", "capacity", xml, (SleepApp(0, "x", 1, 3),))
    config = scenario.config()
    assert scenario.leaf_names() == ["x", "y"]
    assert isinstance(config, CapacitySchedulerConfig)
    assert config.maximum_am_resource_percent == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("submits", "window", "offsets"),
    [
        ([100.0, 110.0, 150.0], 24.0, [0.0, 4.8, 24.0]),
        ([0.0, 3600.0], 24.0, [0.0, 24.0]),
        ([5.0, 5.0, 5.0], 24.0, [0.0, 12.0, 24.0]),  # no spread: spaced evenly
        ([7.0], 24.0, [0.0]),
    ],
)
def test_compressed_offsets(submits: list[float], window: float, offsets: list[float]) -> None:
    assert compressed_offsets(submits, window) == pytest.approx(offsets)


def job(job_id: str, submit: float, queue: str, durations: list[float], memory: int) -> JobSpec:
    tasks = tuple(TaskSpec(TaskType.MAP, d, Resources(memory, 1)) for d in durations)
    return JobSpec(job_id, submit, queue, tasks)


def test_jobs_become_sleep_apps() -> None:
    jobs = [
        job("j1", 0.0, "prod", [1.0, 2.0], 100),  # median 1.5 -> 3 s; 100 MiB -> 256
        job("j2", 60.0, "dev", [50.0] * 9, 4096),  # 9 tasks -> 6; 50 s -> 40; 4 GiB -> 1024
        job("j3", 120.0, "prod", [8.0, 12.0, 30.0], 700),  # median 12; 700 -> 768
        job("j4", 240.0, "etl", [20.0], 1024),  # third queue -> first leaf again
    ]
    apps = sleep_apps_from_jobs(jobs, ["a", "b"])
    assert apps == (
        SleepApp(0.0, "a", 2, 3.0, 256),
        SleepApp(6.0, "b", 6, 40.0, 1024),
        SleepApp(12.0, "a", 3, 12.0, 768),
        SleepApp(24.0, "a", 1, 20.0, 1024),
    )


def test_trace_scenarios_take_consecutive_jobs_into_each_template() -> None:
    jobs = tuple(job(f"j{i}", float(i), "q", [10.0], 1024) for i in range(25))
    scenarios = scenarios_from_trace(Workload(jobs), SCENARIOS[:3], apps_per_scenario=10)
    assert len(scenarios) == 3  # the last chunk has 5 jobs, still a scenario
    assert [len(s.apps) for s in scenarios] == [10, 10, 5]
    assert [s.scheduler for s in scenarios] == [t.scheduler for t in SCENARIOS[:3]]
    assert [s.queues_xml for s in scenarios] == [t.queues_xml for t in SCENARIOS[:3]]
    assert all(s.name.startswith("trace-") for s in scenarios)


def test_a_trace_without_two_jobs_is_refused() -> None:
    with pytest.raises(SettingsError, match="fewer than 2 jobs"):
        scenarios_from_trace(Workload((job("j", 0, "q", [5.0], 512),)), SCENARIOS, 10)


@pytest.mark.parametrize(
    ("sample", "scenarios_expected"),
    [
        ("FB-2009_samples_24_times_1hr_0_first50jobs.tsv", 2),
        ("inputsls.json", 1),
        ("2jobs2min-rumen-jh.json", 1),
        ("google-2011-sample", 1),
    ],
    ids=["swim", "sls", "rumen", "google"],
)
def test_real_trace_samples_of_every_format_give_valid_scenarios(
    sample: str, scenarios_expected: int
) -> None:
    workload = load_trace(SAMPLES / sample, seed=1)
    scenarios = scenarios_from_trace(workload, quick_scenarios(SCENARIOS), 10)
    assert len(scenarios) == scenarios_expected
    for scenario in scenarios:
        leaves = set(scenario.leaf_names())
        for app in scenario.apps:
            assert app.queue in leaves
            assert 1 <= app.containers <= 6
            assert 3 <= app.sleep_s <= 40
            assert 256 <= app.container_mb <= 1024
        offsets = [a.offset_s for a in scenario.apps]
        assert offsets == sorted(offsets) and offsets[0] == 0.0
