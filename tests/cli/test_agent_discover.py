"""``yarn-adapt agent discover`` says when it finds nothing, and its --json is one
JSON object (issue 29, item 8). On a laid-out cgroup v2 tree with no NodeManager this
host trusts, so no container: the finding must still be said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yarn_adapt.cli import main


@pytest.fixture
def agent_config(tmp_path: Path) -> Path:
    root = tmp_path / "cgroup"
    root.mkdir()
    for name in ("cgroup.controllers", "cgroup.subtree_control"):
        (root / name).write_text("cpu memory\n")
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nstate_file = "{tmp_path / "state.json"}"\n'
        f'[discovery]\nsource = "cgroup"\ncgroup_version = "v2"\ncgroup_root = "{root}"\n'
        'node_cpu_millicores = 4000\nnodemanager_user = "no-such-user-here"\n'
    )
    return config


def test_finding_nothing_is_said(agent_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "discover", "--config", str(agent_config)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no YARN containers on this node: not trusting the NodeManager")


def test_the_json_is_one_object(agent_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "discover", "--config", str(agent_config), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["containers"] == []
    assert "no-such-user-here" in found["problem"]
