"""Text for ``yarn-adapt propose``: the predictions per group, the configuration
diff with a reason per change, and the XML to write (through the project's writer,
validated)."""

from __future__ import annotations

import math

from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig, SchedulerConfig
from yarn_adapt.tuning.proposal import GroupDecision, Proposal
from yarn_adapt.yarn.confxml import (
    CapacityDocument,
    FairDocument,
    SchedulerDocument,
    raise_if_invalid,
    render_capacity,
    render_diff,
    render_fair,
)


def render_proposal(proposal: Proposal) -> str:
    """Predictions table, then the diff and the reasons (or why nothing changes)."""
    lines = [_predictions(proposal), ""]
    if not proposal.changes:
        lines.append("No change proposed.")
        lines += [f"  {d.group}: {d.reason}" for d in proposal.groups]
        return "\n".join(lines)
    lines.append("Proposed changes:")
    lines.append(render_diff(list(proposal.changes)))
    lines.append("")
    lines.append("Why:")
    lines += [
        f"  {c.queue}.{c.prop}: {r}"
        for c, r in zip(proposal.changes, proposal.reasons, strict=True)
    ]
    return "\n".join(lines)


def _predictions(proposal: Proposal) -> str:
    header = (
        f"{'group':<20} {'jobs':>5} {'triggered':>9} {'before':>10} {'after':>10} {'change':>8}"
    )
    rows = [header] + [_row(d) for d in proposal.groups]
    rows.append(
        f"{'cluster':<20} {sum(d.jobs for d in proposal.groups):>5} {'':>9} "
        f"{_s(proposal.cluster_before_s):>10} {_s(proposal.cluster_after_s):>10} "
        f"{_pct(proposal.cluster_before_s, proposal.cluster_after_s):>8}"
    )
    return "Predicted mean job latency (comparator, task-time model estimates):\n" + "\n".join(rows)


def _row(decision: GroupDecision) -> str:
    return (
        f"{decision.group:<20} {decision.jobs:>5} {'yes' if decision.triggered else 'no':>9} "
        f"{_s(decision.before_s):>10} {_s(decision.after_s):>10} "
        f"{_pct(decision.before_s, decision.after_s):>8}"
    )


def _s(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.1f}s" if math.isfinite(value) else "starves"


def _pct(before: float, after: float) -> str:
    if not (math.isfinite(before) and math.isfinite(after)) or before <= 0:
        return "-"
    return f"{100.0 * (after - before) / before:+.1f}%"


def proposal_xml(proposal: Proposal, original: SchedulerDocument | None = None) -> str:
    """The proposed configuration as a scheduler file: ``original`` patched when
    given (comments and unknown properties kept), else a fresh file. Validated
    against the running configuration first."""
    config: SchedulerConfig = proposal.config
    raise_if_invalid(config, proposal.current, source="proposal")
    if isinstance(config, CapacitySchedulerConfig):
        return render_capacity(config, original if isinstance(original, CapacityDocument) else None)
    assert isinstance(config, FairSchedulerConfig)
    return render_fair(config, original if isinstance(original, FairDocument) else None)
