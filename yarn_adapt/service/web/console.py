"""The operators' console (pure view builders): the queue tree with configured and
used capacity, the charts, the versions, the evidence and where each proposal
stands. Records in, plain dicts and SVG markup out; the routes are in
:mod:`yarn_adapt.service.web.console_routes`.

The overview page is a list of :class:`Section` s, each a template partial under
``templates/section_*.html`` and a function that builds its context from the service.
A later layer (the co-location guard's node risk and batch visibility) adds its own
with :func:`add_section`, drawing its charts with :mod:`~yarn_adapt.service.web.charts`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
)
from yarn_adapt.model.capacity import CapacityQueue, Weight
from yarn_adapt.model.fair import FairQueue
from yarn_adapt.service.proposers.evidence import jobs_words, warnings_for
from yarn_adapt.service.state.records import (
    ApplyRecord,
    PredictionError,
    ProposalRecord,
    ProposalState,
    RealizedLatency,
)
from yarn_adapt.service.state.series import (
    ConfigVersion,
    GroupLatencySample,
    ProposalOrigin,
    QueueUsage,
    UsageSample,
)
from yarn_adapt.service.state.usage import guaranteed_shares
from yarn_adapt.service.state.versions import Standing, standings
from yarn_adapt.service.web import charts
from yarn_adapt.service.web.words import (
    clock,
    duration,
    file_name,
    percent,
    unset,
    when,
)
from yarn_adapt.service.xmltext import parse_scheduler_text
from yarn_adapt.yarn.confxml import ConfigChange, diff_configs

if TYPE_CHECKING:
    from yarn_adapt.service.service import Service

CHART_ROUNDS = 60
"""The charts show the last this many rounds."""

OPEN_STATES = (ProposalState.PENDING, ProposalState.APPROVED)

# What YARN uses for a property the file leaves unset (the words "(unset -> default X)").
PROPERTY_DEFAULTS = {
    "capacity": "0 %",
    "maximum-capacity": "100 %",
    "ordering-policy": "fifo",
    "user-limit-factor": "1",
    "minimum-user-limit-percent": "100",
    "maximum-am-resource-percent": "0.1",
    "weight": "1",
    "schedulingPolicy": "fair",
    "maxResources": "no limit",
    "minResources": "none",
    "maxRunningApps": "no limit",
    "maxAMShare": "0.5",
}


# --------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class Section:
    """One part of the overview: ``template`` (under ``templates/section_*.html``) is
    rendered with the dict ``build(service)`` returns, as ``s``."""

    id: str
    title: str
    template: str
    build: Callable[[Service], dict[str, Any] | None]  # None: nothing to show


SECTIONS: list[Section] = []


def add_section(section: Section, *, after: str | None = None) -> None:
    """Add a section to the overview (at the end, or after the section ``after``)."""
    if any(s.id == section.id for s in SECTIONS):
        raise ValueError(f"a section {section.id!r} exists already")
    index = next((i + 1 for i, s in enumerate(SECTIONS) if s.id == after), len(SECTIONS))
    SECTIONS.insert(index, section)


# --------------------------------------------------------------------------- words


def run_words(summary: dict[str, Any]) -> dict[str, Any]:
    """The demo's summary of its run (its last JSON line) in words, for the page."""
    tuned = summary.get("realised_latency_tuned_s")
    static = summary.get("realised_latency_static_s")
    held, checked = summary.get("ranges_held", 0), summary.get("ranges_checked", 0)
    median = summary.get("prediction_error_median_ratio")
    utilisation = summary.get("utilisation_ratio")
    return {
        "complete": bool(summary.get("complete")),
        "rounds": summary.get("rounds"),
        "simulated": duration(summary.get("simulated_s")),
        "jobs": summary.get("realised_jobs"),
        "tuned": duration(tuned) if tuned is not None else "",
        "static": duration(static) if static is not None else "",
        "tuned_s": tuned,
        "open_tuned": summary.get("open_jobs_tuned"),
        "open_static": summary.get("open_jobs_static"),
        "proposals": summary.get("proposals", 0),
        "applied": summary.get("applied", 0),
        "errors": [
            {
                "proposal": e["proposal"],
                "predicted": duration(e.get("predicted_s")),
                "realised": duration(e.get("realised_s")),
                "jobs": e.get("jobs"),
                "off": f"{e.get('error_ratio', 0.0):.0%}",
            }
            for e in summary.get("proposal_errors", [])
        ],
        "median_error": f"{median:.0%}" if median is not None else "",
        "ranges": f"{held} of {checked}" if checked else "",
        "coverage": percent(100.0 * held / checked, 0) if checked else "",
        "calibrated": summary.get("ranges_calibrated", 0),
        "nodes": summary.get("nodes"),
        "utilisation": percent(100.0 * utilisation, 0) if utilisation is not None else "",
        "decisions": ", ".join(f"{k} {v}" for k, v in summary.get("decisions", {}).items()),
        "colocation": colocation_words(summary),
    }


