"""A proposal and the decisions behind it: what each group decided, composed into
one configuration, checked with YARN's own rules (the pure validators of
:mod:`yarn_adapt.yarn.schedconf`; a group whose change YARN would refuse keeps what
runs), and diffed against the running configuration with a reason per change. The
common end of every proposer (:mod:`.tuner`, the demand proposers)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from yarn_adapt.durations import duration
from yarn_adapt.errors import ValidationIssue
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    FairSchedulerConfig,
    SchedulerConfig,
)
from yarn_adapt.tuning.apply import apply_setting
from yarn_adapt.tuning.space import GroupSetting
from yarn_adapt.yarn.schedconf.diff import ConfigChange, diff_configs
from yarn_adapt.yarn.schedconf.issues import yarn_refuses
from yarn_adapt.yarn.schedconf.validate_capacity import validate_capacity
from yarn_adapt.yarn.schedconf.validate_fair import validate_fair


@dataclass(frozen=True)
class GroupDecision:
    """What happened to one group: whether it was triggered and why, its predicted
    mean job latency under the running and the proposed configuration, and the
    setting chosen (``None`` when it keeps its configuration); ``evaluations``:
    the comparator's distinct scores of its search, ``worst_s`` the highest of
    them."""

    group: str
    queues: tuple[str, ...]
    triggered: bool
    reason: str
    jobs: int = 0
    before_s: float = math.nan
    after_s: float = math.nan
    setting: GroupSetting | None = None
    evaluations: int = 0
    worst_s: float = math.nan
    found_s: float = math.nan  # the best setting's prediction, kept or not
    # which candidate won ("search", "running", "hindsight") and the hindsight
    # static's mean latency on the replayed history (NaN without one)
    candidate: str = "search"
    hindsight_s: float = math.nan
    # the horizon: the forecast jobs' predicted mean latency under the running and
    # the chosen configuration (NaN without a forecast), apart from before_s and
    # after_s, which are the jobs in progress alone (the checkable part)
    forecast_before_s: float = math.nan
    forecast_after_s: float = math.nan
    forecast_jobs: int = 0

    @property
    def changed(self) -> bool:
        return self.setting is not None

    @property
    def indifferent(self) -> bool:
        """Every candidate scored at the group's current resources predicted the same
        latency: its configuration does not matter there (say, its jobs' demand
        fits in its share and no limit binds)."""
        return self.triggered and self.worst_s == self.after_s == self.before_s


@dataclass(frozen=True)
class Proposal:
    """The proposed configuration (valid for YARN against ``current``), what each
    group decided, the cluster's predicted mean job latency before and after, and the
    changes with their reasons (``reasons[i]`` explains ``changes[i]``)."""

    config: SchedulerConfig
    current: SchedulerConfig
    groups: tuple[GroupDecision, ...]
    cluster_before_s: float
    cluster_after_s: float
    changes: tuple[ConfigChange, ...]
    reasons: tuple[str, ...]
    issues: tuple[ValidationIssue, ...] = ()

    @property
    def triggered(self) -> tuple[str, ...]:
        return tuple(g.group for g in self.groups if g.triggered)

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def worth_it(before: float, after: float, threshold: float) -> bool:
    if not math.isfinite(after):
        return False
    if not math.isfinite(before):
        return True
    return after < before * (1.0 - threshold)


def seconds_text(value: float) -> str:
    return duration(value) if math.isfinite(value) else "never (jobs starve)"


def compose(current: SchedulerConfig, decisions: Sequence[GroupDecision]) -> SchedulerConfig:
    config = current
    for decision in decisions:
        if decision.setting is not None:
            config = apply_setting(config, decision.setting)
    return config


def finish_proposal(
    current: SchedulerConfig, proposed: SchedulerConfig, decisions: Sequence[GroupDecision]
) -> Proposal:
    """The common end of every proposer: groups whose change YARN would refuse are
    left unchanged, then the diff against ``current`` with a reason per change."""
    valid, kept, issues = _valid(current, proposed, list(decisions))
    changes = tuple(diff_configs(current, valid))
    reasons = tuple(_reason_for(change, kept) for change in changes)
    before, after = _cluster_latency(kept)
    return Proposal(valid, current, tuple(kept), before, after, changes, reasons, tuple(issues))


def validate(config: SchedulerConfig, running: SchedulerConfig) -> list[ValidationIssue]:
    """YARN's rules for ``config`` replacing ``running`` (the pure validators, not the
    XML facade: decision code reads no files)."""
    if isinstance(config, CapacitySchedulerConfig):
        previous = running if isinstance(running, CapacitySchedulerConfig) else None
        return list(validate_capacity(config, previous))
    assert isinstance(config, FairSchedulerConfig)
    previous_fair = running if isinstance(running, FairSchedulerConfig) else None
    return list(validate_fair(config, previous_fair))


def _valid(
    current: SchedulerConfig, proposed: SchedulerConfig, decisions: list[GroupDecision]
) -> tuple[SchedulerConfig, list[GroupDecision], list[ValidationIssue]]:
    """Drop the changes of groups YARN would refuse, until what is left is valid:
    first only the groups a refusal names (their queues go back to what runs, the
    other groups' changes and the cluster-level split stay), then every group's."""
    issues = validate(proposed, current)
    if not yarn_refuses(issues):
        return proposed, decisions, issues
    changed = {d.group for d in decisions if d.setting is not None}
    blamed = _blamed(issues, changed)
    if blamed and blamed != changed:
        narrowed = _restore_groups(proposed, current, blamed)
        left = validate(narrowed, current)
        if not yarn_refuses(left):
            return narrowed, _refused(decisions, issues, blamed), left
    kept = _refused(decisions, issues, changed)
    fallback = compose(current, kept)
    return fallback, kept, validate(fallback, current)


def _blamed(issues: Sequence[ValidationIssue], groups: set[str]) -> set[str]:
    """The changed groups holding a queue YARN refuses."""
    refused = [i for i in issues if yarn_refuses([i])]
    return {g for g in groups if any(_within(i.queue, g) for i in refused)}


def _within(queue: str, group: str) -> bool:
    return queue == group or queue.startswith(group + ".")


def _restore_groups(
    proposed: SchedulerConfig, current: SchedulerConfig, groups: set[str]
) -> SchedulerConfig:
    """``proposed`` with each of ``groups``' children as they run now (the group's own
    share, set by the cluster-level split, stays as proposed)."""
    config = proposed
    for group in groups:
        now, new = current.find(group), config.find(group)
        assert now is not None and new is not None, group
        config = config.with_queue(replace(new, children=now.children))  # type: ignore[arg-type]
    return config


def _refused(
    decisions: Sequence[GroupDecision], issues: Sequence[ValidationIssue], groups: set[str]
) -> list[GroupDecision]:
    return [
        replace(
            d,
            setting=None,
            after_s=d.before_s,
            reason=f"{d.reason}; YARN would refuse: {_first(issues, d)}",
        )
        if d.group in groups
        else d
        for d in decisions
    ]


def _first(issues: Sequence[ValidationIssue], decision: GroupDecision) -> str:
    mine = [i for i in issues if _within(i.queue, decision.group)]
    return str((mine or list(issues))[0])


def _reason_for(change: ConfigChange, decisions: Sequence[GroupDecision]) -> str:
    owner = max(
        (d for d in decisions if change.queue == d.group or change.queue.startswith(d.group + ".")),
        key=lambda d: len(d.group),
        default=None,
    )
    if owner is None or owner.setting is None:
        return owner.reason if owner else "cluster-level split (Algorithm 3)"
    if math.isnan(owner.before_s):  # a proposer that predicts no latency
        return f"{owner.group}: {owner.reason}; {owner.setting.describe()}"
    return (
        f"{owner.group}: {owner.reason}; predicted mean latency of its {owner.jobs} jobs "
        f"{seconds_text(owner.before_s)} -> {seconds_text(owner.after_s)} "
        f"with {owner.setting.describe()}"
    )


def _cluster_latency(decisions: Sequence[GroupDecision]) -> tuple[float, float]:
    """Job-weighted mean over the groups that were predicted (infinite when a
    group's jobs starve)."""
    known = [d for d in decisions if d.jobs and not math.isnan(d.before_s)]
    jobs = sum(d.jobs for d in known)
    if not jobs:
        return math.nan, math.nan
    before = sum(d.before_s * d.jobs for d in known) / jobs
    after = sum(d.after_s * d.jobs for d in known) / jobs
    return before, after
