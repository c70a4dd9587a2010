"""``yarn-adapt agent-token issue|list|revoke`` as an operator runs them, end to end
against the service's database and its agents' endpoint: the token printed once and
alone on stdout, issuing twice refused unless ``--rotate``, bad input in one line
with exit code 2, every issue and revoke in the audit log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.service.factories import sim_service
from yarn_adapt.cli import main
from yarn_adapt.service.state.agent_tokens import AgentTokens, token_id_of
from yarn_adapt.service.state.store import Store

NODE = "worker-1:8041"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(f'[state]\ndir = "{tmp_path / "state"}"\n')
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def database(tmp_path: Path) -> Store:
    return Store(tmp_path / "state" / "yarn-adapt.db")


def test_issue_prints_the_token_once_and_the_service_accepts_it(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "agent-token", "issue", NODE, "--config", str(config))
    assert code == 0
    token = out.strip()
    assert out == token + "\n"  # alone on stdout: `> token-file` keeps just the token
    token_id = token_id_of(token)
    assert token_id is not None
    assert f"node {NODE}: agent token {token_id} stored in {tmp_path / 'state'}" in err
    assert token not in err
    credential = AgentTokens(database(tmp_path)).verify(token)
    assert credential is not None and credential.node == NODE
    code, out, _ = run(capsys, "agent-token", "list", "--config", str(config))
    assert code == 0 and out.startswith(f"{NODE}  {token_id}  issued ")
    assert token not in out


def test_issuing_twice_is_refused_and_rotate_replaces_the_token(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, first, _ = run(capsys, "agent-token", "issue", NODE, "--config", str(config))
    first_id = token_id_of(first.strip())
    code, out, err = run(capsys, "agent-token", "issue", NODE, "--config", str(config))
    assert code == 2 and out == ""
    assert err == (
        f"yarn-adapt: node {NODE} already has agent token {first_id} (issued by "
        f"{_issuer(tmp_path)}); 'yarn-adapt agent-token issue --rotate {NODE}' replaces it, "
        f"and the old one stops working at once\n"
    )
    tokens = AgentTokens(database(tmp_path))
    assert tokens.verify(first.strip()) is not None  # the refused issue changed nothing
    code, out, _ = run(
        capsys, "agent-token", "issue", NODE, "--rotate", "--json", "--config", str(config)
    )
    assert code == 0
    rotated = json.loads(out)
    assert rotated["node"] == NODE and rotated["replaced"] == first_id
    assert tokens.verify(first.strip()) is None
    assert tokens.verify(rotated["token"]) is not None
    _, listed, _ = run(capsys, "agent-token", "list", "--json", "--config", str(config))
    assert [(r["node"], r["token_id"]) for r in json.loads(listed)] == [(NODE, rotated["token_id"])]


def test_revoke_stops_the_token_and_an_unknown_node_is_named(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "agent-token", "issue", NODE, "--config", str(config))
    token = out.strip()
    code, out, err = run(capsys, "agent-token", "revoke", "worker-9:8041", "--config", str(config))
    assert code == 2 and out == ""
    assert err == (
        f"yarn-adapt: node 'worker-9:8041' has no agent token (nodes that have one: {NODE})\n"
    )
    code, out, _ = run(capsys, "agent-token", "revoke", NODE, "--json", "--config", str(config))
    assert code == 0
    assert json.loads(out)["revoked"] is True and json.loads(out)["node"] == NODE
    assert AgentTokens(database(tmp_path)).verify(token) is None
    code, _, err = run(capsys, "agent-token", "revoke", NODE, "--config", str(config))
    assert code == 2 and "(nodes that have one: none)" in err
    _, listed, _ = run(capsys, "agent-token", "list", "--config", str(config))
    assert listed == "no node has an agent token (yarn-adapt agent-token issue NODE)\n"
    audit = [(a.action, a.detail) for a in database(tmp_path).audit_log()]
    token_id = token_id_of(token)
    assert audit == [
        ("revoke agent token", f"node {NODE}: token {token_id}"),
        ("issue agent token", f"node {NODE}: token {token_id}"),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["issue", "worker 1:8041"], "node 'worker 1:8041' is not a YARN node id"),
        (["issue", "a/b:1"], "node 'a/b:1' is not a YARN node id"),
        (["issue", ""], "node '' is not a YARN node id"),
    ],
)
def test_bad_node_names_end_in_one_line(
    config: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "agent-token", *argv, "--config", str(config))
    assert code == 2 and out == ""
    assert err.startswith(f"yarn-adapt: {message}") and err.count("\n") == 1


def test_a_missing_settings_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "agent-token", "list", "--config", str(tmp_path / "absent.toml"))
    assert code == 2 and "absent.toml: no such settings file" in err
    assert not (tmp_path / "state").exists()


def test_a_running_service_refuses_a_token_revoked_from_the_command_line(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yarn_adapt.service.web.app import create_app

    service = sim_service(tmp_path)  # the same [state] dir as the command line's
    client = create_app(service).test_client()
    _, out, _ = run(capsys, "agent-token", "issue", NODE, "--config", str(config))
    path = f"/api/agent/nodes/{NODE}/reclaim"
    headers = {"Authorization": f"Bearer {out.strip()}"}
    before = client.get(path, headers=headers)
    assert before.status_code == 400  # let in; this service has no guard (no real RM)
    assert run(capsys, "agent-token", "revoke", NODE, "--config", str(config))[0] == 0
    after = client.get(path, headers=headers)
    assert after.status_code == 403 and "invalid agent token" in after.get_json()["error"]
    service.close()


def _issuer(tmp_path: Path) -> str:
    return database(tmp_path).agent_tokens()[0].issued_by