def colocation_words(summary: dict[str, Any]) -> str:
    """The demo's latency-critical services over the run, in words ("": none ran)."""
    if summary.get("lc_requests") is None:
        return ""
    p95, target = summary.get("lc_p95_ms"), summary.get("lc_target_ms")
    met, batch = summary.get("lc_slo_met_ratio"), summary.get("lc_nodes_batch_vcore_s") or 0.0
    whole = summary.get("lc_nodes_capacity_vcore_s") or 0.0
    return (
        f"Latency-critical services ({', '.join(summary.get('lc_services', []))}): P95 "
        f"{p95} ms over {summary['lc_requests']} traced requests against a {target} ms "
        f"target, met in {percent(100.0 * (met or 0.0), 0)} of the guard's periods; their "
        f"nodes ran batch for {percent(100.0 * batch / whole, 0) if whole else '-'} of their "
        f"vcore-seconds; the guard lowered {summary.get('guard_lowered_nodes', 0)} node(s)."
    )


def change_words(change: ConfigChange) -> dict[str, str]:
    """A property change in words: unset values say which default applies."""
    default = PROPERTY_DEFAULTS.get(change.prop, "")
    return {
        "kind": str(change.kind),
        "queue": change.queue or "(global)",
        "property": change.prop or "(the queue)",
        "old": _value_words(change.old, default),
        "new": _value_words(change.new, default),
    }


def change_columns(proposal: ProposalRecord, running: bool) -> tuple[str, str]:
    """The headings of a proposal's old and new values: "now" is what the RM runs,
    so after an apply the old value is "before" and the new one runs "now"."""
    if proposal.state is ProposalState.APPLIED and running:
        return "before", "now (applied)"
    if proposal.state in OPEN_STATES:
        return "now", "proposed"
    return "before it", "it proposed"


def confirm_words(action: str, proposal: ProposalRecord, running: ProposalRecord | None) -> str:
    """What confirming ``action`` will do, in a sentence."""
    changes = f"{len(proposal.changes)} change(s) to {file_name(proposal.target)}"
    if action == "approve":
        return (
            f"Approving applies proposal {proposal.id} at once: {changes}, validated, "
            "backed up, written, refreshed and confirmed through the RM (rolled back if "
            "the RM refuses it)."
        )
    if action == "apply":
        return f"Applying proposal {proposal.id} again: {changes}."
    if action == "reject":
        return f"Rejecting proposal {proposal.id}: it will never be applied."
    replaced = (
        "the configuration it replaced" if running is None or running.id == proposal.id else ""
    )
    return (
        f"Rolling back proposal {proposal.id} makes the RM run {replaced or 'an older one'} "
        "again: each change below is undone, with the same checks as an apply."
    )


def _value_words(value: str | None, default: str) -> str:
    if value is None or value == "":
        return unset(default) if default else "(unset)"
    return value


# --------------------------------------------------------------------------- queue tree


