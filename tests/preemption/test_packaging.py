"""The agent is deployable on its own: what it imports, its command line, its unit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from yarn_adapt.cli import main

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("yarn_adapt.service", "yarn_adapt.tuning", "yarn_adapt.sim", "yarn_adapt.cli",
             "rules", "flask", "waitress", "redis", "lxml", "durable", "sklearn")  # fmt: skip


def test_the_agent_never_imports_the_service_or_the_tuner() -> None:
    code = (
        "import sys, json\n"
        "import preemption.agent, preemption.cli, preemption.node, preemption.targets\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} "
        f"or m.startswith({FORBIDDEN!r}))\n"
        "print(json.dumps(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert json.loads(done.stdout) == []


def test_yarn_adapt_agent_is_registered_and_maps_errors_to_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.json"
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nstate_file = "{state}"\n')
    assert main(["agent", "restore", "--config", str(config)]) == 0
    assert "nothing to restore" in capsys.readouterr().out
    state.write_text('{"format": 1, "originals": [{"group": "x"}]')  # torn, not JSON
    assert main(["agent", "restore", "--config", str(config)]) == 5
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"yarn-adapt: {state}: ") and "restore the listed cgroups by hand" in err
    assert len(err.splitlines()) == 1
    config.write_text("[agent]\nmode = 'cloud'\n")
    assert main(["agent", "run", "--config", str(config)]) == 2
    assert main(["agent", "restore", "--config", str(tmp_path / "missing.toml")]) == 2


def test_python_m_preemption_runs_the_same_commands(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nstate_file = "{tmp_path / "state.json"}"\n'
        f'[discovery]\nsource = "cgroup"\ncgroup_version = "v2"\ncgroup_root = "{tmp_path}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "preemption", "run", "--config", str(config), "--dry-run",
         "--ticks", "1"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "dry run" in done.stderr and "stopped:" in done.stderr
    state = tmp_path / "state.json"
    assert not state.exists()  # a dry run writes no state


def test_the_agents_own_entry_point_maps_errors_to_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from preemption.cli import main as agent_main

    assert agent_main(["run", "--config", str(tmp_path / "none.toml")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("yarn-adapt agent: ")


def test_the_systemd_unit_runs_the_agent_as_root_hardened_and_restores_on_stop() -> None:
    unit = (ROOT / "conf" / "yarn-adapt-agent.service").read_text()
    lines = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in unit.splitlines()
             if "=" in line and not line.startswith("#")}  # fmt: skip
    assert (
        "yarn-adapt agent run --config /etc/yarn-adapt/yarn-adapt-agent.toml" in lines["ExecStart"]
    )
    assert lines["KillSignal"] == "SIGTERM"
    assert lines["NoNewPrivileges"] == "true"
    assert lines["ProtectSystem"] == "strict"
    assert "/sys/fs/cgroup" in lines["ReadWritePaths"]
    assert lines["StateDirectory"] == "yarn-adapt-agent"
    assert lines["ExecStopPost"].endswith(
        "agent restore --config /etc/yarn-adapt/yarn-adapt-agent.toml"
    )


def test_metrics_are_served_for_prometheus(tmp_path: Path) -> None:
    import socket

    import requests

    from preemption.agent import Agent
    from preemption.cli import _metrics_server
    from preemption.settings import agent_settings_from_mapping

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = agent_settings_from_mapping(
        {"agent": {"state_file": str(tmp_path / "s.json"), "metrics_port": port},
         "discovery": {"source": "cgroup", "cgroup_version": "v2", "cgroup_root": str(tmp_path)}},
    )  # fmt: skip
    agent = Agent.build(settings, dry_run=True)
    agent.tick()
    server = _metrics_server(agent)
    assert server is not None
    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        server.shutdown()
        server.server_close()
    for name in (
        "yarn_adapt_agent_reclaimed_cpu_millicores",
        "yarn_adapt_agent_tasks_squeezed_total",
        'yarn_adapt_agent_events_total{kind="blacklisted"}',
        'yarn_adapt_agent_events_total{kind="killed"}',
        "yarn_adapt_agent_tick_seconds",
    ):
        assert name in text, name  # fmt: skip


def test_restore_needs_no_service_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A token file the agent refuses (others may read it) stops `agent run`, but never
    # the restore that puts limits back (the unit's ExecStopPost).
    token = tmp_path / "agent-token"
    token.write_text("per-node-token\n")
    token.chmod(0o644)
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nmode = "service"\nstate_file = "{tmp_path / "state.json"}"\n'
        f'[service]\nurl = "https://svc.example:8765"\ntoken_file = "{token}"\n'
    )
    assert main(["agent", "run", "--config", str(config), "--ticks", "1"]) == 2
    assert "chmod 600" in capsys.readouterr().err
    assert main(["agent", "restore", "--config", str(config)]) == 0
    assert "nothing to restore" in capsys.readouterr().out
