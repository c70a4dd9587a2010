"""The Flask app: JSON API under ``/api``, server-rendered pages, ``/metrics``.

Reads need no token (bind to 127.0.0.1, the default, or put a proxy in front);
every write needs an operator token -- the shared one or a named operator's, who the
audit log then names -- and a node agent's endpoint that node's agent token (see
:mod:`yarn_adapt.service.web.access` and :mod:`~.auth`); failed operator-token
checks are throttled per client (429 with ``Retry-After``).

On the page, approve, reject, apply and roll back take two steps: the button opens
a confirmation page (``GET /proposals/N/confirm/<action>``) saying what will happen,
with a field for the operator's reason; only its form (``confirm=yes``) acts. The
reason is kept in the audit log and with the apply. The API takes the reason as
``{"reason": "..."}``. Errors from
the project's tree become JSON ``{"error": "<one line>"}`` with a fitting status
(404 unknown proposal, 409 the state does not allow it, 400 bad input, 502 the RM).
An id in a path is a SQLite row id: anything outside ``1..2**63-1`` never matches a
route, so it is a 404 like any unknown proposal. Every response carries the
security headers of :data:`SECURITY_HEADERS` (the templates have no inline script
or style, so the policy allows none).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.routing import BaseConverter, ValidationError
from werkzeug.wrappers import Response as BaseResponse

from yarn_adapt.errors import (
    InputError,
    ProposalNotFound,
    ProposalStateError,
    YarnAdaptError,
    YarnError,
)
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import AuditKind, ProposalRecord, ProposalState
from yarn_adapt.service.state.versions import note_running, standings
from yarn_adapt.service.web import access, auth, words
from yarn_adapt.service.web.console import (
    change_columns,
    change_words,
    confirm_words,
    evidence_rows,
    interval_rows,
    job_links,
)
from yarn_adapt.service.web.console_routes import console_blueprint, overview
from yarn_adapt.service.web.guard_routes import guard_blueprint
from yarn_adapt.service.web.operators import SHARED
from yarn_adapt.service.web.throttle import LoginThrottle
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
SQLITE_MAX_ROWID = 2**63 - 1

SECURITY_HEADERS = {
    # Only our own stylesheet; no script at all; forms post only to us; never framed.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # same-origin keeps the Origin header on our own form posts (no-referrer would
    # make the browser send "Origin: null") and sends nothing to other sites.
    "Referrer-Policy": "same-origin",
}


class RowIdConverter(BaseConverter):
    """``<rowid:name>``: a decimal id SQLite can hold; anything else is no match (404)."""

    regex = r"\d{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 1 <= number <= SQLITE_MAX_ROWID:
            raise ValidationError()
        return number

    def to_url(self, value: object) -> str:
        return str(int(value))  # type: ignore[call-overload]


def create_app(service: Service, throttle: LoginThrottle | None = None) -> Flask:
    app = Flask(__name__)
    app.secret_key = secrets.token_bytes(32)  # sessions end when the service restarts
    public_url = service.settings.http.public_url
    app.config.update(
        SESSION_COOKIE_NAME="yarn_adapt_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_SECURE=public_url.startswith("https://"),
        MAX_CONTENT_LENGTH=64 * 1024,
        PUBLIC_ORIGIN=auth.origin_of(public_url) if public_url else None,
    )
    app.url_map.converters["rowid"] = RowIdConverter
    app.extensions["yarn_adapt"] = service
    app.extensions[access.THROTTLE_EXTENSION] = throttle or LoginThrottle()
    app.after_request(_add_security_headers)
    app.register_blueprint(api_blueprint(service))
    app.register_blueprint(pages_blueprint(service))
    app.register_blueprint(console_blueprint(service))
    app.register_blueprint(guard_blueprint(service))
    app.add_url_rule("/metrics", "metrics", lambda: _metrics(service))
    app.add_url_rule("/healthz", "healthz", lambda: jsonify(ok=True))
    app.register_error_handler(YarnAdaptError, _api_error)
    app.jinja_env.globals.update(csrf_token=auth.csrf_token, is_operator=auth.is_operator)
    app.jinja_env.filters.update(
        when=words.when,
        clock=words.clock,
        duration=words.duration,
        percent=words.percent,
        change=words.change_percent,
        short=lambda note: words.short_note(note or "")[0],
        long=lambda note: words.short_note(note or "")[1],
        file_name=words.file_name,
    )
    return app


def _add_security_headers(response: BaseResponse) -> BaseResponse:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def _metrics(service: Service) -> Response:
    return Response(service.metrics.exposition(), mimetype="text/plain; version=0.0.4")


REASON_MAX = 500
"""An operator's reason is kept to this many characters."""


