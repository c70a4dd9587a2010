"""The testbed's agent plumbing without a cluster: the agent's configuration file is
one the agent itself accepts, its metrics are read back, and the phase order is
counterbalanced."""

from __future__ import annotations

from pathlib import Path

import pytest

from preemption.settings import load_agent_settings
from preemption.targets import ServiceTarget
from tests.colocation.test_guard_loop import Clock, _guard
from yarn_adapt.errors import SettingsError
from yarn_adapt.testbed import run as testbed
from yarn_adapt.testbed.agents import AgentPlan, NodeAgent, ReclaimEndpoint, parse_counts

PLAN = AgentPlan(
    interval_s=0.5, strategy="NTF", per_task_millicores=150, step_millicores=50,
    floor_millicores=50, settle_s=1.0, node_cpu_millicores=1000, millicores_per_vcore=250,
    batch_queue="default", hierarchy="testbed-weight",
)  # fmt: skip


def test_the_agents_configuration_is_one_the_agent_loads(tmp_path: Path) -> None:
    agent = NodeAgent(
        index=0, node_id="host:1", nodemanager_pid=4242,
        nodemanager_url="http://127.0.0.1:8042",
        rm_url="http://127.0.0.1:8088", endpoint_url="http://127.0.0.1:9", token="t",
        plan=PLAN, work_dir=tmp_path, cluster_root=tmp_path, package_parent=str(tmp_path),
    )  # fmt: skip
    agent.config.parent.mkdir(parents=True)
    agent.config.write_text(agent.settings_toml())
    settings = load_agent_settings(agent.config)
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
    square = testbed.TestbedOptions(repeats=3).order
    assert len(square) == 9
    for position in range(3):
        assert sorted(square[position::3]) == ["guard", "off", "on"]
    pairs = testbed.TestbedOptions(repeats=3, guard_only=False).order
    assert pairs == ["on", "off", "off", "on", "on", "off"]
    assert square[0] == "on"


def test_the_guards_policy_is_an_option_and_a_wrong_one_is_one_line() -> None:
    assert testbed.options_from(True, 0, {}).policy == "slack"
    paper = testbed.options_from(True, 0, {"policy": "toposch-paper"})
    assert paper.policy == "toposch-paper"
    assert testbed.TestbedResult(paper).summary()["policy"] == "toposch-paper"
    with pytest.raises(SettingsError, match="policy=rank: expected one of slack, toposch-paper"):
        testbed.options_from(True, 0, {"policy": "rank"})


def test_the_testbeds_endpoint_takes_an_agents_report(tmp_path: Path) -> None:
    """The testbed serves the service's agent routes over its own guard: a real
    agent's poll sends its report there too."""
    guard = _guard(Clock())
    endpoint = ReclaimEndpoint(guard, "operator-token", tmp_path / "service.db")
    try:
        agent = ServiceTarget(endpoint.url, "a:1", endpoint.agent_token("a:1"))
        agent.report(["node a:1 at 12:00:00: trusted"])
        assert agent.current().problem is None  # nothing asked yet: a 404, no problem
        assert endpoint.step.reports["a:1"].lines == ("node a:1 at 12:00:00: trusted",)
    finally:
        endpoint.close()
