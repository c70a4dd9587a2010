"""The sim-fidelity scenarios added for issue 14 (user limits, AM-limited queues,
Fair/DRF on vcores) as data, the per-scenario agreement rule, and what the
simulator is handed for users and vcores."""

from __future__ import annotations

import pytest

from tests.bench.test_fidelity_compare import OVERHEADS, real_run
from yarn_adapt.bench.sim_fidelity.bench import agreement_figures
from yarn_adapt.bench.sim_fidelity.compare import AppComparison, scenario_agrees, scenario_workload
from yarn_adapt.bench.sim_fidelity.scenarios import (
    AGREE_MAX_REL_ERR,
    AGREE_MEDIAN_REL_ERR,
    ALL_SCENARIOS,
    SCENARIOS,
    SEMANTICS_SCENARIOS,
    Scenario,
    quick_scenarios,
)
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig


def test_at_least_twelve_scenarios_and_the_pinned_ones_first() -> None:
    assert len(ALL_SCENARIOS) >= 12
    assert ALL_SCENARIOS[: len(SCENARIOS)] == SCENARIOS  # golden fingerprints stay valid
    assert len({s.name for s in ALL_SCENARIOS}) == len(ALL_SCENARIOS)
    assert quick_scenarios(ALL_SCENARIOS) == quick_scenarios(SCENARIOS)


@pytest.mark.parametrize("scenario", SEMANTICS_SCENARIOS, ids=lambda s: s.name)
def test_new_scenario_shape(scenario: Scenario) -> None:
    leaves = scenario.leaf_names()
    assert 2 <= len(leaves) <= 3
    assert 5 <= len(scenario.apps) <= 15
    assert {app.queue for app in scenario.apps} == set(leaves)
    offsets = [app.offset_s for app in scenario.apps]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for app in scenario.apps:
        assert 1 <= app.containers <= 6 and 3 <= app.sleep_s <= 40
        assert 256 <= app.container_mb <= 1024 and 1 <= app.vcores <= 4
    demand = sum(256 + a.containers * a.container_mb for a in scenario.apps)
    assert demand > 2 * 4096


def _users_per_queue(scenario: Scenario) -> dict[str, set[str | None]]:
    found: dict[str, set[str | None]] = {}
    for app in scenario.apps:
        found.setdefault(app.queue, set()).add(app.user)
    return found


def test_user_limits_are_exercised_by_several_users_in_one_queue() -> None:
    capacity = [s for s in SEMANTICS_SCENARIOS if s.scheduler == "capacity" and "user" in s.name]
    assert len(capacity) >= 2
    for scenario in capacity:
        config = scenario.config()
        assert isinstance(config, CapacitySchedulerConfig)
        limited = [
            leaf
            for leaf in config.leaves()
            if leaf.minimum_user_limit_percent is not None or leaf.user_limit_factor is not None
        ]
        crowded = {q for q, users in _users_per_queue(scenario).items() if len(users) >= 2}
        assert {leaf.path.rsplit(".", 1)[-1] for leaf in limited} & crowded, scenario.name
    fair_users = next(s for s in SEMANTICS_SCENARIOS if s.name == "fair-user-max-apps")
    config = fair_users.config()
    assert isinstance(config, FairSchedulerConfig)
    assert [(u.name, u.max_running_apps) for u in config.users] == [("alice", 1)]
    assert sum(app.user == "alice" for app in fair_users.apps) >= 3


def test_am_limited_queues_on_both_schedulers() -> None:
    capacity = next(s for s in SEMANTICS_SCENARIOS if s.name == "cap-am-limit-users")
    assert "maximum-am-resource-percent</name><value>0.12" in capacity.queues_xml
    assert "root.b.maximum-am-resource-percent</name><value>0.25" in capacity.queues_xml
    fair = next(s for s in SEMANTICS_SCENARIOS if s.name == "fair-drf-am-share")
    config = fair.config()
    assert isinstance(config, FairSchedulerConfig)
    shares = {leaf.path: leaf.max_am_share for leaf in config.leaves()}
    assert shares["root.a"] == pytest.approx(0.2)


def test_drf_scenarios_ask_for_vcores_and_the_simulator_gets_them() -> None:
    scenario = next(s for s in SEMANTICS_SCENARIOS if s.name == "fair-drf-vcores")
    assert max(app.vcores for app in scenario.apps) == 4
    # at some moment the apps ask for more vcores than the 8-vcore node holds while
    # memory would still fit: DRF must weigh vcores
    assert sum(a.containers * a.vcores for a in scenario.apps) > 8 * 3
    workload = scenario_workload(real_run(scenario, [30.0] * len(scenario.apps)), OVERHEADS)
    for job, app in zip(workload.jobs, scenario.apps, strict=True):
        assert {t.resources.vcores for t in job.tasks} == {app.vcores}
        assert {t.resources.memory_mb for t in job.tasks} == {app.container_mb}


def _comparison(real: float, sim: float) -> AppComparison:
    return AppComparison("s", "app", real, sim, None, None)


def test_a_scenario_agrees_within_the_stated_tolerance_only() -> None:
    close = [_comparison(10.0, 10.0 * (1 + AGREE_MEDIAN_REL_ERR * 0.9))] * 3
    assert scenario_agrees(close)
    median_off = [_comparison(10.0, 10.0 * (1 + AGREE_MEDIAN_REL_ERR * 1.1))] * 3
    assert not scenario_agrees(median_off)
    one_far = [*close, *close, _comparison(10.0, 10.0 * (1 + AGREE_MAX_REL_ERR) + 0.1)]
    assert not scenario_agrees(one_far)


def test_agreement_figures_name_the_scenarios_that_disagree() -> None:
    rows = [
        {"scenario": "x", "agrees": True},
        {"scenario": "y", "agrees": False},
        {"scenario": "y", "agrees": False},
    ]
    figures = agreement_figures(rows, failed=["z"])
    assert figures["scenarios_agree"] == 1
    assert figures["scenarios_disagree"] == ["y", "z"]
    assert figures["scenarios_failed"] == ["z"]
    assert "median_rel_err <= 0.2" in str(figures["agree_rule"])
