"""Apply a scheduler configuration by rewriting the file the RM reads.

Capacity Scheduler: write capacity-scheduler.xml, run the refresh command (default
``yarn rmadmin -refreshQueues``). Fair Scheduler: write fair-scheduler.xml and let
the scheduler reload it. Either way:

1. take the lock beside the target file (one apply at a time per file, whichever
   process and state directory it comes from);
2. read the current file's bytes; if it already says the desired configuration and
   the RM reports it, do nothing (never act twice);
3. validate with YARN's rules against the current file (nothing is written when
   invalid);
4. journal the plan with the SHA-256 of the old and the new bytes; keep a backup of
   the old bytes, journal it; write the new bytes atomically and durably, journal it;
5. activate (refresh / reload), journal it;
6. poll ``/scheduler`` until the RM reports every new value, journal it;
7. on a refusal or a timeout: journal the decision to roll back, restore the backup's
   bytes, activate again, confirm the RM reports the old values, journal the rollback
   and raise. If even that fails, raise :class:`~yarn_adapt.errors.RollbackFailed`:
   the operator must act.

:meth:`FileApplier.recover` finishes an apply a crash interrupted from its whole
journal history: it compares the file's bytes with both hashes and the RM's report
with both configurations, then completes what the journal had started -- activate and
verify the new file, or restore, activate and confirm the old one -- and records the
outcome that is true at the end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from yarn_adapt.errors import (
    ApplyError,
    ApplyNotVerified,
    ApplyRejected,
    ConfigFileError,
    RollbackFailed,
    YarnError,
)
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig
from yarn_adapt.yarn.apply.activation import Activation, ActivationFailed
from yarn_adapt.yarn.apply.backup import sha256_bytes
from yarn_adapt.yarn.apply.base import (
    ApplyOutcome,
    ApplyPlan,
    ApplyResult,
    ApplySettings,
    SchedulerReader,
    Settled,
    new_apply_id,
)
from yarn_adapt.yarn.apply.expectations import mismatches
from yarn_adapt.yarn.apply.journal import ApplyHistory, ApplyJournal, ApplyStep, ApplyTrail
from yarn_adapt.yarn.apply.lock import ApplyLock
from yarn_adapt.yarn.apply.polling import poll_until
from yarn_adapt.yarn.confxml import (
    SchedulerDocument,
    diff_configs,
    encode_like,
    parse_scheduler_document,
    raise_if_invalid,
    read_scheduler_bytes,
)
from yarn_adapt.yarn.schedconf.xmlio import (
    read_document_bytes,
    remove_stale_temporaries,
    write_bytes_atomically,
)

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

    @property
    def lock(self) -> ApplyLock:
        return ApplyLock.beside(self.path)

    # ------------------------------------------------------------------ planning

    def plan(self, desired: SchedulerConfig) -> ApplyPlan:
        _, document = read_scheduler_bytes(self.path)
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
        payload = document.render(desired) if changes else ""  # type: ignore[arg-type]
        return ApplyPlan(self.name, str(self.path), changes, steps, payload)

    # ------------------------------------------------------------------ applying

    def apply(self, desired: SchedulerConfig, *, apply_id: str | None = None) -> ApplyOutcome:
        apply_id = apply_id or new_apply_id()
        with self.lock:
            # Pre-flight: an RM we cannot read is an RM we cannot verify, so nothing
            # is written (the YarnError propagates with its own exit code).
            self.rm.scheduler()
            old_bytes, document = read_scheduler_bytes(self.path)
            plan = self._plan(document, desired)
            if plan.is_empty:
                return self._settle_unchanged(apply_id, plan, desired, old_bytes)
            raise_if_invalid(desired, document.config, source=str(self.path))
            new_bytes = encode_like(document, plan.payload)
            trail = self._trail(apply_id, sha256_bytes(old_bytes), sha256_bytes(new_bytes))
            trail.record(ApplyStep.PLANNED, f"{len(plan.changes)} changes")
            backup = self.settings.backups.save(self.path, old_bytes)
            trail.backup = str(backup)
            trail.record(ApplyStep.BACKED_UP)
            write_bytes_atomically(self.path, new_bytes)
            trail.record(ApplyStep.WRITTEN)
            timings: dict[str, float] = {}
            self._forward(trail, desired, timings).raise_unless_verified()
            return ApplyOutcome(apply_id, ApplyResult.APPLIED, plan, backup, timings)

    def _settle_unchanged(
        self, apply_id: str, plan: ApplyPlan, desired: SchedulerConfig, current: bytes
    ) -> ApplyOutcome:
        """The file already says it; activate only if the RM does not run it yet."""
        sha = sha256_bytes(current)
        trail = self._trail(apply_id, sha, sha)
        if not self._problems(desired):
            trail.record(ApplyStep.NOTHING_TO_DO, "file and RM already agree")
            return ApplyOutcome(apply_id, ApplyResult.ALREADY_APPLIED, plan)
        trail.record(ApplyStep.PLANNED, "the file already says it; activate it")
        timings: dict[str, float] = {}
        self._forward(trail, desired, timings).raise_unless_verified()
        return ApplyOutcome(apply_id, ApplyResult.REACTIVATED, plan, None, timings)

    def _forward(
        self, trail: ApplyTrail, desired: SchedulerConfig, timings: dict[str, float]
    ) -> Settled:
        """Activate the file in place and verify it; roll back when the RM refuses
        it or does not report it."""
        with _timed(timings, "activate"):
            refusal = self._try_activate()
        if refusal is not None:
            why = f"the RM refused the new configuration ({refusal})"
            return self._give_up(trail, why, ApplyRejected)
        trail.record(ApplyStep.ACTIVATED)
        with _timed(timings, "verify"):
            problems = self._wait_for(desired)
        if problems:
            why = f"the RM does not report it: {_first(problems)}"
            return self._give_up(trail, why, ApplyNotVerified)
        trail.record(ApplyStep.VERIFIED)
        return Settled(ApplyStep.VERIFIED)

    def _give_up(self, trail: ApplyTrail, why: str, error: type[ApplyError]) -> Settled:
        if trail.old_sha256 == trail.new_sha256:  # the file was already in place
            trail.record(ApplyStep.FAILED, why)
            return Settled(ApplyStep.FAILED, f"{self.path}: {why}", error)
        trail.record(ApplyStep.ROLLING_BACK, why)
        return self._undo(trail, why, error)

    def _try_activate(self) -> str | None:
        try:
            self.activation.activate()
        except ActivationFailed as exc:
            return " ".join(str(exc).split())
        return None

    # ------------------------------------------------------------------ rolling back

    def _undo(
        self, trail: ApplyTrail, why: str, error: type[ApplyError] = ApplyNotVerified
    ) -> Settled:
        """Restore the backup, activate it, confirm the RM reports it (the decision
        to roll back is already journaled)."""
        try:
            old = self._restore(trail)
            self._confirm(trail, old)
        except RollbackFailed as exc:
            trail.record(ApplyStep.UNRESOLVED, f"{why}; {exc.one_line()}")
            return Settled(ApplyStep.UNRESOLVED, exc.one_line(), RollbackFailed)
        trail.record(ApplyStep.ROLLED_BACK, why)
        restored = f"; restored {trail.backup} and the RM runs the previous settings"
        return Settled(ApplyStep.ROLLED_BACK, f"{self.path}: {why}{restored}", error)

    def _restore(self, trail: ApplyTrail) -> SchedulerConfig:
        """Write the backup's exact bytes back; the configuration they hold."""
        data = self._backup_bytes(trail)
        try:
            old = parse_scheduler_document(data, trail.backup).config
            write_bytes_atomically(self.path, data)
        except ConfigFileError as exc:
            raise RollbackFailed(
                f"{self.path}: cannot restore {trail.backup}: {exc.one_line()}"
            ) from exc
        trail.record(ApplyStep.RESTORED)
        return old

    def _backup_bytes(self, trail: ApplyTrail) -> bytes:
        if not trail.backup:
            raise RollbackFailed(f"{self.path}: no backup was journaled; nothing to restore")
        try:
            data = Path(trail.backup).read_bytes()
        except OSError as exc:
            raise RollbackFailed(
                f"{self.path}: cannot read the backup {trail.backup}: {exc.strerror or exc}"
            ) from exc
        if trail.old_sha256 and sha256_bytes(data) != trail.old_sha256:
            raise RollbackFailed(
                f"{self.path}: the backup {trail.backup} does not hold the previous "
                f"configuration (its sha256 differs from the journal's)"
            )
        return data

    def _confirm(self, trail: ApplyTrail, old: SchedulerConfig) -> None:
        """Activate the file in place (the previous configuration) and confirm it."""
        refusal = self._try_activate()
        if refusal is not None:
            raise RollbackFailed(
                f"{self.path}: restored {trail.backup} but the RM refused it too: {refusal}"
            )
        problems = self._wait_for(old)
        if problems:
            raise RollbackFailed(
                f"{self.path}: restored {trail.backup} but the RM does not report it: "
                f"{_first(problems)}"
            )

    # ------------------------------------------------------------------ recovery

    def recover(self, history: ApplyHistory) -> ApplyStep:
        """Finish an apply a crash interrupted (see the module docstring); returns
        the final step recorded. A YarnError (the RM cannot be read) propagates
        before anything is decided: try again later."""
        with self.lock:
            remove_stale_temporaries(self.path)
            trail = ApplyTrail.resume(self.journal, history)
            if not trail.old_sha256 and trail.backup:  # a journal from before v2
                trail.old_sha256 = _sha_of(Path(trail.backup))
            try:
                current = read_document_bytes(self.path)
            except ConfigFileError as exc:
                return trail.record(ApplyStep.UNRESOLVED, f"recovery: {exc.one_line()}")
            sha = sha256_bytes(current)
            if sha == trail.new_sha256:
                if history.reached(ApplyStep.ROLLING_BACK):
                    return self._undo(trail, _resumed(history)).step
                return self._recover_forward(trail, current)
            if sha == trail.old_sha256:
                return self._recover_previous(trail, history, current)
            return trail.record(
                ApplyStep.UNRESOLVED,
                f"{self.path} holds neither the previous nor the new configuration "
                f"(sha256 {sha[:12]}): it changed outside this apply; check it",
            )

    def _recover_forward(self, trail: ApplyTrail, current: bytes) -> ApplyStep:
        """The new file is in place: make sure the RM runs it, else roll back."""
        desired = parse_scheduler_document(current, str(self.path)).config
        old = self._previous_config(trail)
        status = self.rm.scheduler()
        reports_new = not mismatches(desired, status)
        if reports_new and old is not None and mismatches(old, status):
            return trail.record(ApplyStep.VERIFIED, "recovered: the RM runs the new configuration")
        return self._forward(trail, desired, {}).step

    def _previous_config(self, trail: ApplyTrail) -> SchedulerConfig | None:
        """The configuration the backup holds; None when the file was already in
        place or the backup is unusable (a rollback, if needed, then fails naming
        the reason)."""
        if trail.old_sha256 == trail.new_sha256:
            return None
        try:
            return parse_scheduler_document(self._backup_bytes(trail), trail.backup).config
        except (RollbackFailed, ConfigFileError):
            return None

    def _recover_previous(
        self, trail: ApplyTrail, history: ApplyHistory, current: bytes
    ) -> ApplyStep:
        """The previous file is in place: never written (nothing changed), or
        restored (the RM may still run the new one until it is activated)."""
        if not history.reached(ApplyStep.WRITTEN) and not history.reached(ApplyStep.ROLLING_BACK):
            return trail.record(
                ApplyStep.ABANDONED, "recovered: stopped before the file was written"
            )
        why = _resumed(history)
        if not history.reached(ApplyStep.ROLLING_BACK):
            trail.record(ApplyStep.ROLLING_BACK, why)
        if not history.reached(ApplyStep.RESTORED):
            trail.record(ApplyStep.RESTORED)
        try:
            old = parse_scheduler_document(current, str(self.path)).config
            self._confirm(trail, old)
        except (RollbackFailed, ConfigFileError) as exc:
            return trail.record(ApplyStep.UNRESOLVED, f"{why}; {exc.one_line()}")
        return trail.record(ApplyStep.ROLLED_BACK, why)

    # ------------------------------------------------------------------ helpers

    def _trail(self, apply_id: str, old_sha: str, new_sha: str) -> ApplyTrail:
        return ApplyTrail(
            self.journal,
            apply_id,
            self.name,
            str(self.path),
            old_sha256=old_sha,
            new_sha256=new_sha,
        )

    def _problems(self, desired: SchedulerConfig) -> list[str]:
        try:
            return mismatches(desired, self.rm.scheduler())
        except YarnError as exc:
            return [f"cannot read /scheduler: {exc.one_line()}"]

    def _wait_for(self, desired: SchedulerConfig) -> list[str]:
        _, problems = poll_until(lambda: self._problems(desired), _is_empty, self.settings.verify)
        return problems


def _resumed(history: ApplyHistory) -> str:
    why = history.rollback_reason
    return f"recovered: {why}" if why else "recovered: the file holds the previous configuration"


def _sha_of(path: Path) -> str:
    try:
        return sha256_bytes(path.read_bytes())
    except OSError:
        return ""


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