def queue_rows(
    config: SchedulerConfig,
    usage: Sequence[QueueUsage],
    proposal: ProposalRecord | None,
) -> list[dict[str, Any]]:
    """The tree in order, each queue with its configured values in words, its
    usage and what the open proposal would change (its guarantee as a marker)."""
    used = {u.queue: u for u in usage}
    waiting_total = max((u.pending_containers for u in usage), default=0)
    shares = guaranteed_shares(config)
    proposed_shares: dict[str, float | None] = {}
    proposed_changes: dict[str, list[dict[str, str]]] = {}
    if proposal is not None:
        for change in proposal.changes:
            proposed_changes.setdefault(change.queue, []).append(change_words(change))
        proposed = _parsed(proposal.proposed_xml, proposal.target)
        if proposed is not None:
            proposed_shares = guaranteed_shares(proposed)
    rows = []
    for queue in config.queues():
        depth = queue.path.count(".")
        configured = _configured(config, queue)
        row_usage = used.get(queue.path) or _by_name(used, queue.path)
        share = shares.get(queue.path)
        new_share = proposed_shares.get(queue.path, share)
        rows.append(
            {
                "path": queue.path,
                "name": queue.name,
                "depth": depth,
                "leaf": queue.is_leaf,
                **configured,
                "guaranteed_percent": _round(share),
                "proposed_guaranteed_percent": _round(new_share) if new_share != share else None,
                "used_percent": row_usage.used_percent if row_usage else None,
                "pending_containers": row_usage.pending_containers if row_usage else None,
                "running_apps": row_usage.running_apps if row_usage else None,
                "pending_apps": row_usage.pending_apps if row_usage else None,
                "proposed": proposed_changes.get(queue.path, []),
                "bar": usage_bar(row_usage.used_percent if row_usage else None, share, new_share),
                "pending_bar": pending_bar(
                    row_usage.pending_containers if row_usage else None, waiting_total
                ),
            }
        )
    return rows


def _by_name(used: dict[str, QueueUsage], path: str) -> QueueUsage | None:
    name = path.rsplit(".", 1)[-1]
    matches = [u for q, u in used.items() if q.rsplit(".", 1)[-1] == name]
    return matches[0] if len(matches) == 1 else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _configured(config: SchedulerConfig, queue: CapacityQueue | FairQueue) -> dict[str, str]:
    if isinstance(config, FairSchedulerConfig):
        assert isinstance(queue, FairQueue)
        policy_default = config.default("defaultQueueSchedulingPolicy") or "fair"
        return {
            "guarantee": f"weight {queue.weight:g}"
            if queue.weight is not None
            else unset("weight 1"),
            "maximum": queue.max_resources.text if queue.max_resources else unset("no limit"),
            "policy": queue.scheduling_policy or unset(policy_default),
        }
    assert isinstance(config, CapacitySchedulerConfig) and isinstance(queue, CapacityQueue)
    if queue.path == config.root.path:
        return {"guarantee": "100 %", "maximum": "100 %", "policy": _policy(queue)}
    return {
        "guarantee": _capacity_words(queue.capacity, "0 %"),
        "maximum": _capacity_words(queue.maximum_capacity, "100 %"),
        "policy": _policy(queue),
    }


def _policy(queue: CapacityQueue) -> str:
    if queue.ordering_policy:
        return queue.ordering_policy
    return unset("fifo" if queue.is_leaf else "utilization")


def _capacity_words(value: object, default: str) -> str:
    if value is None:
        return unset(default)
    if isinstance(value, Percentage):
        return percent(value.percent, 2)
    if isinstance(value, Weight):
        return f"weight {value.weight:g}"
    return str(value)


