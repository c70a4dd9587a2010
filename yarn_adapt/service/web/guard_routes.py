"""The co-location guard on the page and the API, and the node agents' endpoint.

- overview section "Co-location guard", ``GET /api/guard``: the mode and policy, the
  loop's health (``health``: last cycle, its age and duration, failures in a row, the
  nodes' age, whether the error budget gave the nodes back), each latency-critical
  application's slack and state, and per node its state, its share of each
  application's critical path (or the paper's risk), real and visible resources,
  demand, the decision's reason, and what its agent does (``agent``: its newest report,
  ``{"at_epoch_s", "age_s", "lines"}``, or null; ``agents``: every agent's, by node).
- ``/guard/nodes/<node>``, ``GET /api/guard/nodes/<node>``: one node's decisions.
- ``POST /guard/mode`` (signed in), ``POST /api/guard/mode`` (operator token): ``{"mode": m}``
  with m one of ``off``, ``recommend``, ``auto``.
- ``GET /api/agent/nodes/<node>/reclaim`` (that node's agent token): a node agent's
  reclaim request; ``POST /api/agent/nodes/<node>/report`` (the same token): what the
  agent does now, ``{"lines": [...]}`` in the words of ``agent status`` (204; a body
  of another shape, more than 12 lines or a line over 300 characters is a 400).

The agents' endpoint answers the contract of ``preemption/targets.py``: ``{"node",
"generation", "reclaim": {"cpu_millicores", "memory_mb"}, "ttl_s", "qos"}``, or 404
when nothing is asked of the node (the guard is not in ``auto``, or has not decided
on it). It takes only the agent token issued for that node (``yarn-adapt agent-token
issue NODE``): the operator token and other nodes' tokens are refused with 403, and
an agent token is refused everywhere else (:mod:`yarn_adapt.service.web.access`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import (
    Blueprint,
    Response,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from markupsafe import Markup
from werkzeug.wrappers import Response as BaseResponse

from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.errors import InputError
from yarn_adapt.service.guard.records import node_view
from yarn_adapt.service.guard.step import GuardStep, parse_agent_report
from yarn_adapt.service.web import access, auth, charts
from yarn_adapt.service.web.console import Section, add_section

if TYPE_CHECKING:
    from yarn_adapt.service.service import Service

CHART_POINTS = 60


# --------------------------------------------------------------------------- section


def build_guard_section(service: Service) -> dict[str, Any]:
    step = service.guard
    if step is None:
        return {"available": False}
    status = step.status()
    return {
        "available": True,
        "status": status,
        "modes": [str(m) for m in GuardMode],
        "chart": guard_chart(step),
    }


def guard_chart(step: GuardStep) -> Markup:
    """Each node's risk and the share of it batch may see, per recorded guard cycle."""
    rows = [node_view(row) for row in step.store.series(CHART_POINTS)]
    rounds = sorted({row["at_epoch_s"] for row in rows})
    index = {at: number for number, at in enumerate(rounds, 1)}
    series: list[charts.Series] = []
    for node in sorted({row["node"] for row in rows}):
        mine = [row for row in rows if row["node"] == node]
        series.append(
            charts.Series(
                f"risk {node}",
                tuple((float(index[r["at_epoch_s"]]), r["risk"]) for r in mine),
                notes=tuple(r["reason"] for r in mine),
            )
        )
        series.append(
            charts.Series(
                f"visible {node}",
                tuple((float(index[r["at_epoch_s"]]), _visible_share(r)) for r in mine),
                notes=tuple(f"{r['action']} {r['result']}".strip() for r in mine),
            )
        )
    return charts.line_chart(
        "chart-guard",
        "Node risk and the share of each node batch may see, per recorded guard cycle",
        series,
        y_format=lambda v: f"{v:.0%}",
        x_name="guard cycle",
        y_max=1.0,
        empty="the guard has not decided yet",
    )


def _visible_share(row: dict[str, Any]) -> float | None:
    """vcores batch may see after the round, as a share of the node's real vcores."""
    real = row["real"]["vcores"]
    applied = row["result"] in ("done", "unchanged") or row["action"] == "hold"
    seen = row["visible"] if applied and row["mode"] == "auto" else row["visible_before"]
    return seen["vcores"] / real if real else None


add_section(
    Section("guard", "Co-location guard", "section_guard.html", build_guard_section),
    after="charts",
)


# --------------------------------------------------------------------------- routes


def guard_blueprint(service: Service) -> Blueprint:
    guard = Blueprint("guard", __name__, template_folder="templates")

    def step() -> GuardStep:
        if service.guard is None:
            raise InputError("the co-location guard needs a real RM ([yarn] rm)")
        return service.guard

    @guard.get("/api/guard")
    def api_status() -> Response:
        return jsonify(step().status())

    @guard.get("/api/guard/nodes/<node>")
    def api_history(node: str) -> Response:
        return jsonify([node_view(row) for row in step().store.history(node, _limit())])

    @guard.post("/api/guard/mode")
    def api_mode() -> Any:
        refused = access.operator_refusal(service)
        if refused is not None:
            return refused
        body = request.get_json(silent=True) or {}
        mode = _mode(body.get("mode") if isinstance(body, dict) else None)
        restored = step().guard.set_mode(mode, access.api_actor(service))
        return jsonify({"mode": str(mode), "restored": [_outcome(o) for o in restored]})

    @guard.get("/api/agent/nodes/<node>/reclaim")
    def agent_reclaim(node: str) -> Any:
        refused = access.agent_refusal(service, node)
        if refused is not None:
            return refused
        request_for_node = step().guard.reclaim_for(node)
        if request_for_node is None:
            return jsonify(error=f"nothing is asked of node {node}"), 404
        return jsonify(request_for_node.to_json())

    @guard.post("/api/agent/nodes/<node>/report")
    def agent_report(node: str) -> Any:
        refused = access.agent_refusal(service, node)
        if refused is not None:
            return refused
        try:
            report = parse_agent_report(request.get_json(silent=True), step().guard.clock())
        except InputError as exc:
            return jsonify(error=exc.one_line()), 400
        step().note_agent_report(node, report)
        return "", 204

    @guard.get("/guard/nodes/<node>")
    def history_page(node: str) -> str:
        rows = [node_view(row) for row in step().store.history(node, _limit())]
        return render_template("guard_node.html", node=node, rows=rows)

    @guard.post("/guard/mode")
    def mode_page() -> BaseResponse | tuple[str, int]:
        if not auth.is_operator():
            return render_template("error.html", message="sign in with the token first"), 403
        if not auth.form_is_genuine(request, current_app.config["PUBLIC_ORIGIN"]):
            return render_template("error.html", message="the form is stale or foreign"), 403
        try:
            mode = _mode(request.form.get("mode"))
            restored = step().guard.set_mode(mode, access.page_actor())
        except InputError as exc:  # an unknown mode, or auto refused by the settings
            return render_template("error.html", message=exc.one_line()), 400
        back = f"; {len(restored)} node(s) given back" if restored else ""
        flash(f"co-location guard: {mode}{back}")
        return redirect(url_for("pages.index") + "#guard")

    return guard


def _mode(value: object) -> GuardMode:
    allowed = [str(m) for m in GuardMode]
    if value not in allowed:
        raise InputError(f"mode must be one of {', '.join(allowed)}, got {value!r}")
    return GuardMode(value)


def _outcome(outcome: Any) -> dict[str, str]:
    return {"node": outcome.node_id, "result": str(outcome.result), "status": outcome.status}


def _limit() -> int:
    try:
        return max(1, min(500, int(request.args.get("limit", "50"))))
    except ValueError:
        return 50
