"""The evaluation settings of §4.3/§4.4: base configurations YARN accepts, clusters
of six and eight containers, mixes at a given load, the representative static
configurations and the adaptive search spaces."""

from __future__ import annotations

import pytest

from yarn_adapt.bench.adaptive import window
from yarn_adapt.bench.comparator import SETTINGS, SchedulerSetting
from yarn_adapt.bench.paper_configs import adaptive_space, static_settings
from yarn_adapt.model import JobSpec, Resources, TaskSpec, TaskType
from yarn_adapt.tuning.apply import apply_setting
from yarn_adapt.tuning.paper import PaperCluster, base_config, candidates, leaf_paths, make_mix
from yarn_adapt.tuning.space import Scheduler, paper_space
from yarn_adapt.yarn.confxml import validate, yarn_refuses


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.label)
def test_every_candidate_and_static_configuration_is_valid_for_yarn(
    setting: SchedulerSetting,
) -> None:
    base = base_config(setting.scheduler, setting.mapping.queues)
    space = paper_space(setting.scheduler, "root", leaf_paths(setting.mapping.queues))
    for candidate in candidates(space, base):
        assert not yarn_refuses(validate(candidate.config)), candidate.label
    for containers in (6, 8):
        for static in static_settings(setting, containers):
            assert not yarn_refuses(validate(apply_setting(base, static)))


@pytest.mark.parametrize(
    ("setting", "statics", "space_size"),
    [
        (SchedulerSetting(Scheduler.CAPACITY, 2), 7, 7),
        (SchedulerSetting(Scheduler.CAPACITY, 4), 10, 7**4),
        (SchedulerSetting(Scheduler.FAIR, 2), 9, 27),
        (SchedulerSetting(Scheduler.FAIR, 4), 18, 3**4 * 3),
    ],
)
def test_section_4_4_sizes(setting: SchedulerSetting, statics: int, space_size: int) -> None:
    assert len(static_settings(setting, 8)) == statics
    assert adaptive_space(setting, 8).size == space_size


@pytest.mark.parametrize("containers", [6, 8])
def test_paper_cluster_has_two_containers_per_node(containers: int) -> None:
    cluster = PaperCluster(containers)
    assert len(cluster.spec().nodes) == containers // 2
    assert cluster.resources().units == containers
    assert cluster.spec().total == Resources(2048 * containers, containers)


def _job(index: int, submit: float, seconds: float) -> JobSpec:
    return JobSpec(f"j{index}", submit, "q1", (TaskSpec(TaskType.MAP, seconds),))


def test_a_mix_offers_the_asked_load() -> None:
    jobs = [_job(i, 100.0 + 10 * i, 60.0) for i in range(10)]
    mix = make_mix(jobs, containers=6, load=1.0)
    assert mix.jobs[0].submit_s == 0.0
    work = sum(j.total_task_seconds for j in mix.jobs)
    assert work / (6 * mix.span_s) == pytest.approx(1.0, rel=1e-3)


def test_an_adaptive_window_spans_twenty_minutes_at_its_load() -> None:
    jobs = [_job(i, 5.0 * i, 120.0) for i in range(500)]
    workload = window(jobs, containers=8, load=1.0, span_s=1200.0)
    assert workload.span_s == pytest.approx(1200.0)
    assert sum(j.total_task_seconds for j in workload.jobs) >= 8 * 1200.0
