"""Shared types of the appliers: the plan shown before acting, the outcome after,
and where an applier keeps its lock, backups and journal."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from yarn_adapt.errors import ApplyError
from yarn_adapt.model import SchedulerStatus
from yarn_adapt.yarn.apply.backup import BackupStore
from yarn_adapt.yarn.apply.journal import ApplyJournal, ApplyStep, JsonlJournal
from yarn_adapt.yarn.apply.lock import ApplyLock
from yarn_adapt.yarn.apply.polling import PollSettings
from yarn_adapt.yarn.confxml import ConfigChange, render_diff

DesiredT_contra = TypeVar("DesiredT_contra", contravariant=True)
DesiredT = TypeVar("DesiredT")


class ApplyResult(StrEnum):
    APPLIED = "applied"
    ALREADY_APPLIED = "already-applied"
    REACTIVATED = "reactivated"
    PLANNED = "planned"


@dataclass(frozen=True)
class ApplyPlan:
    """What an apply would do: the changes, the steps, and the payload (the new file
    text or the mutation body) so an operator can read it before anything happens."""

    applier: str
    target: str
    changes: tuple[ConfigChange, ...]
    steps: tuple[str, ...]
    payload: str = ""

    @property
    def is_empty(self) -> bool:
        return not self.changes

    def render(self) -> str:
        lines = [f"applier: {self.applier}", f"target:  {self.target}"]
        if self.is_empty:
            return "\n".join([*lines, "no changes: the target already says this"])
        lines += ["changes:", _indent(render_diff(self.changes)), "steps:"]
        lines += [f"  {number}. {step}" for number, step in enumerate(self.steps, 1)]
        return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


@dataclass(frozen=True)
class ApplyOutcome:
    apply_id: str
    result: ApplyResult
    plan: ApplyPlan
    backup: Path | None = None
    timings_s: Mapping[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        backup = f"; backup {self.backup}" if self.backup else ""
        timing = ", ".join(f"{step} {seconds:.1f}s" for step, seconds in self.timings_s.items())
        changes = f"{len(self.plan.changes)} changes{backup}"
        return f"{self.result}: {self.plan.target} ({changes}) {timing}".rstrip()


@dataclass(frozen=True)
class Settled:
    """Where an activation ended: the final step recorded, why in one line, and the
    error an apply raises for it (None when verified)."""

    step: ApplyStep
    message: str = ""
    error: type[ApplyError] | None = None

    def raise_unless_verified(self) -> None:
        if self.error is not None:
            raise self.error(self.message)


class SchedulerReader(Protocol):
    """The one thing the appliers read from the RM to verify: ``/scheduler``."""

    def scheduler(self) -> SchedulerStatus: ...


class Applier(Protocol[DesiredT_contra]):
    def plan(self, desired: DesiredT_contra) -> ApplyPlan: ...

    def apply(self, desired: DesiredT_contra, *, apply_id: str | None = None) -> ApplyOutcome: ...


@dataclass(frozen=True, kw_only=True)
class ApplySettings:
    """Where an applier keeps its state, and how long it waits for the RM."""

    state_dir: Path
    verify: PollSettings = field(default_factory=PollSettings)
    keep_backups: int = 50

    @property
    def lock(self) -> ApplyLock:
        return ApplyLock(self.state_dir / "apply.lock")

    @property
    def backups(self) -> BackupStore:
        return BackupStore(self.state_dir / "backups", self.keep_backups)

    def default_journal(self) -> ApplyJournal:
        return JsonlJournal(self.state_dir / "apply-journal.jsonl")


def new_apply_id() -> str:
    return uuid.uuid4().hex[:12]


class DryRun(Generic[DesiredT]):
    """A read-only applier: plans exactly as the wrapped one would, never acts."""

    def __init__(self, inner: Applier[DesiredT]) -> None:
        self._inner = inner

    def plan(self, desired: DesiredT) -> ApplyPlan:
        return self._inner.plan(desired)

    def apply(self, desired: DesiredT, *, apply_id: str | None = None) -> ApplyOutcome:
        return ApplyOutcome(apply_id or new_apply_id(), ApplyResult.PLANNED, self.plan(desired))
