"""Every scheduler configuration that ran, and what each proposal stands for now.

* :func:`note_running` records the configuration a round (or an operator's apply)
  found running when it differs from the last version: who made it run (the apply
  whose configuration it is, else ``outside yarn-adapt``) and why.
* :func:`revert_draft` turns an earlier version into an ordinary proposal, reviewed
  and applied like the tuner's.
* :func:`standings` says, from the applies alone, which proposal's configuration runs
  now and which later apply replaced each earlier one: a proposal stays ``applied``
  in the state machine (it *was* applied), the page says it was replaced.

Comparisons are by meaning (:func:`~yarn_adapt.yarn.confxml.diff_configs`), not by
text: a file rewritten with other whitespace is the same version.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from yarn_adapt.errors import InputError, YarnAdaptError
from yarn_adapt.model import SchedulerConfig
from yarn_adapt.service.state.records import ApplyRecord, ProposalRecord, ProposalState
from yarn_adapt.service.state.series import ConfigVersion, ProposalOrigin
from yarn_adapt.service.state.store import Store
from yarn_adapt.service.xmltext import parse_scheduler_text
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.yarn.confxml import ConfigChange, SchedulerDocument, diff_configs

SUCCESSFUL = ("applied", "rolled-back")


def same_config(a: SchedulerConfig, b: SchedulerConfig) -> bool:
    return type(a) is type(b) and not diff_configs(a, b)


def _config_of(xml: str, source: str) -> SchedulerConfig | None:
    try:
        return parse_scheduler_text(xml, source)
    except YarnAdaptError:
        return None


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- recording


def note_running(
    store: Store,
    document: SchedulerDocument,
    *,
    at: float | None = None,
    round_id: int | None = None,
) -> ConfigVersion | None:
    """Record ``document`` as a new version unless it is the latest one already."""
    latest = store.latest_version()
    if latest is not None:
        previous = _config_of(latest.xml, f"version {latest.id}")
        if previous is not None and same_config(previous, document.config):
            return None
    text = document.render()
    actor, why, proposal_id, apply_id = _attribution(store, document.config, first=latest is None)
    return store.record_version(
        at if at is not None else time.time(),
        sha256_of(text),
        text,
        actor,
        why,
        proposal_id=proposal_id,
        apply_id=apply_id,
        round_id=round_id,
    )


def _attribution(
    store: Store, config: SchedulerConfig, *, first: bool
) -> tuple[str, str, int | None, str]:
    """Who made ``config`` run and why: the latest successful apply or rollback
    that wrote it, else the first observation, else someone outside yarn-adapt."""
    origins = store.origins()
    for record in reversed(store.all_applies()):
        if record.result not in SUCCESSFUL or record.finished_at is None:
            continue
        written = _config_of(record.config_xml, f"apply {record.apply_id}")
        if written is None or not same_config(written, config):
            continue
        proposal = store.proposal(record.proposal_id)
        return (
            record.actor,
            _why(record, proposal, origins.get(proposal.id)),
            proposal.id,
            (record.apply_id),
        )
    if first:
        return "yarn-adapt", "running when yarn-adapt first read it", None, ""
    return "outside yarn-adapt", "changed by someone or something other than yarn-adapt", None, ""


def _why(record: ApplyRecord, proposal: ProposalRecord, origin: ProposalOrigin | None) -> str:
    if record.kind == "rollback":
        return f"rollback of proposal {proposal.id}"
    if origin is not None and origin.kind == "revert":
        return f"proposal {proposal.id}: revert to version {origin.version_id}"
    gain = proposal.improvement
    predicted = (
        f" (predicted {gain:.0%} lower mean job latency)" if gain and math.isfinite(gain) else ""
    )
    return f"proposal {proposal.id}{predicted}"


# --------------------------------------------------------------------------- reverting


@dataclass(frozen=True)
class RevertDraft:
    draft: ProposalRecord
    changed_groups: tuple[str, ...]
    origin: ProposalOrigin


def revert_draft(
    version: ConfigVersion, running: SchedulerDocument, target: str, actor: str
) -> RevertDraft:
    """A proposal that makes ``version`` run again, against the running document
    (rendered as a patch of the running file, so comments survive)."""
    wanted = parse_scheduler_text(version.xml, f"version {version.id}")
    if type(wanted) is not type(running.config):
        raise InputError(
            f"version {version.id} is a {type(wanted).__name__}, the running configuration "
            f"a {type(running.config).__name__}: switching schedulers is not a revert"
        )
    changes = tuple(diff_configs(running.config, wanted))
    if not changes:
        raise InputError(
            f"version {version.id} is the configuration running now: nothing to revert"
        )
    when = time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(version.seen_at))
    reason = f"revert to version {version.id} (ran from {when}; {version.actor}: {version.why})"
    draft = ProposalRecord(
        id=0,
        created_at=0.0,
        updated_at=0.0,
        state=ProposalState.PENDING,
        round_id=None,
        target=target,
        base_xml=running.render(),
        proposed_xml=running.render(wanted),  # type: ignore[arg-type]
        changes=changes,
        groups=(),
        cluster_before_s=math.nan,
        cluster_after_s=math.nan,
        reasons=(reason,),
    )
    origin = ProposalOrigin(0, "revert", version.id, f"asked by {actor}")
    return RevertDraft(draft, changed_groups(running.config, changes), origin)


def changed_groups(config: SchedulerConfig, changes: Sequence[ConfigChange]) -> tuple[str, ...]:
    """The groups (parent queues) whose queues the changes touch."""
    touched = {c.queue for c in changes if c.queue}
    found = [g.parent for g in groups_of(config) if touched & {g.parent, *g.queues}]
    return tuple(found)


# --------------------------------------------------------------------------- standings


@dataclass(frozen=True)
class Standing:
    """Where an applied proposal stands: running now, or replaced by a later
    apply (of ``by_proposal``; ``kind`` ``apply`` or ``rollback``) at ``at``."""

    running: bool
    by_proposal: int | None = None
    kind: str = ""
    at: float | None = None


def standings(applies: Sequence[ApplyRecord]) -> dict[int, Standing]:
    """For every proposal applied at least once: running now or replaced by whom."""
    done = sorted(
        (a for a in applies if a.result in SUCCESSFUL and a.finished_at is not None),
        key=lambda a: (a.finished_at or 0.0, a.id),
    )
    result: dict[int, Standing] = {}
    for index, record in enumerate(done):
        if record.kind != "apply":
            continue
        later = done[index + 1 :]
        if not later:
            result[record.proposal_id] = Standing(running=True)
            continue
        after = later[0]
        result[record.proposal_id] = Standing(
            False, after.proposal_id, after.kind, after.finished_at
        )
    return result