def act(
    service: Service, proposal_id: int, action: str, actor: str, reason: str = ""
) -> ProposalRecord:
    """Run one operator action through the desk."""
    desk = service.desk
    why = " ".join(reason.split())[:REASON_MAX]
    handlers: dict[str, Callable[[], ProposalRecord]] = {
        "approve": lambda: desk.approve(proposal_id, actor, why),
        "reject": lambda: desk.reject(proposal_id, actor, why),
        "apply": lambda: desk.apply(proposal_id, actor, why),
        "rollback": lambda: desk.rollback(proposal_id, actor, why),
    }
    if action not in handlers:
        raise InputError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
    log.info("%s asks to %s proposal %d", actor, action, proposal_id)
    record = handlers[action]()
    if record.state in (ProposalState.APPLIED, ProposalState.ROLLED_BACK):
        _note_version(service)
    return record


def outcome_words(action: str, record: ProposalRecord) -> str:
    """What an operator's action came to, in a sentence."""
    done = {
        ("approve", ProposalState.APPLIED): "approved and applied: the RM runs it now",
        ("apply", ProposalState.APPLIED): "applied: the RM runs it now",
        ("reject", ProposalState.REJECTED): "rejected: it will not be applied",
        ("rollback", ProposalState.ROLLED_BACK): (
            "rolled back: the configuration it replaced runs again"
        ),
    }
    said = done.get((action, record.state))
    if said is not None:
        return f"Proposal {record.id} {said}."
    why = f": {record.note}" if record.note else ""
    return f"Proposal {record.id} was not {PAST[action]}; it is {record.state} now{why}"


PAST = {"approve": "applied", "apply": "applied", "reject": "rejected", "rollback": "rolled back"}


def _note_version(service: Service) -> None:
    """Record the configuration an operator's apply or rollback made run."""
    try:
        note_running(service.store, service.backend.document())
    except YarnAdaptError as exc:  # the next round records it
        log.warning("cannot read the configuration just applied: %s", exc.one_line())


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


def status_view(service: Service) -> dict[str, Any]:
    """The loop's status with units in the names (times in epoch seconds)."""
    status = dict(service.loop.status())
    status["next_round_at_epoch_s"] = status.pop("next_round_at", None)
    status["last_round_at_epoch_s"] = service.store.last_round_at()
    status["pending_proposals"] = service.store.count_proposals(ProposalState.PENDING)
    return status


# --------------------------------------------------------------------------- API


def api_blueprint(service: Service) -> Blueprint:
    api = Blueprint("api", __name__, url_prefix="/api")
    store = service.store

    def write_allowed() -> Response | None:
        return access.operator_refusal(service)

    @api.get("/status")
    def status() -> Response:
        return jsonify(status_view(service))

    @api.get("/proposals")
    def proposals() -> Response:
        places = standings(store.all_applies())
        origins = store.origins()
        return jsonify(
            [
                proposal_summary(p, places.get(p.id), origins.get(p.id))
                for p in store.proposals(limit=_limit())
            ]
        )

    @api.get("/proposals/<rowid:proposal_id>")
    def proposal(proposal_id: int) -> Response:
        return jsonify(_detail(service, proposal_id))

    @api.post("/proposals/<rowid:proposal_id>/<action>")
    def proposal_action(proposal_id: int, action: str) -> Any:
        refused = write_allowed()
        if refused is not None:
            return refused
        body = request.get_json(silent=True)
        reason = body.get("reason", "") if isinstance(body, dict) else ""
        if not isinstance(reason, str):
            raise InputError('"reason" must be a string')
        record = act(service, proposal_id, action, access.api_actor(service), reason)
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
        return jsonify([{"at_epoch_s": at, **decision_view(d)} for at, d in recent])

    @api.get("/audit")
    def audit() -> Response | tuple[Response, int]:
        """The audit log, newest first; ``?kind=guard`` (or proposal, drift, access)
        keeps one kind of entry."""
        kind = request.args.get("kind")
        kinds = [str(k) for k in AuditKind]
        if kind is not None and kind not in kinds:
            error = InputError(f"unknown audit kind {kind!r}: expected one of {', '.join(kinds)}")
            return _api_error(error)
        entries = store.audit_log(limit=_limit(), kind=None if kind is None else AuditKind(kind))
        return jsonify([audit_view(a) for a in entries])

    return api


def _too_many(response: Response, wait_s: int) -> Response:
    response.status_code = 429
    response.headers["Retry-After"] = str(wait_s)
    return response


def _local_path(target: str | None) -> str | None:
    """Only a path on this site: never redirect a sign-in elsewhere."""
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return None


REFRESH_MIN_S = 5
REFRESH_MAX_S = 60


def _refresh_s(service: Service) -> int | None:
    """Seconds between automatic reloads of the overview (a ``<meta refresh>``, no
    script): about one round, 5 s at least, a minute at most; ``?refresh=off`` stops it."""
    if request.args.get("refresh") == "off":
        return None
    interval = service.settings.service.interval_s
    return int(max(REFRESH_MIN_S, min(REFRESH_MAX_S, interval)))


