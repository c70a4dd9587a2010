"""What the page and the API show of a proposal (pure: records in, dicts out)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from yarn_adapt.service.proposers.checking import proposal_errors
from yarn_adapt.service.proposers.evidence import warnings_for
from yarn_adapt.service.state.records import (
    ApplyRecord,
    AuditEntry,
    Decision,
    GroupPrediction,
    PredictionError,
    ProposalRecord,
    ProposalState,
    RealizedLatency,
    RoundReport,
)
from yarn_adapt.service.state.series import ProposalOrigin
from yarn_adapt.service.state.statemachine import Action, operator_actions
from yarn_adapt.service.state.versions import Standing
from yarn_adapt.service.web.console import change_words, standing_words
from yarn_adapt.service.xmltext import unified_xml_diff

# The endpoint (``POST /api/proposals/N/<endpoint>``) of each operator action.
ENDPOINT_OF = {
    Action.APPROVE: "approve",
    Action.REJECT: "reject",
    Action.BEGIN_APPLY: "apply",
    Action.BEGIN_ROLLBACK: "rollback",
}


def _number(value: float | None) -> float | None:
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return round(value, 3)


def _unbounded(value: float | None) -> bool:
    return value is not None and math.isinf(value) and value > 0


def proposal_summary(
    proposal: ProposalRecord,
    standing: Standing | None = None,
    origin: ProposalOrigin | None = None,
) -> dict[str, Any]:
    """A proposal in a list. Times are epoch seconds (``_epoch_s``), latencies
    seconds (``_s``); ``improvement_ratio`` 0.2 = 20 % lower predicted latency;
    ``standing`` says, for an applied proposal, whether it runs now or what replaced it."""
    return {
        "id": proposal.id,
        "state": str(proposal.state),
        "standing": standing_words(proposal, standing, origin),
        "running": bool(standing and standing.running and proposal.state is ProposalState.APPLIED),
        "origin": None
        if origin is None
        else {"kind": origin.kind, "version_id": origin.version_id, "detail": origin.detail},
        "created_at_epoch_s": proposal.created_at,
        "updated_at_epoch_s": proposal.updated_at,
        "target": proposal.target,
        "changes": len(proposal.changes),
        "groups": [g.group for g in proposal.groups],
        "predicted_latency_before_s": _number(proposal.cluster_before_s),
        "predicted_latency_after_s": _number(proposal.cluster_after_s),
        # JSON has no infinity: a prediction that some jobs never finish (a starved
        # queue) is null above and true here, unlike an unknown one (null, false).
        "predicted_latency_before_unbounded": _unbounded(proposal.cluster_before_s),
        "predicted_latency_after_unbounded": _unbounded(proposal.cluster_after_s),
        "improvement_ratio": round(proposal.improvement, 4),
        "gate": proposal.gate,
        "note": proposal.note,
    }


def proposal_detail(
    proposal: ProposalRecord,
    realized: Sequence[RealizedLatency],
    applies: Sequence[ApplyRecord],
    audit: Sequence[AuditEntry],
    standing: Standing | None = None,
    origin: ProposalOrigin | None = None,
    checked_all: Sequence[PredictionError] = (),
) -> dict[str, Any]:
    """A proposal with everything its page shows. Each prediction's ``realised_s`` is
    the mean latency of the jobs it was about once all finished (``checked``), the
    one realised figure; ``interval_figures`` are apart: whatever jobs finished in
    each round after the apply."""
    name = PurePath(proposal.target).name or proposal.target
    checked_by_group = {c.group: c for c in checked_all if c.proposal_id == proposal.id}
    overall = proposal_errors(checked_by_group.values())
    return {
        **proposal_summary(proposal, standing, origin),
        "xml_diff": unified_xml_diff(proposal.base_xml, proposal.proposed_xml, name),
        "property_changes": [
            {
                "kind": str(c.kind),
                "queue": c.queue or "(global)",
                "property": c.prop,
                "old": c.old,
                "new": c.new,
                "words": change_words(c),
            }
            for c in proposal.changes
        ],
        "predictions": [
            prediction_view(g, checked_by_group.get(g.group), proposal.id, checked_all, realized)
            for g in proposal.groups
        ],
        "prediction_error_ratio": round(overall[0].error, 4) if overall else None,
        "reasons": list(proposal.reasons),
        "actions": [ENDPOINT_OF[a] for a in operator_actions(proposal.state)],
        "applies": [apply_view(a) for a in applies],
        "audit": [audit_view(a) for a in audit],
    }


def prediction_view(
    g: GroupPrediction,
    checked: PredictionError | None,
    proposal_id: int,
    checked_all: Sequence[PredictionError],
    realized: Sequence[RealizedLatency],
) -> dict[str, Any]:
    return {
        "group": g.group,
        "jobs": g.jobs,
        "before_s": _number(g.before_s),
        "after_s": _number(g.after_s),
        "after_low_s": _number(g.after_low_s),
        "after_high_s": _number(g.after_high_s),
        "improvement_ratio": round(g.improvement, 4),
        "estimator": g.estimator,
        "interval_source": g.interval_source,
        "required_gain_ratio": round(g.required_gain, 4),
        "found_s": _number(g.found_s),
        "population_jobs": len(g.population),
        "realised_s": _number(checked.realised_s) if checked is not None else None,
        "checked": checked_view(checked),
        "job_ids": list(g.job_ids),
        "warnings": warnings_for(g, checked_all, proposal_id),
        "interval_figures": [
            {
                "round_after_apply": r.interval,
                "jobs": r.jobs,
                "mean_s": _number(r.mean_s),
                "window_epoch_s": [r.window_start_ms / 1000.0, r.window_end_ms / 1000.0],
            }
            for r in realized
            if r.group == g.group
        ],
    }


def checked_view(checked: PredictionError | None) -> dict[str, Any] | None:
    """A prediction checked on its own jobs once they finished (``None``: not yet)."""
    if checked is None:
        return None
    return {
        "config": checked.config,
        "predicted_s": _number(checked.predicted_s),
        "realised_s": _number(checked.realised_s),
        "jobs": checked.jobs,
        "error_ratio": round(checked.error, 4),
        "inside_likely_range": checked.inside,
        "window_s": [checked.window_start_s, checked.window_end_s],
    }


def apply_view(record: ApplyRecord) -> dict[str, Any]:
    return {
        "proposal_id": record.proposal_id,
        "apply_id": record.apply_id,
        "kind": record.kind,
        "actor": record.actor,
        "started_at_epoch_s": record.started_at,
        "finished_at_epoch_s": record.finished_at,
        "result": record.result,
        "detail": record.detail,
        "reason": record.reason,
    }


def audit_view(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at_epoch_s": entry.at,
        "kind": str(entry.kind),
        "actor": entry.actor,
        "action": entry.action,
        "proposal_id": entry.proposal_id,
        "detail": entry.detail,
        "reason": entry.reason,
    }


def round_view(report: RoundReport) -> dict[str, Any]:
    return {
        "id": report.id,
        "started_at_epoch_s": report.started_at,
        "status": str(report.status),
        "reason": report.reason,
        "timings_s": report.timings_s,
        "decisions": [decision_view(d) for d in report.decisions],
    }


def decision_view(decision: Decision) -> dict[str, Any]:
    return {
        "kind": str(decision.kind),
        "reason": decision.reason,
        "proposal_id": decision.proposal_id,
        "group": decision.group,
    }
