"""The testbed's plumbing without a cluster: the settings it writes from its examples in
conf/testbed/ are ones ``yarn-adapt serve`` and the agent themselves accept, the
agents' metrics are read back, and the phase order is counterbalanced."""

from __future__ import annotations

from pathlib import Path

import pytest

from preemption.settings import load_agent_settings
from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.settings import load_settings
from yarn_adapt.testbed import options as tb_options
from yarn_adapt.testbed import results as tb_results
from yarn_adapt.testbed.agents import AgentPlan, NodeAgent, parse_counts
from yarn_adapt.testbed.product import AGENT_EXAMPLE, SERVICE_EXAMPLE, settings_file

PLAN = AgentPlan(example=AGENT_EXAMPLE, hierarchy="testbed-weight")


def test_the_agents_configuration_is_one_the_agent_loads(tmp_path: Path) -> None:
    agent = NodeAgent(
        index=0, node_id="host:1", nodemanager_pid=4242,
        nodemanager_url="http://127.0.0.1:8042",
        rm_url="http://127.0.0.1:8088", service_url="http://127.0.0.1:9", token="t",
        plan=PLAN, work_dir=tmp_path, cluster_root=tmp_path, package_parent=str(tmp_path),
    )  # fmt: skip
    settings_file(PLAN.example, agent.overrides(), agent.config)
    settings = load_agent_settings(agent.config)
    assert settings.agent.mode == "service" and settings.service.url == "http://127.0.0.1:9"
    assert PLAN.settle_s == settings.reclaim.settle_s == 1.0
    assert settings.agent.node_id == "host:1"
    assert settings.reclaim.strategy == "NTF"
    assert settings.reclaim.per_task_cpu_millicores == 150
    assert settings.yarn.millicores_per_vcore == 250
    assert settings.discovery.agent_hierarchy == "testbed-weight"
    assert settings.discovery.nodemanager_pid == 4242
    assert settings.yarn.nodemanager_url == "http://127.0.0.1:8042"


def test_metrics_are_read_back() -> None:
    text = "\n".join([
        "# HELP yarn_adapt_agent_reclaimed_cpu_millicores x",
        "yarn_adapt_agent_reclaimed_cpu_millicores 300.0",
        "yarn_adapt_agent_tasks_squeezed_total 2.0",
        'yarn_adapt_agent_events_total{kind="step"} 5.0',
        'yarn_adapt_agent_events_total{kind="released"} 1.0',
        'yarn_adapt_agent_request_errors_total{kind="unreachable"} 1.0',
        'yarn_adapt_agent_request_errors_total{kind="malformed"} 2.0',
    ])  # fmt: skip
    counts = parse_counts(text)
    assert (counts.reclaimed_millicores, counts.steps, counts.released) == (300.0, 5.0, 1.0)
    assert (counts.tasks_squeezed, counts.killed, counts.request_errors) == (2.0, 0.0, 3.0)


def test_the_phase_order_is_counterbalanced_and_starts_with_the_agents_on() -> None:
    square = tb_options.TestbedOptions(repeats=3, baselines=False).order
    assert len(square) == 9
    for position in range(3):
        assert sorted(square[position::3]) == ["guard", "off", "on"]
    pairs = tb_options.TestbedOptions(repeats=3, guard_only=False, baselines=False).order
    assert pairs == ["on", "off", "off", "on", "on", "off"]
    assert square[0] == "on"
    # with the baselines: six phases, each once a repeat; over six repeats each phase
    # takes every position once
    every = tb_options.TestbedOptions(repeats=6).order
    phases = ["on", "off", "guard", "static", "slack-only", "toposch-paper"]
    for r in range(6):
        assert sorted(every[6 * r : 6 * r + 6]) == sorted(phases)
    for position in range(6):
        assert sorted(every[position::6]) == sorted(phases)
    assert every[0] == "on"
    assert tb_options.TestbedOptions().jobs == ("off", "guard", "on", *phases[3:])


def test_the_guards_policy_is_an_option_and_a_wrong_one_is_one_line() -> None:
    assert tb_options.options_from(True, 0, {}).policy == "slack"
    paper = tb_options.options_from(True, 0, {"policy": "toposch-paper"})
    assert paper.policy == "toposch-paper"
    assert tb_results.TestbedResult(paper).summary()["policy"] == "toposch-paper"
    wrong = "policy=rank: expected one of slack, slack-only, toposch-paper"
    with pytest.raises(SettingsError, match=wrong):
        tb_options.options_from(True, 0, {"policy": "rank"})


def test_the_services_settings_are_the_example_with_what_a_run_picks(tmp_path: Path) -> None:
    overrides = {
        "yarn": {"rm": ["http://127.0.0.1:8088"]},
        "state": {"dir": str(tmp_path / "state")},
        "http": {"port": 18765},
        "tracing": {"redis_url": "redis://127.0.0.1:6390/0"},
        "colocation": {"policy": "slack", "qos_targets": ["frontend=12.500"]},
    }
    path = settings_file(SERVICE_EXAMPLE, overrides, tmp_path / "yarn-adapt.toml")
    settings = load_settings(path)
    assert settings.colocation.enabled and settings.colocation.mode is GuardMode.OFF
    assert list(settings.colocation.qos_targets) == ["frontend=12.500"]
    # the product's default demand: the application's learner (observed usage meanwhile)
    assert settings.colocation.demand == "learned" and settings.colocation.vcores_per_core == 4
    assert settings.colocation.period_s == 1.0 and settings.tracing.ingest
    assert settings.http.port == 18765 and list(settings.yarn.rm) == ["http://127.0.0.1:8088"]
    assert path.stat().st_mode & 0o077 == 0  # it could name tokens


def test_the_guards_demand_is_the_settings_or_one_named(tmp_path: Path) -> None:
    assert tb_options.options_from(True, 0, {}).demand == "settings"
    assert tb_options.options_from(True, 0, {"demand": "learned"}).demand == "learned"
    with pytest.raises(SettingsError, match="demand=guess: expected one of settings, observed"):
        tb_options.options_from(True, 0, {"demand": "guess"})
    overrides = {"colocation": {"demand": "observed", "qos_targets": ["frontend=20"]},
                 "tracing": {"redis_url": "redis://127.0.0.1:6390/0"},
                 "state": {"dir": str(tmp_path / "state")}}  # fmt: skip
    path = settings_file(SERVICE_EXAMPLE, overrides, tmp_path / "learned.toml")
    settings = load_settings(path)
    assert settings.colocation.demand == "observed"
    assert list(settings.colocation.applications) == ["shop=frontend,inventory,pricing"]
    assert settings.colocation.learn_round_s == 5.0