def usage_bar(
    used_percent: float | None, guaranteed: float | None, proposed: float | None
) -> Markup:
    """A small SVG bar: used share of the cluster, a tick at the guarantee, a dashed
    tick at the proposed guarantee (no inline style: the CSP forbids it)."""
    parts = [
        '<svg class="bar" viewBox="0 0 100 10" width="180" height="14" '
        'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">',
        '<rect class="bar-bg" x="0" y="1" width="100" height="8"/>',
    ]
    if used_percent is not None:
        width = max(0.0, min(100.0, used_percent))
        parts.append(f'<rect class="bar-used" x="0" y="1" width="{width:.2f}" height="8"/>')
    if guaranteed is not None:
        x = max(0.5, min(99.5, guaranteed))
        parts.append(f'<line class="bar-guarantee" x1="{x:.2f}" y1="0" x2="{x:.2f}" y2="10"/>')
    if proposed is not None and proposed != guaranteed:
        x = max(0.5, min(99.5, proposed))
        parts.append(f'<line class="bar-proposed" x1="{x:.2f}" y1="0" x2="{x:.2f}" y2="10"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


def pending_bar(pending: int | None, waiting_total: int) -> Markup:
    """A small SVG bar: the queue's waiting containers as a share of all the
    containers waiting in the cluster (the root's count, the largest in the tree);
    empty when nothing waits or usage is unknown."""
    parts = [
        '<svg class="bar pending-bar" viewBox="0 0 100 10" width="120" height="14" '
        'preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">',
        '<rect class="bar-bg" x="0" y="1" width="100" height="8"/>',
    ]
    if pending and waiting_total > 0:
        width = max(0.0, min(100.0, 100.0 * pending / waiting_total))
        parts.append(
            f'<rect class="bar-pending" x="0" y="1" width="{width:.2f}" height="8" '
            f'data-pending="{pending}" data-of="{waiting_total}"/>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _parsed(xml: str, source: str) -> SchedulerConfig | None:
    try:
        return parse_scheduler_text(xml, source)
    except YarnAdaptError:
        return None


def running_config(service: Service) -> tuple[SchedulerConfig | None, str]:
    """The configuration the RM runs and where that was read: the backend's own
    reading, else the latest recorded version."""
    try:
        return service.backend.document().config, "read now"
    except YarnAdaptError as exc:
        latest = service.store.latest_version()
        if latest is None:
            return None, f"cannot read it: {exc.one_line()}"
        config = _parsed(latest.xml, f"version {latest.id}")
        return config, f"version {latest.id} (cannot read it now: {exc.one_line()})"


def open_proposal(proposals: Iterable[ProposalRecord]) -> ProposalRecord | None:
    """The newest pending or approved proposal (a newer one supersedes the others)."""
    return next((p for p in proposals if p.state in OPEN_STATES), None)


# --------------------------------------------------------------------------- standings


def standing_words(
    proposal: ProposalRecord, standing: Standing | None, origin: ProposalOrigin | None
) -> str:
    """Where a proposal stands now, beyond its state."""
    parts = []
    if origin is not None and origin.kind == "revert":
        parts.append(f"revert to version {origin.version_id}")
    if proposal.state is ProposalState.APPLIED and standing is not None:
        if standing.running:
            parts.append("running now")
        else:
            how = "rolled back" if standing.kind == "rollback" else "replaced"
            by = (
                f"by proposal {standing.by_proposal}" if standing.by_proposal != proposal.id else ""
            )
            parts.append(f"{how} {by} at {clock(standing.at)}".replace("  ", " "))
    return "; ".join(parts)


def is_replaced(proposal: ProposalRecord, standing: Standing | None) -> bool:
    return proposal.state is ProposalState.APPLIED and standing is not None and not standing.running


# --------------------------------------------------------------------------- charts


def latency_chart(
    samples: Sequence[GroupLatencySample],
    applies: Sequence[ApplyRecord],
    rounds: Sequence[tuple[int, float]],
) -> Markup:
    by_group: dict[str, list[GroupLatencySample]] = {}
    for sample in samples:
        by_group.setdefault(sample.group, []).append(sample)
    series = [
        charts.Series(
            group,
            tuple((float(s.round_id), s.mean_s) for s in items),
            notes=tuple(f"{s.jobs} jobs finished in the round" for s in items),
        )
        for group, items in by_group.items()
    ]
    return charts.line_chart(
        "chart-latency",
        "Mean latency of the jobs that finished in each round, per group",
        series,
        events=apply_events(applies, rounds),
        y_format=duration,
        y_steps=charts.time_step,
        empty="no job has finished yet",
    )


def usage_chart(samples: Sequence[UsageSample], leaves: Iterable[str]) -> Markup:
    wanted = list(leaves)
    by_queue: dict[str, list[UsageSample]] = {q: [] for q in wanted}
    for sample in samples:
        if sample.usage.queue in by_queue:
            by_queue[sample.usage.queue].append(sample)
    series = []
    for queue, items in by_queue.items():
        if not items:
            continue
        series.append(
            charts.Series(
                queue,
                tuple((float(s.round_id), s.usage.used_percent) for s in items),
                notes=tuple(f"{s.usage.pending_containers} containers waiting" for s in items),
            )
        )
    return charts.line_chart(
        "chart-usage",
        "Share of the cluster each leaf queue holds, per round",
        series,
        y_format=lambda v: f"{v:g} % of the cluster",
        y_tick=lambda v: f"{v:g} %",
        y_max=100.0,
        empty="no round has observed the queues yet",
    )


def apply_events(
    applies: Sequence[ApplyRecord], rounds: Sequence[tuple[int, float]]
) -> list[charts.Event]:
    """Each successful apply or rollback, placed just before the first round that
    started after it."""
    events = []
    ordered = sorted(rounds, key=lambda r: r[1])
    for record in applies:
        if record.result not in ("applied", "rolled-back") or record.finished_at is None:
            continue
        after = next((rid for rid, at in ordered if at >= record.finished_at), None)
        if after is None:
            after = (ordered[-1][0] + 1) if ordered else 1
        verb = "rollback" if record.kind == "rollback" else "applied"
        events.append(charts.Event(after - 0.5, f"#{record.proposal_id} {verb}"))
    return events


def predicted_vs_realised(
    proposals: Sequence[ProposalRecord], checked: Sequence[PredictionError]
) -> list[charts.Pair]:
    """Per proposal and group: what it predicted for its own jobs and what they
    realised once all finished (the one definition of realised,
    :mod:`yarn_adapt.service.proposers.checking`); an applied proposal not checked yet shows
    its prediction alone."""
    by_key = {(c.proposal_id, c.group): c for c in checked}
    pairs = []
    for proposal in sorted(proposals, key=lambda p: p.id):
        for group in proposal.groups:
            found = by_key.get((proposal.id, group.group))
            if found is not None:
                what = "proposed" if found.config == "proposed" else "running (not applied)"
                note = f"its {found.jobs} jobs, all finished; {what} configuration"
                pairs.append(
                    charts.Pair(
                        f"#{proposal.id}", group.group, found.predicted_s, found.realised_s, note
                    )
                )
            elif proposal.state is ProposalState.APPLIED and _finite(group.after_s):
                note = "its jobs have not all finished yet"
                pairs.append(charts.Pair(f"#{proposal.id}", group.group, group.after_s, None, note))
    return pairs


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value >= 0


def paired_chart(pairs: Sequence[charts.Pair]) -> Markup:
    return charts.paired_chart(
        "chart-predicted",
        "Predicted vs realised mean latency of each proposal's own jobs",
        pairs,
        names=("predicted", "realised"),
        y_format=duration,
        y_steps=charts.time_step,
        empty="no proposal yet",
    )


# --------------------------------------------------------------------------- evidence


def evidence_rows(
    proposal: ProposalRecord,
    checked_earlier: Sequence[PredictionError],
    link: Callable[[str], list[tuple[str, str]]],
    checked_own: Sequence[PredictionError] = (),
) -> list[dict[str, Any]]:
    """The evidence table's rows: per group, the prediction, its likely range, the
    gain it needed, the check on its own jobs, the warnings and the jobs behind it."""
    rows = []
    for group in proposal.groups:
        band = (
            f"{duration(group.after_low_s)} – {duration(group.after_high_s)}"
            if group.after_low_s is not None and group.after_high_s is not None
            else "not stated"
        )
        checked = next((c for c in checked_own if c.group == group.group), None)
        rows.append(
            {
                "group": group.group,
                "jobs": group.jobs,
                "jobs_words": jobs_words(group),
                "before": duration(group.before_s),
                "after": duration(group.after_s),
                "band": band,
                "band_source": group.interval_source,
                "gain_needed": f"{group.required_gain:.1%}" if group.required_gain else "",
                "checked": checked_words(checked),
                "realised_s": checked.realised_s if checked is not None else None,
                "realised": duration(checked.realised_s) if checked is not None else "",
                "estimator": group.estimator or "not recorded",
                "warnings": warnings_for(group, checked_earlier, proposal.id),
                "job_ids": [{"id": j, "links": link(j)} for j in group.job_ids],
            }
        )
    return rows


def checked_words(checked: PredictionError | None) -> str:
    """The prediction beside what its own jobs realised, in words."""
    if checked is None:
        return "not yet: its jobs have not all finished"
    where = {True: "inside its likely range", False: "outside its likely range", None: ""}
    what = "proposed" if checked.config == "proposed" else "running (not applied)"
    return (
        f"{duration(checked.realised_s)} realised by its {checked.jobs} jobs against "
        f"{duration(checked.predicted_s)} predicted for the {what} configuration: "
        f"off by {checked.error:.0%}{'; ' + where[checked.inside] if where[checked.inside] else ''}"
    )


def interval_rows(proposal: ProposalRecord, realized: Sequence[RealizedLatency]) -> list[str]:
    """The interval figures, apart and named as such: whatever jobs finished in each
    round after the apply (a different set of jobs from the prediction's)."""
    rows = []
    for r in sorted(realized, key=lambda r: (r.group, r.interval)):
        if r.proposal_id != proposal.id:
            continue
        mean = duration(r.mean_s) if r.mean_s is not None else "no job finished"
        rows.append(f"{r.group}, round {r.interval} after the apply: {mean} ({r.jobs} jobs)")
    return rows


def job_links(service: Service) -> Callable[[str], list[tuple[str, str]]]:
    """Links of a job id to the RM's app page and JobHistory's job page, when the
    service talks to a real RM (the simulated cluster has no pages)."""
    backend = service.backend
    rm = getattr(getattr(backend, "rm", None), "endpoints", None)
    history = getattr(backend, "history", None)
    rm_url = (rm.active or rm.base_urls[0]) if rm is not None else None
    history_url = getattr(history, "base_url", None)

    def links(job_id: str) -> list[tuple[str, str]]:
        found = []
        if job_id.startswith("application_"):
            if rm_url:
                found.append(("RM", f"{rm_url}/cluster/app/{job_id}"))
            if history_url:
                job = "job_" + job_id.removeprefix("application_")
                found.append(("JobHistory", f"{history_url}/jobhistory/job/{job}"))
        return found

    return links


# --------------------------------------------------------------------------- versions


def version_rows(
    versions: Sequence[ConfigVersion], proposals: dict[int, ProposalRecord]
) -> list[dict[str, Any]]:
    """Newest first; the first runs now. Each says how it differs from the one
    before it."""
    rows = []
    for index, version in enumerate(versions):
        older = versions[index + 1] if index + 1 < len(versions) else None
        rows.append(
            {
                "id": version.id,
                "seen_at_epoch_s": version.seen_at,
                "when": when(version.seen_at),
                "actor": version.actor,
                "why": version.why,
                "proposal_id": version.proposal_id,
                "running": index == 0,
                "changes": len(version_changes(older, version)) if older else None,
            }
        )
    return rows


def version_changes(older: ConfigVersion | None, newer: ConfigVersion) -> list[ConfigChange]:
    if older is None:
        return []
    a = _parsed(older.xml, f"version {older.id}")
    b = _parsed(newer.xml, f"version {newer.id}")
    if a is None or b is None or type(a) is not type(b):
        return []
    return list(diff_configs(a, b))


def standings_of(applies: Sequence[ApplyRecord]) -> dict[int, Standing]:
    return standings(applies)
