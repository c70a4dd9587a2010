"""Careful hands on approve, reject and roll back (issue 29, item 6): a confirmation
step saying what will happen, with the operator's reason recorded; named operator
tokens so the audit says who; the wording of what happened; no sign-in prompt where
no token exists."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from tests.service.factories import (
    TOKEN,
    FixedProposer,
    settings_for,
    sim_service,
    simulated_backend,
)
from yarn_adapt.cli import main
from yarn_adapt.service.service import Service
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.operators import OperatorTokens

LOCAL = {"Origin": "http://localhost"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """Proposal 1 (q1 50 -> 70) pending."""
    built = sim_service(tmp_path)
    built.loop.run_round()
    yield built
    built.close()


def _csrf(client: FlaskClient, path: str = "/proposals/1") -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', client.get(path).get_data(as_text=True))
    assert match
    return match.group(1)


def _signed_in(service: Service, token: str = TOKEN) -> FlaskClient:
    client = create_app(service).test_client()
    assert client.post("/login", data={"token": token}).status_code == 302
    return client


def test_one_click_never_acts_it_opens_the_confirmation(service: Service) -> None:
    client = _signed_in(service)
    page = client.get("/proposals/1").get_data(as_text=True)
    assert (
        'href="/proposals/1/confirm/approve"' in page
        and '<form method="post" action="/proposals/1/approve"' not in page
    )
    reply = client.post("/proposals/1/approve", data={"csrf": _csrf(client)}, headers=LOCAL)
    assert reply.status_code == 302
    assert reply.headers["Location"].endswith("/proposals/1/confirm/approve")
    assert service.store.proposal(1).state == "pending"


def test_the_confirmation_says_what_happens_and_keeps_the_reason(service: Service) -> None:
    client = _signed_in(service)
    confirm = client.get("/proposals/1/confirm/approve").get_data(as_text=True)
    assert "Approving applies proposal 1 at once: 2 change(s) to capacity-scheduler.xml" in confirm
    assert 'name="reason"' in confirm and 'name="confirm" value="yes"' in confirm
    assert "<td>root.q1</td><td>capacity</td><td>50</td><td><strong>70</strong></td>" in confirm
    reason = "the q1 backlog has grown for a week; ticket OPS-1234"
    reply = client.post(
        "/proposals/1/approve",
        data={"csrf": _csrf(client), "confirm": "yes", "reason": reason},
        headers=LOCAL,
    )
    assert reply.status_code == 302
    page = client.get("/proposals/1").get_data(as_text=True)
    assert "Proposal 1 approved and applied: the RM runs it now." in page
    assert service.store.proposal(1).state == "applied"
    [approval] = [a for a in service.store.audit_log(proposal_id=1) if a.action == "approve"]
    assert approval.reason == reason and approval.actor == "operator (shared token) (web)"
    [applied] = service.store.applies(proposal_id=1)
    assert applied.reason == reason
    assert f"because “{reason}”" in page  # the audit trail on the page
    # after the apply the old value is no longer "now"
    assert "<th>before</th><th>now (applied)</th>" in page

    rollback = client.get("/proposals/1/confirm/rollback").get_data(as_text=True)
    assert "makes the RM run the configuration it replaced again" in rollback
    assert "<th>runs now</th><th>goes back to</th>" in rollback
    client.post(
        "/proposals/1/rollback",
        data={"csrf": _csrf(client), "confirm": "yes", "reason": "q2 starves"},
        headers=LOCAL,
    )
    page = client.get("/proposals/1").get_data(as_text=True)
    assert "Proposal 1 rolled back: the configuration it replaced runs again." in page
    assert "is now rolled-back" not in page


def test_the_api_takes_a_reason_and_names_the_operator(service: Service) -> None:
    issued = OperatorTokens(service.store).issue("alice", "test")
    client = create_app(service).test_client()
    reply = client.post(
        "/api/proposals/1/reject",
        headers={"Authorization": f"Bearer {issued.token}"},
        json={"reason": "not during the quarter-end"},
    )
    assert reply.status_code == 200, reply.get_json()
    [rejection] = [a for a in reply.get_json()["audit"] if a["action"] == "reject"]
    assert rejection["actor"] == "alice (api)"
    assert rejection["reason"] == "not during the quarter-end"
    assert service.store.proposal(1).note == "rejected by alice (api): not during the quarter-end"


def test_a_named_operator_signs_in_and_the_audit_says_who(service: Service) -> None:
    tokens = OperatorTokens(service.store)
    issued = tokens.issue("bob@example.com", "test")
    client = _signed_in(service, issued.token)
    client.post(
        "/proposals/1/approve", data={"csrf": _csrf(client), "confirm": "yes"}, headers=LOCAL
    )
    assert [a.actor for a in service.store.applies(proposal_id=1)] == ["bob@example.com (web)"]
    tokens.revoke("bob@example.com", "test")
    fresh = create_app(service).test_client()
    assert fresh.post("/login", data={"token": issued.token}).status_code == 403


def test_without_any_token_the_page_says_it_is_read_only(tmp_path: Path) -> None:
    """The auto-approve demo has no token: no "Sign in to roll back" it cannot honour."""
    service = Service.build(
        settings_for(tmp_path, service={"auto_approve": True}),
        simulated_backend(tmp_path),
        FixedProposer(),
        token=None,
    )
    service.loop.run_round()
    assert service.store.proposal(1).state == "applied"
    page = create_app(service).test_client().get("/proposals/1").get_data(as_text=True)
    assert "Sign in" not in page.split('id="actions"')[1].split("</div>")[0]
    assert "Read-only: this service has no operator token, so nobody can rollback here." in page
    service.close()


def test_operator_tokens_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(f'[state]\ndir = "{tmp_path / "state"}"\n')
    assert main(["operator-token", "issue", "carol", "--config", str(config)]) == 0
    token = capsys.readouterr().out.strip()
    assert token.startswith("yao.")
    assert main(["operator-token", "issue", "carol", "--config", str(config)]) == 2
    assert "already has token" in capsys.readouterr().err
    assert main(["operator-token", "list", "--config", str(config), "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["name"] == "carol" and token.split(".")[1] == listed["token_id"]
    assert main(["operator-token", "revoke", "carol", "--config", str(config)]) == 0
    assert "revoked operator carol's token" in capsys.readouterr().out
