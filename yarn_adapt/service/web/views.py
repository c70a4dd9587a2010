"""What the page and the API show of a proposal (pure: records in, dicts out)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from yarn_adapt.service.records import (
    ApplyRecord,
    AuditEntry,
    Decision,
    ProposalRecord,
    RealizedLatency,
    RoundReport,
)
from yarn_adapt.service.statemachine import operator_actions
from yarn_adapt.service.xmltext import unified_xml_diff


def _number(value: float | None) -> float | None:
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return round(value, 3)


def proposal_summary(proposal: ProposalRecord) -> dict[str, Any]:
    return {
        "id": proposal.id,
        "state": str(proposal.state),
        "created_at": proposal.created_at,
        "updated_at": proposal.updated_at,
        "target": proposal.target,
        "changes": len(proposal.changes),
        "groups": [g.group for g in proposal.groups],
        "predicted_latency_before_s": _number(proposal.cluster_before_s),
        "predicted_latency_after_s": _number(proposal.cluster_after_s),
        "improvement": round(proposal.improvement, 4),
        "gate": proposal.gate,
        "note": proposal.note,
    }


def proposal_detail(
    proposal: ProposalRecord,
    realized: Sequence[RealizedLatency],
    applies: Sequence[ApplyRecord],
    audit: Sequence[AuditEntry],
) -> dict[str, Any]:
    name = PurePath(proposal.target).name or proposal.target
    return {
        **proposal_summary(proposal),
        "xml_diff": unified_xml_diff(proposal.base_xml, proposal.proposed_xml, name),
        "property_changes": [
            {
                "kind": str(c.kind),
                "queue": c.queue or "(global)",
                "property": c.prop,
                "old": c.old,
                "new": c.new,
            }
            for c in proposal.changes
        ],
        "predictions": [
            {
                "group": g.group,
                "jobs": g.jobs,
                "before_s": _number(g.before_s),
                "after_s": _number(g.after_s),
                "improvement": round(g.improvement, 4),
                "realized": [
                    {
                        "interval": r.interval,
                        "jobs": r.jobs,
                        "mean_s": _number(r.mean_s),
                        "window_ms": [r.window_start_ms, r.window_end_ms],
                    }
                    for r in realized
                    if r.group == g.group
                ],
            }
            for g in proposal.groups
        ],
        "reasons": list(proposal.reasons),
        "actions": [str(a) for a in operator_actions(proposal.state)],
        "applies": [apply_view(a) for a in applies],
        "audit": [audit_view(a) for a in audit],
    }


def apply_view(record: ApplyRecord) -> dict[str, Any]:
    return {
        "proposal_id": record.proposal_id,
        "apply_id": record.apply_id,
        "kind": record.kind,
        "actor": record.actor,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "result": record.result,
        "detail": record.detail,
    }


def audit_view(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at": entry.at,
        "actor": entry.actor,
        "action": entry.action,
        "proposal_id": entry.proposal_id,
        "detail": entry.detail,
    }


def round_view(report: RoundReport) -> dict[str, Any]:
    return {
        "id": report.id,
        "started_at": report.started_at,
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
