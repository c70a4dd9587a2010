"""The agent's TOML settings: defaults (which never kill), the service's address and
token file, and one-line errors naming file and key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from preemption.model import Amount, TaskKind
from preemption.reclaim import EngineState, Kill, Observation, decide
from preemption.settings import (
    TOKEN_ENV,
    AgentSettings,
    agent_settings_from_mapping,
    load_agent_settings,
)
from preemption.strategies import Strategy
from yarn_adapt.errors import SettingsError

from .factories import target, task

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_agent_config_is_valid_and_matches_the_defaults() -> None:
    shipped = load_agent_settings(ROOT / "conf" / "yarn-adapt-agent.toml")
    defaults = AgentSettings()
    sections = ("agent", "standalone", "yarn", "discovery", "classify", "reclaim",
                "priority", "suppress", "memory", "qos")  # fmt: skip
    for section in sections:
        assert getattr(shipped, section) == getattr(defaults, section), section


def test_an_empty_file_reclaims_nothing_and_squeezes_only_known_batch(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("")
    settings = load_agent_settings(tmp_path / "a.toml")
    assert settings.agent.mode == "standalone"
    assert settings.standalone.reclaim_cpu_millicores == 0
    assert settings.classify_settings().unknown is TaskKind.LATENCY_CRITICAL
    reclaim = settings.reclaim_settings()
    assert reclaim.strategy is Strategy.NTF
    assert (reclaim.per_task, reclaim.mini_step) == (Amount(1000, 512), Amount(250, 128))


def test_an_empty_file_isolates_batch_and_never_evicts(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("")
    settings = load_agent_settings(tmp_path / "a.toml")
    isolation = settings.isolation_settings()
    assert isolation.priority.enabled and isolation.suppress.enabled and isolation.memory.enabled
    assert isolation.priority.weight_fraction == 0.002
    assert isolation.priority.service_cpus == frozenset()  # the exclusive cpuset: off
    suppress = isolation.suppress
    assert (suppress.target_utilisation, suppress.floor_millicores) == (0.65, 200)
    assert (suppress.max_increase_fraction, suppress.dead_band_fraction) == (0.1, 0.01)
    assert not isolation.eviction.enabled  # [yarn] kill = "never"
    assert settings.status_path() == Path("/var/lib/yarn-adapt-agent/status.json")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"agnet": {}}, "unknown table [agnet]"),
        ({"agent": {"intervall_s": 1}}, "unknown setting [agent] intervall_s"),
        ({"agent": {"interval_s": "fast"}}, "[agent] interval_s: expected a number, got 'fast'"),
        ({"agent": {"dry_run": 1}}, "[agent] dry_run: expected true or false"),
        ({"yarn": {"rm": "http://rm:8088"}}, "[yarn] rm: expected a list of strings"),
        ({"agent": {"mode": "service"}}, "[service] url is required"),
        ({"agent": {"mode": "cloud"}}, "[agent] mode must be 'service' or 'standalone'"),
        ({"reclaim": {"strategy": "FIFO"}}, "unknown strategy 'FIFO'"),
        ({"reclaim": {"step_cpu_millicores": 2000}}, "a mini-step must not exceed"),
        ({"reclaim": {"grace_period_s": -1.0}}, "grace period"),
        ({"yarn": {"kill": "sometimes"}}, "[yarn] kill must be container, application or never"),
        ({"yarn": {"millicores_per_vcore": 0}}, "[yarn] millicores_per_vcore must be > 0"),
        ({"classify": {"unknown": "maybe"}}, "[classify] unknown must be"),
        ({"qos": {"model": "gbrt"}}, "[qos] samples_file is required"),
        ({"discovery": {"agent_hierarchy": "hadoop-yarn"}}, "agent_hierarchy must be set"),
        ({"discovery": {"nodemanager_user": ""}}, "[discovery] nodemanager_user must name"),
        ({"discovery": {"nodemanager_pid_file": "nm.pid"}}, "must be an absolute path"),
        ({"discovery": {"nodemanager_pid": -1}}, "[discovery] nodemanager_pid must be > 0"),
        (
            {"discovery": {"nodemanager_match": "NodeManager"}},
            "unknown setting [discovery] nodemanager_match",
        ),
        ({"yarn": {"nodemanager_url": ""}}, "[yarn] nodemanager_url must be an http(s)://"),
        ({"yarn": {"nodemanager_url": "127.0.0.1:8042"}}, "[yarn] nodemanager_url must be"),
        ({"suppress": {"cpus": "0-x"}}, "[suppress] cpus: '0-x' is not a CPU number or range"),
        ({"priority": {"service_cpus": "3-1"}}, "[priority] service_cpus: '3-1': the range"),
        ({"suppress": {"target_utilisation": 1.5}}, "[suppress] target_utilisation must be"),
        ({"suppress": {"floor_millicores": 5}}, "[suppress] floor_millicores must be >= 10"),
        ({"suppress": {"dead_band_fraction": 0.2}}, "[suppress] dead_band_fraction must be"),
        ({"suppress": {"max_increase_fraction": 0}}, "[suppress] max_increase_fraction must"),
        ({"suppress": {"reserve_millicores": -1}}, "[suppress] reserve_millicores must be"),
        ({"priority": {"weight_fraction": 0}}, "[priority] weight_fraction must be in (0, 1]"),
        (
            {"priority": {"service_cpus": "0-3"}, "suppress": {"cpus": "0-3"}},
            "[priority] service_cpus must be some, not all, of [suppress] cpus",
        ),
        ({"memory": {"pressure_available_fraction": 1}}, "[memory] pressure_available_fraction"),
        ({"memory": {"release_margin_fraction": 0.95}}, "[memory] release_margin_fraction"),
        ({"memory": {"service_cgroups": ["../etc"]}}, "[memory] service_cgroups '../etc': a"),
        ({"memory": {"service_cgroups": "shop"}}, "[memory] service_cgroups: expected a list"),
        ({"suppress": {"enabled": "yes"}}, "[suppress] enabled: expected true or false"),
    ],
)
def test_bad_settings_are_one_line_errors_naming_the_key(
    raw: dict[str, object], problem: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        agent_settings_from_mapping(raw, "agent.toml")
    assert problem in str(caught.value)
    assert str(caught.value).startswith("agent.toml: ")
    assert "\n" not in caught.value.one_line()


def test_a_file_that_is_not_toml_or_missing_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[agent\n")
    with pytest.raises(SettingsError, match=r"bad\.toml: not valid TOML"):
        load_agent_settings(tmp_path / "bad.toml")
    with pytest.raises(SettingsError, match="no such settings file"):
        load_agent_settings(tmp_path / "missing.toml")


def test_the_token_comes_from_the_environment_or_the_token_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service: dict[str, str] = {"url": "https://svc:8765"}
    raw = {"agent": {"mode": "service"}, "service": service}
    settings = agent_settings_from_mapping(raw, "agent.toml")
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(SettingsError, match="needs a token"):
        settings.token()
    (tmp_path / "token").write_text("from-file-token\n")
    (tmp_path / "token").chmod(0o600)
    service["token_file"] = str(tmp_path / "token")
    assert agent_settings_from_mapping(raw, "agent.toml").token() == "from-file-token"
    monkeypatch.setenv(TOKEN_ENV, "from-env-token")
    assert agent_settings_from_mapping(raw, "agent.toml").token() == "from-env-token"


RM = ["http://rm:8088"]


@pytest.mark.parametrize(
    "raw",
    [
        {"yarn": {"rm": RM}},  # standalone
        {"agent": {"mode": "service"}, "service": {"url": "https://svc:8765"}, "yarn": {"rm": RM}},
        {"yarn": {"rm": RM}, "reclaim": {"strategy": "Kill"}},
    ],
    ids=["standalone", "service (the guard's requests)", "the Kill strategy"],
)
def test_no_default_configuration_kills(raw: dict[str, object]) -> None:
    settings = agent_settings_from_mapping(raw, "agent.toml")
    assert settings.yarn.kill == "never"
    reclaim = settings.reclaim_settings()
    assert not reclaim.kill_enabled
    # Demand no squeeze can meet, far past the grace period: the engine only waits.
    state, victim = EngineState(), task(1, 100.0, limit=(100, 256))
    for second in range(0, 600, 5):
        seen = Observation(1000.0 + second, (victim,), target(5000))
        decision = decide(state, seen, reclaim)
        state = decision.state
        assert not any(isinstance(action, Kill) for action in decision.actions), second


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://svc.example:8765", True),
        ("http://127.0.0.1:8765", True),
        ("http://127.8.0.1:8765", True),
        ("http://[::1]:8765", True),
        ("http://localhost:8765", True),
        ("http://svc.example:8765", False),
        ("http://10.0.0.7:8765", False),
        ("http://127.0.0.1.nip.io:8765", False),
        ("ftp://svc.example", False),
    ],
)
def test_a_service_url_off_this_host_must_be_https(url: str, allowed: bool) -> None:
    raw = {"agent": {"mode": "service"}, "service": {"url": url}}
    if allowed:
        assert agent_settings_from_mapping(raw, "agent.toml").service.url == url
        return
    with pytest.raises(SettingsError) as caught:
        agent_settings_from_mapping(raw, "agent.toml")
    assert "[service] url" in caught.value.one_line()
    assert "\n" not in caught.value.one_line()


@pytest.mark.parametrize(
    ("mode", "owner", "fix"),
    [
        (0o644, None, "mode 644 lets others read or change the token; fix: chmod 600 {path}"),
        (0o640, None, "mode 640 lets others read or change the token; fix: chmod 600 {path}"),
        (0o600, 65534, "owned by uid 65534, not the agent's user"),
        (0o400, None, None),
        (0o600, None, None),
    ],
)
def test_the_token_file_must_be_the_agents_alone(
    mode: int, owner: int | None, fix: str | None, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    path = tmp_path / "agent-token"
    path.write_text("per-node-token\n")
    path.chmod(mode)
    if owner is not None:
        os.chown(path, owner, owner)
    raw = {"agent": {"mode": "service"},
           "service": {"url": "https://svc:8765", "token_file": str(path)}}  # fmt: skip
    settings = agent_settings_from_mapping(raw, "agent.toml")
    if fix is None:
        assert settings.token() == "per-node-token"
        return
    with pytest.raises(SettingsError) as caught:
        settings.token()
    line = caught.value.one_line()
    assert line.startswith(f"agent.toml: [service] token_file {path}: ") and "\n" not in line
    assert fix.format(path=path) in line
    assert "per-node-token" not in line


def test_the_testbeds_agents_run_their_isolation_as_shipped(tmp_path: Path) -> None:
    # The testbed measures the product: its agents isolate as shipped; its "off" and
    # "static" phases run no agent at all (testbed/run.py).
    from yarn_adapt.testbed.agents import AgentPlan, NodeAgent
    from yarn_adapt.testbed.product import AGENT_EXAMPLE, settings_file

    plan = AgentPlan(example=AGENT_EXAMPLE, hierarchy="testbed-weight")
    agent = NodeAgent(
        index=0, node_id="host:1", nodemanager_pid=4242, nodemanager_url="http://127.0.0.1:8042",
        rm_url="http://127.0.0.1:8088", service_url="http://127.0.0.1:9", token="t", plan=plan,
        work_dir=tmp_path, cluster_root=tmp_path, package_parent=str(tmp_path),
    )  # fmt: skip
    settings_file(plan.example, agent.overrides(), tmp_path / "agent.toml")
    settings = load_agent_settings(tmp_path / "agent.toml")
    isolation = settings.isolation_settings()
    shipped = load_agent_settings(ROOT / "conf" / "yarn-adapt-agent.toml").isolation_settings()
    assert isolation.active
    assert (isolation.priority, isolation.suppress) == (shipped.priority, shipped.suppress)
    assert isolation.memory.enabled == shipped.memory.enabled
