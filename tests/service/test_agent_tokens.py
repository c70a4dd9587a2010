"""One job per credential: a node agent's token reads its own node's reclaim request
and nothing else; the operator token is refused at the agents' endpoint; a revoked
token fails at once; the database keeps no token in clear; and one client's failed
guesses lock out neither the agents nor operators elsewhere."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from flask.testing import FlaskClient

from tests.service.factories import TOKEN, settings_for, sim_service
from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.errors import InputError
from yarn_adapt.service.backend import Observed, YarnBackend
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.agent_tokens import AgentTokens, token_id_of
from yarn_adapt.service.state.records import Suggestion
from yarn_adapt.service.state.schema import MIGRATIONS, SCHEMA_AGENT_TOKENS, SCHEMA_VERSION
from yarn_adapt.service.state.store import Store
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.operators import OperatorTokens
from yarn_adapt.service.web.throttle import LoginThrottle

NODE = "worker-1:8041"
OTHER = "worker-2:8041"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
GUESSER = {"REMOTE_ADDR": "10.0.0.7"}  # a tenant container on NODE's host
ELSEWHERE = {"REMOTE_ADDR": "10.9.9.9"}  # an operator's desk


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class NothingToPropose:
    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        return None


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def reclaim_path(node: str) -> str:
    return f"/api/agent/nodes/{quote(node, safe='')}/reclaim"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Service]:
    """A service whose guard is on in auto (its RM is never asked in these tests)."""
    settings = settings_for(
        tmp_path,
        yarn={"rm": ["http://127.0.0.1:1"]},
        scheduler={"via": "mutation"},
        colocation={"enabled": True, "mode": "auto", "demand": "none"},
    )
    service = Service.build(settings, YarnBackend(settings), NothingToPropose(), token=TOKEN)
    yield service
    service.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(guarded: Service, clock: FakeClock) -> FlaskClient:
    return create_app(guarded, LoginThrottle(clock=clock)).test_client()


def issue(service: Service, node: str = NODE) -> str:
    return AgentTokens(service.store).issue(node, "test").token


# --------------------------------------------------------------------------- the table


def test_an_issued_token_speaks_for_its_node_and_nothing_else(tmp_path: Path) -> None:
    tokens = AgentTokens(Store(tmp_path / "state.db"))
    token = tokens.issue(NODE, "test").token
    credential = tokens.verify(token)
    assert credential is not None and credential.node == NODE
    token_id = token_id_of(token)
    assert token_id is not None and credential.token_id == token_id
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert tokens.verify(forged) is None  # the right id, a wrong secret
    assert tokens.verify(token + "x") is None
    assert tokens.verify(TOKEN) is None
    assert tokens.verify("") is None


def test_the_database_keeps_no_token_in_clear(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = Store(path)
    tokens = [AgentTokens(store).issue(node, "test").token for node in (NODE, OTHER)]
    rows = sqlite3.connect(path).execute("SELECT * FROM agent_tokens").fetchall()
    assert len(rows) == 2
    stored = repr(rows)
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("state.db"))
    for token in tokens:
        secret = token.rsplit(".", 1)[1]
        assert token not in stored and secret not in stored
        assert secret.encode() not in files  # nor in the WAL
    assert "sha256" not in repr(AgentTokens(store).listed())  # nor in a record's repr
    store.close()


def test_an_older_database_gains_the_token_table(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    connection = sqlite3.connect(path)
    connection.execute("DROP TABLE agent_tokens")
    for later in (  # what came after it
        "DROP TABLE operator_tokens",
        "DROP TABLE run_summary",
        "ALTER TABLE audit DROP COLUMN reason",
        "ALTER TABLE applies DROP COLUMN reason",
    ):
        connection.execute(later)
    connection.execute(f"PRAGMA user_version = {MIGRATIONS.index(SCHEMA_AGENT_TOKENS)}")
    connection.commit()
    connection.close()
    store = Store(path)
    assert store.schema_version == SCHEMA_VERSION
    assert AgentTokens(store).verify(AgentTokens(store).issue(NODE, "test").token) is not None


@pytest.mark.parametrize("node", ["", "worker 1:8041", "a/b:1", "-x:1", "x" * 256, "nö:1"])
def test_a_node_name_the_agents_path_cannot_carry_is_refused(tmp_path: Path, node: str) -> None:
    with pytest.raises(InputError, match="is not a YARN node id"):
        AgentTokens(Store(tmp_path / "state.db")).issue(node, "test")


# --------------------------------------------------------------------------- the agents' endpoint


def test_an_agent_token_reads_its_own_node_only(client: FlaskClient, guarded: Service) -> None:
    token = issue(guarded)
    issue(guarded, OTHER)
    own = client.get(reclaim_path(NODE), headers=bearer(token))
    assert own.status_code == 404  # let in: nothing is asked of the node yet
    assert own.get_json() == {"error": f"nothing is asked of node {NODE}"}
    other = client.get(reclaim_path(OTHER), headers=bearer(token))
    assert other.status_code == 403
    assert f"node {NODE}'s agent token" in other.get_json()["error"]
    assert f"not node {OTHER}'s" in other.get_json()["error"]


def test_the_operator_token_is_refused_at_the_agents_endpoint(
    client: FlaskClient, guarded: Service
) -> None:
    issue(guarded)
    refused = client.get(reclaim_path(NODE), headers=OPERATOR)
    assert refused.status_code == 403
    error = refused.get_json()["error"]
    assert f"takes node {NODE}'s agent token (yarn-adapt agent-token issue {NODE})" in error
    assert "the operator token is not accepted here" in error
    assert TOKEN not in refused.get_data(as_text=True)
    missing = client.get(reclaim_path(NODE))
    assert (
        missing.status_code == 401 and f"node {NODE}'s agent token" in missing.get_json()["error"]
    )


def test_a_revoked_or_rotated_token_is_refused_at_once(
    client: FlaskClient, guarded: Service, tmp_path: Path
) -> None:
    tokens = AgentTokens(guarded.store)
    first = tokens.issue(NODE, "test").token
    assert client.get(reclaim_path(NODE), headers=bearer(first)).status_code == 404
    second = tokens.issue(NODE, "test", rotate=True).token
    assert client.get(reclaim_path(NODE), headers=bearer(first)).status_code == 403
    assert client.get(reclaim_path(NODE), headers=bearer(second)).status_code == 404
    # revoked by another process holding the same database (the CLI)
    AgentTokens(Store(guarded.store.path)).revoke(NODE, "another process")
    assert client.get(reclaim_path(NODE), headers=bearer(second)).status_code == 403


WRITES = [
    "/api/proposals/1/approve",
    "/api/proposals/1/apply",
    "/api/proposals/1/reject",
    "/api/proposals/1/rollback",
    "/api/rounds",
    "/api/versions/1/revert",
]


@pytest.mark.parametrize("path", WRITES)
def test_an_agent_token_may_not_act_as_the_operator(tmp_path: Path, path: str) -> None:
    service = sim_service(tmp_path)
    service.loop.run_round()  # proposal 1, pending
    token = issue(service)
    client = create_app(service).test_client()
    refused = client.post(path, headers=bearer(token))
    assert refused.status_code == 403
    error = refused.get_json()["error"]
    assert f"POST {path} needs the operator token" in error
    assert f"node {NODE}'s agent token" in error
    assert service.store.proposal(1).state == "pending"
    assert len(service.store.rounds()) == 1
    assert client.post("/api/proposals/1/approve", headers=OPERATOR).status_code == 200


def test_an_agent_token_may_not_switch_the_guard_nor_sign_in(
    client: FlaskClient, guarded: Service, caplog: pytest.LogCaptureFixture
) -> None:
    token = issue(guarded)
    token_id = token_id_of(token)
    with caplog.at_level(logging.WARNING, logger="yarn_adapt.service.web.access"):
        mode = client.post("/api/guard/mode", headers=bearer(token), json={"mode": "off"})
    assert mode.status_code == 403
    assert "POST /api/guard/mode needs the operator token" in mode.get_json()["error"]
    assert guarded.guard is not None and guarded.guard.guard.mode is GuardMode.AUTO
    assert f"refused node {NODE}'s agent token {token_id}" in caplog.text  # whose it was
    assert token not in caplog.text
    login = client.post("/login", data={"token": token})
    assert login.status_code == 403
    assert "signing in needs the operator token" in login.get_data(as_text=True)
    switched = client.post("/api/guard/mode", headers=OPERATOR, json={"mode": "recommend"})
    assert switched.status_code == 200 and guarded.guard.guard.mode is GuardMode.RECOMMEND


def test_the_audit_names_who_switched_the_guard(client: FlaskClient, guarded: Service) -> None:
    alice = OperatorTokens(guarded.store).issue("alice", "test").token
    by_api = client.post("/api/guard/mode", headers=bearer(alice), json={"mode": "off"})
    assert by_api.status_code == 200
    assert client.post("/login", data={"token": alice}).status_code == 302
    page = client.get("/").get_data(as_text=True)
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    assert client.post("/guard/mode", data={"mode": "recommend", "csrf": csrf}).status_code == 302
    shared = client.post("/api/guard/mode", headers=OPERATOR, json={"mode": "off"})
    assert shared.status_code == 200
    switches = [a.detail for a in guarded.store.audit_log() if a.action == "guard mode"]
    assert sorted(switches) == [
        "alice (api): auto -> off",
        "alice (web): off -> recommend",
        "operator (shared token) (api): recommend -> off",
    ]


# --------------------------------------------------------------------------- the throttle


def test_a_guesser_locks_out_only_itself(
    client: FlaskClient, guarded: Service, clock: FakeClock
) -> None:
    token = issue(guarded)
    guesses = [
        client.post(
            "/api/guard/mode", headers=bearer(f"guess-{n:04d}-operator"), environ_base=GUESSER
        ).status_code
        for n in range(8)
    ]
    assert guesses == [403] * 6 + [429] * 2
    agent_shaped = f"yaa.{'0' * 16}.{'A' * 43}"
    for _ in range(20):  # guessing agent tokens, from the agent's own host
        wrong = client.get(reclaim_path(NODE), headers=bearer(agent_shaped), environ_base=GUESSER)
        assert wrong.status_code == 403
    for _ in range(3):  # the agent on that host is served all the same
        served = client.get(reclaim_path(NODE), headers=bearer(token), environ_base=GUESSER)
        assert served.status_code == 404
    # the agent's successes did not clear the guesser's record, ...
    still = client.post("/api/guard/mode", headers=OPERATOR, environ_base=GUESSER)
    assert still.status_code == 429 and int(still.headers["Retry-After"]) > 1
    # ... and an operator elsewhere is not locked out
    operator = client.post(
        "/api/guard/mode", headers=OPERATOR, json={"mode": "auto"}, environ_base=ELSEWHERE
    )
    assert operator.status_code == 200
    signed_in = client.post("/login", data={"token": TOKEN}, environ_base=ELSEWHERE)
    assert signed_in.status_code == 302


def test_failures_at_the_agents_endpoint_are_charged_to_the_client(
    client: FlaskClient, guarded: Service
) -> None:
    issue(guarded)
    for _ in range(6):
        assert client.get(reclaim_path(NODE), headers=OPERATOR).status_code == 403
    locked = client.post("/api/guard/mode", headers=OPERATOR, json={"mode": "off"})
    assert locked.status_code == 429
    assert guarded.guard is not None and guarded.guard.guard.mode is GuardMode.AUTO


def test_the_page_refuses_auto_without_a_floor_in_words(tmp_path: Path) -> None:
    """Auto with no floor is refused by the settings; turning it on from the page later
    is refused the same way, as a page, not an unhandled error."""
    settings = settings_for(
        tmp_path,
        yarn={"rm": ["http://127.0.0.1:1"]},
        scheduler={"via": "mutation"},
        colocation={"enabled": True, "mode": "recommend", "demand": "none",
                    "min_visible_fraction": 0.0},
    )  # fmt: skip
    service = Service.build(settings, YarnBackend(settings), NothingToPropose(), token=TOKEN)
    try:
        client = create_app(service).test_client()
        assert client.post("/login", data={"token": TOKEN}).status_code == 302
        page = client.get("/").get_data(as_text=True)
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        reply = client.post("/guard/mode", data={"mode": "auto", "csrf": csrf})
        assert reply.status_code == 400 and reply.mimetype == "text/html"  # a page, not JSON
        assert "mode auto needs" in reply.get_data(as_text=True)
        assert service.guard is not None and service.guard.guard.mode is GuardMode.RECOMMEND
    finally:
        service.close()


def test_an_agent_reports_what_it_does_for_its_own_node_only(
    client: FlaskClient, guarded: Service
) -> None:
    token = issue(guarded)
    issue(guarded, OTHER)
    report = f"/api/agent/nodes/{quote(NODE, safe='')}/report"
    said = {"lines": [f"node {NODE} at 12:00:00: trusted", "  suppress: batch quota 650m"]}
    assert client.post(report, json=said, headers=bearer(token)).status_code == 204
    agents = client.get("/api/guard").get_json()["agents"]
    assert agents[NODE]["lines"] == said["lines"]
    other = f"/api/agent/nodes/{quote(OTHER, safe='')}/report"
    refused = client.post(other, json=said, headers=bearer(token))
    assert refused.status_code == 403 and f"not node {OTHER}'s" in refused.get_json()["error"]
    assert client.post(report, json=said, headers=OPERATOR).status_code == 403
    assert client.post(report, json=said).status_code == 401
    bad = client.post(report, json={"lines": ["x"] * 13}, headers=bearer(token))
    assert bad.status_code == 400
    assert bad.get_json() == {"error": "an agent report has at most 12 lines, not 13"}
    assert set(client.get("/api/guard").get_json()["agents"]) == {NODE}  # nothing else kept
