"""The console's routes: the overview's sections, the versions pages, reverting to
a version (a proposal like any other), and their JSON under ``/api``.

| page | API | what |
|---|---|---|
| ``/`` | ``GET /api/queues``, ``GET /api/series`` | queues, charts, proposals |
| ``/versions`` | ``GET /api/versions`` | every configuration that ran |
| ``/versions/diff?from=A&to=B`` | ``GET /api/versions/diff?from=A&to=B`` | two versions compared |
| ``POST /versions/N/revert`` | ``POST /api/versions/N/revert`` | propose version N again |
"""

from __future__ import annotations

import logging
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
from werkzeug.wrappers import Response as BaseResponse

from yarn_adapt.errors import InputError, ProposalNotFound, YarnAdaptError
from yarn_adapt.service.state.records import ProposalRecord
from yarn_adapt.service.state.versions import revert_draft, standings
from yarn_adapt.service.web import access, auth
from yarn_adapt.service.web.console import (
    CHART_ROUNDS,
    SECTIONS,
    Section,
    add_section,
    change_words,
    latency_chart,
    open_proposal,
    paired_chart,
    predicted_vs_realised,
    queue_rows,
    run_words,
    running_config,
    standing_words,
    usage_chart,
    version_changes,
    version_rows,
)
from yarn_adapt.service.web.views import proposal_summary, round_view
from yarn_adapt.service.xmltext import unified_xml_diff

if TYPE_CHECKING:
    from yarn_adapt.service.service import Service

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- sections


def build_queues(service: Service) -> dict[str, Any]:
    store = service.store
    config, source = running_config(service)
    latest = store.latest_usage()
    round_id, at, usage = latest if latest else (None, None, [])
    proposal = open_proposal(store.proposals(limit=5))
    version = store.latest_version()
    return {
        "rows": queue_rows(config, usage, proposal) if config is not None else [],
        "source": source,
        "usage_round": round_id,
        "usage_at": at,
        "proposal": proposal_summary(proposal) if proposal else None,
        "version": version,
        "scheduler": type(config).__name__.removesuffix("SchedulerConfig") if config else "",
    }


def build_charts(service: Service) -> dict[str, Any]:
    store = service.store
    rounds = [(r.id, r.started_at) for r in store.rounds(limit=CHART_ROUNDS)]
    applies = store.all_applies()
    config, _ = running_config(service)
    leaves = [leaf.path for leaf in config.leaves()] if config is not None else []
    proposals = store.proposals(limit=CHART_ROUNDS)
    return {
        "latency": latency_chart(store.latency_series(CHART_ROUNDS), applies, rounds),
        "usage": usage_chart(store.usage_series(CHART_ROUNDS), leaves),
        "predicted": paired_chart(predicted_vs_realised(proposals, store.prediction_errors())),
    }


def build_proposals(service: Service) -> dict[str, Any]:
    store = service.store
    places = standings(store.all_applies())
    origins = store.origins()
    return {
        "proposals": [
            proposal_summary(p, places.get(p.id), origins.get(p.id))
            for p in store.proposals(limit=30)
        ]
    }


def build_rounds(service: Service) -> dict[str, Any]:
    return {"rounds": [round_view(r) for r in service.store.rounds(limit=10)]}


def build_run(service: Service) -> dict[str, Any] | None:
    """The demo's judgement of its run (None outside the demo: no section)."""
    found = service.store.run_summary()
    if found is None:
        return None
    at, summary = found
    return {"at": at, **run_words(summary)}


def _register_default_sections() -> None:
    for section in (
        Section("run", "This demo run, judged", "section_run.html", build_run),
        Section("queues", "Queues", "section_queues.html", build_queues),
        Section("charts", "Latency and usage", "section_charts.html", build_charts),
        Section("proposals-section", "Proposals", "section_proposals.html", build_proposals),
        Section("rounds-section", "Recent rounds", "section_rounds.html", build_rounds),
    ):
        if not any(s.id == section.id for s in SECTIONS):
            add_section(section)


_register_default_sections()


def overview(service: Service) -> list[tuple[Section, dict[str, Any]]]:
    """Each section with what it shows (a section with nothing to show is left out)."""
    built = ((section, section.build(service)) for section in SECTIONS)
    return [(section, s) for section, s in built if s is not None]


# --------------------------------------------------------------------------- reverting


def revert(service: Service, version_id: int, actor: str) -> ProposalRecord:
    """Propose ``version_id`` again, for the same review and safe apply as any proposal."""
    store = service.store
    version = store.version(version_id)
    draft = revert_draft(version, service.backend.document(), service.backend.target, actor)
    created = store.create_operator_proposal(
        draft.draft, draft.changed_groups, draft.origin, actor=actor
    )
    service.metrics.proposals.inc()
    log.info("%s proposed a revert to version %d: proposal %d", actor, version_id, created.id)
    return created


