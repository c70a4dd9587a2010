"""Which credential each endpoint takes -- one job per credential -- and the answer
when it is missing, wrong or of the wrong kind.

===============================================  ======================================
endpoint                                         credential
===============================================  ======================================
API writes (``POST /api/...``: a proposal's      an operator token -- the shared one or
actions, rounds, a version's revert, the guard   a named operator's -- as a bearer
mode)
page forms                                       a session signed in on ``/login`` with
                                                 an operator token, and its CSRF token
``GET /api/agent/nodes/<node>/reclaim``          ``<node>``'s own agent token
                                                 (:mod:`yarn_adapt.service.state.agent_tokens`)
===============================================  ======================================

Answers: no bearer is 401; a valid agent token where the operator token is needed, or
on another node's endpoint, is 403 naming whose token it is (a real credential in the
wrong place, so it is logged but not counted as a guess); any other failed check is
403 and charged to the client; an operator-token check from a client locked out by
its own failures is 429 with ``Retry-After`` before anything is compared (see
:mod:`yarn_adapt.service.web.throttle` for why agent tokens are never locked out).

The agent endpoint never compares what it is given with the operator token: the
operator token, a revoked agent token and a guess all get the same 403, so the
endpoint is no way to test guesses of the operator token.

Who acted (:func:`operator_name_of`): a named operator token
(:mod:`~yarn_adapt.service.web.operators`) names its operator; the shared token is
recorded as :data:`~yarn_adapt.service.web.operators.SHARED`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flask import Response, current_app, jsonify, request

from yarn_adapt.service.state.agent_tokens import AgentCredential, AgentTokens
from yarn_adapt.service.web import auth
from yarn_adapt.service.web.operators import SHARED, OperatorTokens
from yarn_adapt.service.web.throttle import LoginThrottle

if TYPE_CHECKING:
    from yarn_adapt.service.service import Service

log = logging.getLogger(__name__)
# Paths and node names from the URL are logged with %r: a %0A in them cannot forge a line.

THROTTLE_EXTENSION = "yarn_adapt_throttle"


@dataclass(frozen=True)
class Refusal:
    """Why a request may not act: its status and one line for the client."""

    status: int
    message: str
    retry_after_s: int | None = None

    def response(self) -> Response:
        response = jsonify(error=self.message)
        response.status_code = self.status
        if self.retry_after_s is not None:
            response.headers["Retry-After"] = str(self.retry_after_s)
        return response


def throttle() -> LoginThrottle:
    found: LoginThrottle = current_app.extensions[THROTTLE_EXTENSION]
    return found


def client() -> str:
    return request.remote_addr or "unknown"


# --------------------------------------------------------------------------- operator


def operator_refusal(service: Service) -> Response | None:
    """Why this API write is refused (as the JSON answer); None: the bearer is the
    operator token."""
    given = auth.bearer_token(request)
    if given is None:
        return Refusal(
            401, "write actions need the operator token: 'Authorization: Bearer <token>'"
        ).response()
    refusal = operator_token_refusal(service, given, f"{request.method} {request.path}")
    return None if refusal is None else refusal.response()


def operator_token_refusal(service: Service, given: str, action: str) -> Refusal | None:
    """Why ``given`` may not do ``action`` (the operator's); None: it is the operator
    token. Checks against the operator token are throttled per client."""
    agent = AgentTokens(service.store).verify(given)
    if agent is not None:
        log.warning("refused %s from %s: %r needs the operator token", agent, client(), action)
        return Refusal(
            403,
            f"{action} needs the operator token; {agent} may only read node "
            f"{agent.node}'s reclaim request and report what its agent does",
        )
    wait_s = throttle().retry_after_s(client())
    if wait_s is not None:
        log.warning("throttled a token check from %s for %d s", client(), wait_s)
        return Refusal(429, f"too many invalid tokens: retry in {wait_s} s", wait_s)
    if operator_name_of(service, given) is not None:
        throttle().succeeded(client())
        return None
    throttle().failed(client())
    log.warning("refused %r with an invalid token from %s", action, client())
    return Refusal(403, f"invalid token: {action} needs the operator token")


def operator_name_of(service: Service, given: str) -> str | None:
    """Who ``given`` speaks for: a named operator, the shared token's holder, or
    None (not an operator token). Not throttled: call it after the checks above."""
    named = OperatorTokens(service.store).verify(given)
    if named is not None:
        return named
    return SHARED if auth.token_matches(given, service.token) else None


def api_actor(service: Service) -> str:
    """Who made this (already checked) API write, for the audit log."""
    given = auth.bearer_token(request) or ""
    return f"{operator_name_of(service, given) or 'unknown'} (api)"


def page_actor() -> str:
    """Who made this (signed-in) page action, for the audit log."""
    return f"{auth.operator_name() or SHARED} (web)"


def operators_exist(service: Service) -> bool:
    """Whether anyone can sign in at all (a shared or a named token exists)."""
    return bool(service.token) or bool(service.store.operator_tokens())


# --------------------------------------------------------------------------- agents


def agent_refusal(service: Service, node: str) -> Response | None:
    """Why this request may not act for ``node``'s agent (as the JSON answer); None:
    the bearer is ``node``'s agent token. Never throttled (see the throttle)."""
    expected = f"node {node}'s agent token (yarn-adapt agent-token issue {node})"
    given = auth.bearer_token(request)
    if given is None:
        needed = f"the agent endpoint needs 'Authorization: Bearer <{expected}>'"
        return Refusal(401, needed).response()
    agent = AgentTokens(service.store).verify(given)
    if agent is None:
        throttle().failed(client())
        log.warning("refused an invalid agent token for node %r from %s", node, client())
        return Refusal(
            403,
            f"invalid agent token: this endpoint takes {expected}; the operator token is "
            f"not accepted here",
        ).response()
    if agent.node != node:
        log.warning("refused %s from %s on node %r's agent endpoint", agent, client(), node)
        return Refusal(
            403,
            f"{agent} may only read and report for node {agent.node}, not node {node}'s "
            f"agent endpoint",
        ).response()
    # A success clears nothing: the agent shares its host's address with the tenants'
    # containers there, and a guesser's lock-out must outlast the agent's polls.
    _served(agent)
    return None


def _served(agent: AgentCredential) -> None:
    """An agent polls every few seconds: its successes are logged at debug level only."""
    log.debug("%s from %s: %s %r", agent, client(), request.method, request.path)
