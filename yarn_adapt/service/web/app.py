"""The Flask app: JSON API under ``/api``, server-rendered pages, ``/metrics``.

Reads need no token (bind to 127.0.0.1, the default, or put a proxy in front);
every write needs the token (see :mod:`yarn_adapt.service.web.auth`). Errors from
the project's tree become JSON ``{"error": "<one line>"}`` with a fitting status
(404 unknown proposal, 409 the state does not allow it, 400 bad input, 502 the RM).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.wrappers import Response as BaseResponse

from yarn_adapt.errors import (
    InputError,
    ProposalNotFound,
    ProposalStateError,
    YarnAdaptError,
    YarnError,
)
from yarn_adapt.service.records import ProposalRecord
from yarn_adapt.service.service import Service
from yarn_adapt.service.web import auth
from yarn_adapt.service.web.views import (
    apply_view,
    audit_view,
    decision_view,
    proposal_detail,
    proposal_summary,
    round_view,
)

log = logging.getLogger(__name__)

ACTIONS = ("approve", "reject", "apply", "rollback")


def create_app(service: Service) -> Flask:
    app = Flask(__name__)
    app.secret_key = secrets.token_bytes(32)  # sessions end when the service restarts
    app.config.update(
        SESSION_COOKIE_NAME="yarn_adapt_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        MAX_CONTENT_LENGTH=64 * 1024,
    )
    app.extensions["yarn_adapt"] = service
    app.register_blueprint(api_blueprint(service))
    app.register_blueprint(pages_blueprint(service))
    app.add_url_rule("/metrics", "metrics", lambda: _metrics(service))
    app.add_url_rule("/healthz", "healthz", lambda: jsonify(ok=True))
    app.register_error_handler(YarnAdaptError, _api_error)
    app.jinja_env.globals.update(csrf_token=auth.csrf_token, is_operator=auth.is_operator)
    app.jinja_env.filters["when"] = _when
    return app


def _metrics(service: Service) -> Response:
    return Response(service.metrics.exposition(), mimetype="text/plain; version=0.0.4")


def act(service: Service, proposal_id: int, action: str, actor: str) -> ProposalRecord:
    """Run one operator action through the desk."""
    desk = service.desk
    handlers: dict[str, Callable[[], ProposalRecord]] = {
        "approve": lambda: desk.approve(proposal_id, actor),
        "reject": lambda: desk.reject(proposal_id, actor, "rejected by an operator"),
        "apply": lambda: desk.apply(proposal_id, actor),
        "rollback": lambda: desk.rollback(proposal_id, actor),
    }
    if action not in handlers:
        raise InputError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
    log.info("%s asks to %s proposal %d", actor, action, proposal_id)
    return handlers[action]()


def status_code(error: YarnAdaptError) -> int:
    if isinstance(error, ProposalNotFound):
        return 404
    if isinstance(error, ProposalStateError):
        return 409
    if isinstance(error, YarnError):
        return 502
    return 400 if isinstance(error, InputError) else 500


def _api_error(error: YarnAdaptError) -> tuple[Response, int]:
    return jsonify(error=error.one_line()), status_code(error)


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp))


# --------------------------------------------------------------------------- API


def api_blueprint(service: Service) -> Blueprint:
    api = Blueprint("api", __name__, url_prefix="/api")
    store = service.store

    def write_allowed() -> tuple[Response, int] | None:
        given = auth.bearer_token(request)
        if given is None:
            return jsonify(error="write actions need 'Authorization: Bearer <token>'"), 401
        if not auth.token_matches(given, service.token):
            log.warning("refused a write with an invalid token from %s", request.remote_addr)
            return jsonify(error="invalid token"), 403
        return None

    @api.get("/status")
    def status() -> Response:
        return jsonify(service.loop.status())

    @api.get("/proposals")
    def proposals() -> Response:
        return jsonify([proposal_summary(p) for p in store.proposals(limit=_limit())])

    @api.get("/proposals/<int:proposal_id>")
    def proposal(proposal_id: int) -> Response:
        return jsonify(_detail(service, proposal_id))

    @api.post("/proposals/<int:proposal_id>/<action>")
    def proposal_action(proposal_id: int, action: str) -> Any:
        refused = write_allowed()
        if refused is not None:
            return refused
        record = act(service, proposal_id, action, actor="api")
        return jsonify(_detail(service, record.id))

    @api.post("/rounds")
    def run_round() -> Any:
        refused = write_allowed()
        if refused is not None:
            return refused
        return jsonify(round_view(service.loop.run_round()))

    @api.get("/rounds")
    def rounds() -> Response:
        return jsonify([round_view(r) for r in store.rounds(limit=_limit())])

    @api.get("/applies")
    def applies() -> Response:
        return jsonify([apply_view(a) for a in store.applies(limit=_limit())])

    @api.get("/decisions")
    def decisions() -> Response:
        recent = store.decisions(limit=_limit())
        return jsonify([{"at": at, **decision_view(d)} for at, d in recent])

    @api.get("/audit")
    def audit() -> Response:
        return jsonify([audit_view(a) for a in store.audit_log(limit=_limit())])

    return api


def _local_path(target: str | None) -> str | None:
    """Only a path on this site: never redirect a sign-in elsewhere."""
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return None


def _limit() -> int:
    try:
        return max(1, min(500, int(request.args.get("limit", "50"))))
    except ValueError:
        return 50


def _detail(service: Service, proposal_id: int) -> dict[str, Any]:
    store = service.store
    proposal = store.proposal(proposal_id)
    return proposal_detail(
        proposal,
        store.realized(proposal_id),
        store.applies(proposal_id=proposal_id),
        store.audit_log(proposal_id=proposal_id),
    )


# --------------------------------------------------------------------------- pages


def pages_blueprint(service: Service) -> Blueprint:
    pages = Blueprint("pages", __name__, template_folder="templates", static_folder="static")
    store = service.store

    @pages.get("/")
    def index() -> str:
        return render_template(
            "index.html",
            status=service.loop.status(),
            proposals=[proposal_summary(p) for p in store.proposals(limit=30)],
            applies=[apply_view(a) for a in store.applies(limit=20)],
            rounds=[round_view(r) for r in store.rounds(limit=10)],
            token_configured=bool(service.token),
        )

    @pages.get("/proposals/<int:proposal_id>")
    def proposal(proposal_id: int) -> str | tuple[str, int]:
        try:
            detail = _detail(service, proposal_id)
        except ProposalNotFound as exc:
            return render_template("error.html", message=exc.one_line()), 404
        return render_template("proposal.html", p=detail)

    @pages.post("/proposals/<int:proposal_id>/<action>")
    def proposal_action(proposal_id: int, action: str) -> BaseResponse | tuple[str, int]:
        if not auth.is_operator():
            return render_template("error.html", message="sign in with the token first"), 403
        if not auth.form_is_genuine(request):
            return render_template("error.html", message="the form is stale or foreign"), 403
        try:
            record = act(service, proposal_id, action, actor="operator (web)")
            flash(f"{action}: proposal {record.id} is now {record.state}. {record.note}")
        except YarnAdaptError as exc:
            flash(f"{action} refused: {exc.one_line()}")
        return redirect(url_for("pages.proposal", proposal_id=proposal_id))

    @pages.route("/login", methods=["GET", "POST"])
    def login() -> BaseResponse | str | tuple[str, int]:
        if request.method == "GET":
            return render_template("login.html", token_configured=bool(service.token))
        if not auth.token_matches(request.form.get("token"), service.token):
            log.warning("refused a sign-in with an invalid token from %s", request.remote_addr)
            return render_template("login.html", error="invalid token", token_configured=True), 403
        auth.sign_in()
        return redirect(_local_path(request.args.get("next")) or url_for("pages.index"))

    @pages.post("/logout")
    def logout() -> BaseResponse:
        if auth.form_is_genuine(request):
            session.clear()
        return redirect(url_for("pages.index"))

    return pages