def _limit() -> int:
    try:
        return max(1, min(500, int(request.args.get("limit", "50"))))
    except ValueError:
        return 50


def _detail(service: Service, proposal_id: int) -> dict[str, Any]:
    store = service.store
    proposal = store.proposal(proposal_id)
    detail = proposal_detail(
        proposal,
        store.realized(proposal_id),
        store.applies(proposal_id=proposal_id),
        store.audit_log(proposal_id=proposal_id),
        standings(store.all_applies()).get(proposal_id),
        store.origins().get(proposal_id),
        store.prediction_errors(),
    )
    latest = store.latest_applied()
    if latest is None or latest.id != proposal_id:  # as the desk: only what runs now
        detail["actions"] = [a for a in detail["actions"] if a != "rollback"]
    return detail


# --------------------------------------------------------------------------- pages


def pages_blueprint(service: Service) -> Blueprint:
    pages = Blueprint("pages", __name__, template_folder="templates", static_folder="static")
    store = service.store

    @pages.get("/")
    def index() -> str:
        return render_template(
            "index.html",
            status=status_view(service),
            sections=overview(service),
            refresh_s=_refresh_s(service),
            token_configured=access.operators_exist(service),
        )

    @pages.get("/proposals/<rowid:proposal_id>")
    def proposal(proposal_id: int) -> str | tuple[str, int]:
        try:
            detail = _detail(service, proposal_id)
        except ProposalNotFound as exc:
            return render_template("error.html", message=exc.one_line()), 404
        proposal_record = store.proposal(proposal_id)
        return render_template(
            "proposal.html",
            p=detail,
            columns=change_columns(proposal_record, detail["running"]),
            can_sign_in=access.operators_exist(service),
            evidence=evidence_rows(
                proposal_record,
                store.prediction_errors(),
                job_links(service),
                store.prediction_errors(proposal_id),
            ),
            interval_figures=interval_rows(proposal_record, store.realized(proposal_id)),
        )

    @pages.get("/proposals/<rowid:proposal_id>/confirm/<action>")
    def confirm(proposal_id: int, action: str) -> str | tuple[str, int]:
        if action not in ACTIONS:
            return render_template("error.html", message=f"no action {action!r}"), 404
        try:
            record = store.proposal(proposal_id)
        except ProposalNotFound as exc:
            return render_template("error.html", message=exc.one_line()), 404
        return render_template(
            "confirm.html",
            p=proposal_summary(record),
            action=action,
            what=confirm_words(action, record, store.latest_applied()),
            changes=[change_words(c) for c in record.changes],
            rollback=action == "rollback",
            reason_max=REASON_MAX,
        )

    @pages.post("/proposals/<rowid:proposal_id>/<action>")
    def proposal_action(proposal_id: int, action: str) -> BaseResponse | tuple[str, int]:
        if not auth.is_operator():
            return render_template("error.html", message="sign in with the token first"), 403
        if not auth.form_is_genuine(request, current_app.config["PUBLIC_ORIGIN"]):
            return render_template("error.html", message="the form is stale or foreign"), 403
        try:
            store.proposal(proposal_id)
        except ProposalNotFound as exc:
            return render_template("error.html", message=exc.one_line()), 404
        if request.form.get("confirm") != "yes":  # one click never acts: confirm first
            return redirect(url_for("pages.confirm", proposal_id=proposal_id, action=action))
        try:
            reason = request.form.get("reason", "")
            record = act(service, proposal_id, action, access.page_actor(), reason)
            flash(outcome_words(action, record))
        except ProposalNotFound as exc:
            return render_template("error.html", message=exc.one_line()), 404
        except YarnAdaptError as exc:
            flash(f"Nothing was done: {exc.one_line()}")
        return redirect(url_for("pages.proposal", proposal_id=proposal_id))

    @pages.route("/login", methods=["GET", "POST"])
    def login() -> BaseResponse | str | tuple[str, int]:
        if request.method == "GET":
            return render_template("login.html", token_configured=access.operators_exist(service))
        given = request.form.get("token", "")
        refused = access.operator_token_refusal(service, given, "signing in")
        if refused is not None:
            page = render_template("login.html", error=refused.message, token_configured=True)
            if refused.retry_after_s is not None:
                return _too_many(Response(page), refused.retry_after_s)
            return page, refused.status
        auth.sign_in(access.operator_name_of(service, given) or SHARED)
        return redirect(_local_path(request.args.get("next")) or url_for("pages.index"))

    @pages.post("/logout")
    def logout() -> BaseResponse:
        if auth.form_is_genuine(request, current_app.config["PUBLIC_ORIGIN"]):
            session.clear()
        return redirect(url_for("pages.index"))

    return pages