def version_diff(service: Service, older_id: int, newer_id: int) -> dict[str, Any]:
    store = service.store
    older, newer = store.version(older_id), store.version(newer_id)
    return {
        "from": older_id,
        "to": newer_id,
        "xml_diff": unified_xml_diff(older.xml, newer.xml, "scheduler configuration")
        .replace("(running)", f"(version {older_id})")
        .replace("(proposed)", f"(version {newer_id})"),
        "property_changes": [change_words(c) for c in version_changes(older, newer)],
    }


def _version_ids() -> tuple[int, int]:
    try:
        return int(request.args["from"]), int(request.args["to"])
    except (KeyError, ValueError) as exc:
        raise InputError("compare two versions: ?from=A&to=B (version ids)") from exc


# --------------------------------------------------------------------------- blueprint


def console_blueprint(service: Service) -> Blueprint:
    console = Blueprint("console", __name__, template_folder="templates")
    store = service.store

    @console.get("/versions")
    def versions() -> str:
        listed = store.versions(limit=200)
        return render_template(
            "versions.html",
            versions=version_rows(listed, {}),
            proposal=open_proposal(store.proposals(limit=5)),
        )

    @console.get("/versions/diff")
    def diff() -> str | tuple[str, int]:
        try:
            older, newer = _version_ids()
            compared = version_diff(service, older, newer)
        except ProposalNotFound as exc:
            return render_template("error.html", message=exc.one_line()), 404
        except InputError as exc:
            return render_template("error.html", message=exc.one_line()), 400
        return render_template("version_diff.html", d=compared)

    @console.post("/versions/<rowid:version_id>/revert")
    def revert_page(version_id: int) -> BaseResponse | tuple[str, int]:
        if not auth.is_operator():
            return render_template("error.html", message="sign in with the token first"), 403
        if not auth.form_is_genuine(request, current_app.config["PUBLIC_ORIGIN"]):
            return render_template("error.html", message="the form is stale or foreign"), 403
        try:
            created = revert(service, version_id, access.page_actor())
        except ProposalNotFound as exc:
            return render_template("error.html", message=exc.one_line()), 404
        except YarnAdaptError as exc:
            flash(f"revert refused: {exc.one_line()}")
            return redirect(url_for("console.versions"))
        flash(f"proposal {created.id} reverts to version {version_id}: review and approve it")
        return redirect(url_for("pages.proposal", proposal_id=created.id))

    @console.get("/api/queues")
    def api_queues() -> Response:
        built = build_queues(service)
        version = built["version"]
        return jsonify(
            {
                "scheduler": built["scheduler"],
                "configuration_source": built["source"],
                "usage_round_id": built["usage_round"],
                "usage_at_epoch_s": built["usage_at"],
                "running_version_id": version.id if version else None,
                "open_proposal_id": built["proposal"]["id"] if built["proposal"] else None,
                "queues": [
                    {k: v for k, v in row.items() if k not in ("bar", "pending_bar")}
                    for row in built["rows"]
                ],
            }
        )

    @console.get("/api/series")
    def api_series() -> Response:
        rounds = _rounds_arg()
        return jsonify(
            {
                "latency": [
                    {
                        "round_id": s.round_id,
                        "at_epoch_s": s.at,
                        "group": s.group,
                        "jobs": s.jobs,
                        "mean_s": s.mean_s,
                    }
                    for s in store.latency_series(rounds)
                ],
                "usage": [
                    {
                        "round_id": s.round_id,
                        "at_epoch_s": s.at,
                        "queue": s.usage.queue,
                        "used_percent": s.usage.used_percent,
                        "guaranteed_percent": s.usage.guaranteed_percent,
                        "pending_containers": s.usage.pending_containers,
                        "running_apps": s.usage.running_apps,
                        "pending_apps": s.usage.pending_apps,
                    }
                    for s in store.usage_series(rounds)
                ],
            }
        )

    @console.get("/api/versions")
    def api_versions() -> Response:
        return jsonify(version_rows(store.versions(limit=_rounds_arg(200)), {}))

    @console.get("/api/versions/<rowid:version_id>")
    def api_version(version_id: int) -> Response:
        version = store.version(version_id)
        return jsonify(
            {
                "id": version.id, "seen_at_epoch_s": version.seen_at, "actor": version.actor,
                "why": version.why, "proposal_id": version.proposal_id,
                "sha256": version.sha256, "xml": version.xml,
            }
        )  # fmt: skip

    @console.get("/api/versions/diff")
    def api_version_diff() -> Response:
        older, newer = _version_ids()
        return jsonify(version_diff(service, older, newer))

    @console.post("/api/versions/<rowid:version_id>/revert")
    def api_revert(version_id: int) -> Any:
        refused = access.operator_refusal(service)
        if refused is not None:
            return refused
        created = revert(service, version_id, access.api_actor(service))
        places = standings(store.all_applies())
        summary = proposal_summary(created, places.get(created.id), store.origins().get(created.id))
        summary["standing"] = standing_words(created, None, store.origins().get(created.id))
        return jsonify(summary)

    return console


def _rounds_arg(default: int = CHART_ROUNDS) -> int:
    try:
        return max(1, min(1000, int(request.args.get("rounds", str(default)))))
    except ValueError:
        return default
