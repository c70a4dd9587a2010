"""Apply a scheduler configuration by rewriting the file the RM reads.

Capacity Scheduler: write capacity-scheduler.xml, run the refresh command (default
``yarn rmadmin -refreshQueues``). Fair Scheduler: write fair-scheduler.xml and let
the scheduler reload it. Either way:

1. take the apply lock (one apply at a time);
2. read the current file; if it already says the desired configuration and the RM
   reports it, do nothing (never act twice);
3. validate with YARN's rules against the current file (nothing is written when
   invalid);
4. keep a timestamped backup, journal it, write the new text atomically, journal it;
5. activate (refresh / reload), journal it;
6. poll ``/scheduler`` until the RM reports every new value;
7. on a refusal or a timeout: restore the backup, activate again, confirm the RM
   reports the old values, journal the rollback and raise. If even that fails,
   raise :class:`~yarn_adapt.errors.RollbackFailed`: the operator must act.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from yarn_adapt.errors import ApplyNotVerified, ApplyRejected, RollbackFailed, YarnError
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig
from yarn_adapt.yarn.apply.activation import Activation, ActivationFailed
from yarn_adapt.yarn.apply.backup import sha256_text
from yarn_adapt.yarn.apply.base import (
    ApplyOutcome,
    ApplyPlan,
    ApplyResult,
    ApplySettings,
    SchedulerReader,
    new_apply_id,
)
from yarn_adapt.yarn.apply.expectations import mismatches
from yarn_adapt.yarn.apply.journal import ApplyJournal, ApplyStep, JournalEntry
from yarn_adapt.yarn.apply.polling import poll_until
from yarn_adapt.yarn.confxml import (
    SchedulerDocument,
    diff_configs,
    parse_capacity_xml,
    parse_fair_xml,
    raise_if_invalid,
    read_scheduler_document,
)
from yarn_adapt.yarn.schedconf.xmlio import declared_encoding, parse_document, write_atomically

SchedulerConfig = CapacitySchedulerConfig | FairSchedulerConfig


class FileApplier:
    """Rewrite ``path`` and make the RM take it (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        rm: SchedulerReader,
        activation: Activation,
        settings: ApplySettings,
        journal: ApplyJournal | None = None,
    ) -> None:
        self.path = path
        self.rm = rm
        self.activation = activation
        self.settings = settings
        self.journal = journal or settings.default_journal()
        self.name = f"file+{type(activation).__name__}"

    # ------------------------------------------------------------------ planning

    def plan(self, desired: SchedulerConfig) -> ApplyPlan:
        document = read_scheduler_document(self.path)
        raise_if_invalid(desired, document.config, source=str(self.path))
        return self._plan(document, desired)

    def _plan(self, document: SchedulerDocument, desired: SchedulerConfig) -> ApplyPlan:
        changes = tuple(diff_configs(document.config, desired))
        steps = (
            f"back up {self.path} into {self.settings.backups.directory}",
            f"write {self.path} atomically",
            self.activation.describe(),
            f"confirm through /scheduler that the RM reports the new values "
            f"(up to {self.settings.verify.timeout_s:g} s)",
            "on refusal or timeout: restore the backup, activate again, confirm",
        )
        payload = _render(document, desired) if changes else ""
        return ApplyPlan(self.name, str(self.path), changes, steps, payload)

    # ------------------------------------------------------------------ applying

    def apply(self, desired: SchedulerConfig, *, apply_id: str | None = None) -> ApplyOutcome:
        apply_id = apply_id or new_apply_id()
        with self.settings.lock:
            # Pre-flight: an RM we cannot read is an RM we cannot verify, so nothing
            # is written (the YarnError propagates with its own exit code).
            self.rm.scheduler()
            document = read_scheduler_document(self.path)
            plan = self._plan(document, desired)
            if plan.is_empty:
                return self._settle_unchanged(apply_id, plan, desired)
            raise_if_invalid(desired, document.config, source=str(self.path))
            return self._write_and_activate(apply_id, plan, document, desired)

    def _settle_unchanged(
        self, apply_id: str, plan: ApplyPlan, desired: SchedulerConfig
    ) -> ApplyOutcome:
        """The file already says it; activate only if the RM does not run it yet."""
        if not self._problems(desired):
            self._record(apply_id, ApplyStep.NOTHING_TO_DO, detail="file and RM already agree")
            return ApplyOutcome(apply_id, ApplyResult.ALREADY_APPLIED, plan)
        timings = self._activate_and_verify(apply_id, desired, backup=None, old=None)
        return ApplyOutcome(apply_id, ApplyResult.REACTIVATED, plan, None, timings)

    def _write_and_activate(
        self,
        apply_id: str,
        plan: ApplyPlan,
        document: SchedulerDocument,
        desired: SchedulerConfig,
    ) -> ApplyOutcome:
        new_sha = sha256_text(plan.payload)
        self._record(
            apply_id, ApplyStep.PLANNED, new_sha256=new_sha, detail=f"{len(plan.changes)} changes"
        )
        backup = self.settings.backups.save(self.path)
        self._record(apply_id, ApplyStep.BACKED_UP, backup=backup, new_sha256=new_sha)
        write_atomically(self.path, plan.payload, _encoding(document))
        self._record(apply_id, ApplyStep.WRITTEN, backup=backup, new_sha256=new_sha)
        timings = self._activate_and_verify(apply_id, desired, backup, document.config)
        return ApplyOutcome(apply_id, ApplyResult.APPLIED, plan, backup, timings)

    def _activate_and_verify(
        self,
        apply_id: str,
        desired: SchedulerConfig,
        backup: Path | None,
        old: SchedulerConfig | None,
    ) -> dict[str, float]:
        timings: dict[str, float] = {}
        with _timed(timings, "activate"):
            refusal = self._try_activate()
        if refusal is not None:
            self._undo(apply_id, backup, old, f"the RM refused it: {refusal}")
            raise ApplyRejected(
                self._failure(f"the RM refused the new configuration ({refusal})", backup)
            )
        self._record(apply_id, ApplyStep.ACTIVATED, backup=backup)
        with _timed(timings, "verify"):
            problems = self._wait_for(desired)
        if problems:
            self._undo(apply_id, backup, old, f"not reported: {problems[0]}")
            raise ApplyNotVerified(
                self._failure(f"the RM does not report it: {_first(problems)}", backup)
            )
        self._record(apply_id, ApplyStep.VERIFIED, backup=backup)
        return timings

    def _try_activate(self) -> str | None:
        try:
            self.activation.activate()
        except ActivationFailed as exc:
            return str(exc)
        return None

    # ------------------------------------------------------------------ rolling back

    def _undo(
        self, apply_id: str, backup: Path | None, old: SchedulerConfig | None, why: str
    ) -> None:
        if backup is None or old is None:
            self._record(apply_id, ApplyStep.FAILED, detail=why)
            return
        try:
            self._restore(backup, old)
        except RollbackFailed as exc:
            self._record(apply_id, ApplyStep.FAILED, backup=backup, detail=f"{why}; {exc}")
            raise
        self._record(apply_id, ApplyStep.ROLLED_BACK, backup=backup, detail=why)

    def _restore(self, backup: Path, old: SchedulerConfig) -> None:
        try:
            write_atomically(self.path, backup.read_text(encoding="utf-8"))
        except OSError as exc:
            raise RollbackFailed(f"{self.path}: cannot restore {backup}: {exc}") from exc
        refusal = self._try_activate()
        if refusal is not None:
            raise RollbackFailed(
                f"{self.path}: restored {backup} but the RM refused it too: {refusal}"
            )
        problems = self._wait_for(old)
        if problems:
            raise RollbackFailed(
                f"{self.path}: restored {backup} but the RM does not report it: {_first(problems)}"
            )

    # ------------------------------------------------------------------ recovery

    def recover(self, interrupted: JournalEntry) -> ApplyStep:
        """Finish or undo an apply that stopped between its backup and its
        verification (a crash). Returns the final step recorded."""
        with self.settings.lock:
            current_text = self.path.read_text(encoding="utf-8")
            if sha256_text(current_text) != interrupted.new_sha256:
                self._record(
                    interrupted.apply_id,
                    ApplyStep.ROLLED_BACK,
                    detail="the new file was never written",
                )
                return ApplyStep.ROLLED_BACK
            desired = _parse_like(self.path, current_text)
            backup = Path(interrupted.backup) if interrupted.backup else None
            old = _parse_like(self.path, backup.read_text(encoding="utf-8")) if backup else None
            try:
                self._activate_and_verify(interrupted.apply_id, desired, backup, old)
            except (ApplyRejected, ApplyNotVerified):
                return ApplyStep.ROLLED_BACK
            return ApplyStep.VERIFIED

    # ------------------------------------------------------------------ helpers

    def _problems(self, desired: SchedulerConfig) -> list[str]:
        try:
            return mismatches(desired, self.rm.scheduler())
        except YarnError as exc:
            return [f"cannot read /scheduler: {exc.one_line()}"]

    def _wait_for(self, desired: SchedulerConfig) -> list[str]:
        _, problems = poll_until(lambda: self._problems(desired), _is_empty, self.settings.verify)
        return problems

    def _failure(self, what: str, backup: Path | None) -> str:
        restored = f"; restored {backup} and the RM runs the previous settings" if backup else ""
        return f"{self.path}: {what}{restored}"

    def _record(
        self,
        apply_id: str,
        step: ApplyStep,
        *,
        backup: Path | None = None,
        new_sha256: str = "",
        detail: str = "",
    ) -> None:
        self.journal.record(
            JournalEntry(
                apply_id=apply_id,
                step=step,
                applier=self.name,
                target=str(self.path),
                backup=str(backup or ""),
                new_sha256=new_sha256,
                detail=detail,
            )
        )


def _render(document: SchedulerDocument, desired: SchedulerConfig) -> str:
    return document.render(desired)  # type: ignore[arg-type]


def _encoding(document: SchedulerDocument) -> str:
    return declared_encoding(document.raw)


def _parse_like(path: Path, text: str) -> SchedulerConfig:
    """Parse a scheduler file's text of either kind (told apart by its root)."""
    if parse_document(text, str(path)).root_name == "allocations":
        return parse_fair_xml(text, str(path)).config
    return parse_capacity_xml(text, str(path)).config


def _is_empty(problems: list[str]) -> bool:
    return not problems


def _first(problems: list[str]) -> str:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return problems[0] + more


@contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        timings[step] = round(time.monotonic() - started, 3)
