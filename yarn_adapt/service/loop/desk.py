"""Operator actions on proposals: approve, reject, apply, roll back.

Each action first moves the proposal through the state machine in one SQL
transaction (:meth:`Store.transition` / :meth:`Store.begin_apply`), then acts. Only
the caller that wins the transition acts, so approving or applying twice never
applies twice. Applies go through the backend's real applier, which journals every
step into the same database (:class:`~yarn_adapt.service.state.store.SqliteJournal`).

Every action names its actor (a named operator, the shared token, the service's
auto-approve) and may carry the operator's reason, kept in the audit log and with
the apply (:meth:`Store.transition`, :meth:`Store.begin_apply`).

The desk knows which applies are running in this process (:meth:`ProposalDesk.in_flight`):
a stopping service waits for them (:meth:`ProposalDesk.wait_idle`) before it closes
the database, and reconciliation never touches them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from yarn_adapt.errors import (
    ApplyNotVerified,
    ApplyRejected,
    ProposalStateError,
    RollbackFailed,
    YarnAdaptError,
    YarnError,
)
from yarn_adapt.model import SchedulerConfig
from yarn_adapt.service.backend import ClusterBackend
from yarn_adapt.service.metrics import ServiceMetrics
from yarn_adapt.service.proposers.planning import GuardOwned
from yarn_adapt.service.state.records import ProposalRecord, ProposalState
from yarn_adapt.service.state.statemachine import Action
from yarn_adapt.service.state.store import SqliteJournal, Store
from yarn_adapt.service.xmltext import parse_scheduler_text
from yarn_adapt.yarn.apply import ApplyHistory, ApplyJournal, ApplyStep, new_apply_id
from yarn_adapt.yarn.confxml import diff_configs

log = logging.getLogger(__name__)


class ProposalDesk:
    def __init__(
        self,
        store: Store,
        backend: ClusterBackend,
        metrics: ServiceMetrics,
        *,
        new_id: Callable[[], str] = new_apply_id,
        guard_owned: GuardOwned | None = None,
    ) -> None:
        self.store = store
        self.guard_owned = guard_owned or GuardOwned()
        self.backend = backend
        self.metrics = metrics
        self.journal: ApplyJournal = SqliteJournal(store)
        self._new_id = new_id
        self._running: set[str] = set()
        self._idle = threading.Condition()
        self._stopping = False

    # ------------------------------------------------------------------ actions

    def approve(self, proposal_id: int, actor: str, reason: str = "") -> ProposalRecord:
        """Approve and apply at once: an approval is the operator's consent to act."""
        self._refuse_when_stopping(proposal_id)
        self.store.transition(proposal_id, Action.APPROVE, actor, reason=reason)
        return self.apply(proposal_id, actor, reason)

    def reject(self, proposal_id: int, actor: str, reason: str = "") -> ProposalRecord:
        note = f"rejected by {actor}" + (f": {reason}" if reason else "")
        return self.store.transition(proposal_id, Action.REJECT, actor, note, reason=reason)

    def apply(self, proposal_id: int, actor: str, reason: str = "") -> ProposalRecord:
        """Apply an approved proposal (again, after an apply that could not start)."""
        self._refuse_when_stopping(proposal_id)
        proposal = self.store.proposal(proposal_id)
        apply_id = f"p{proposal_id}-{self._new_id()}"
        with self._tracked(apply_id):
            self.store.begin_apply(
                proposal_id, Action.BEGIN_APPLY, apply_id, actor, proposal.proposed_xml,
                reason=reason,
            )  # fmt: skip
            running = self._precheck(proposal)
            if isinstance(running, tuple):
                action, why = running
                return self._end(apply_id, "not-started", why, action, actor)
            desired = parse_scheduler_text(proposal.proposed_xml, proposal.target)
            desired = self.guard_owned.rebased(desired, running)
            return self._run(apply_id, desired, actor, rollback=False)

    def rollback(self, proposal_id: int, actor: str, reason: str = "") -> ProposalRecord:
        """Make the RM run the configuration this proposal replaced. Only the
        proposal whose configuration runs now can be rolled back."""
        self._refuse_when_stopping(proposal_id)
        current = self.store.latest_applied()
        if current is None or current.id != proposal_id:
            state = self.store.proposal(proposal_id).state
            running = f"proposal {current.id}" if current else "no applied proposal"
            raise ProposalStateError(
                f"proposal {proposal_id} is {state}; only the configuration running now "
                f"({running}) can be rolled back"
            )
        apply_id = f"p{proposal_id}-rb-{self._new_id()}"
        with self._tracked(apply_id):
            self.store.begin_apply(
                proposal_id, Action.BEGIN_ROLLBACK, apply_id, actor, current.base_xml,
                reason=reason,
            )  # fmt: skip
            desired = parse_scheduler_text(current.base_xml, current.target)
            desired = self._keeping_the_guards(desired)
            return self._run(apply_id, desired, actor, rollback=True)

    # ------------------------------------------------------------------ in flight

    def in_flight(self) -> frozenset[str]:
        """The applies running in this process now."""
        with self._idle:
            return frozenset(self._running)

    def wait_idle(self, timeout_s: float) -> bool:
        """Refuse new actions, then wait until no apply runs (at most ``timeout_s``);
        whether none is left running."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            self._stopping = True
            while self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    @contextmanager
    def _tracked(self, apply_id: str) -> Iterator[None]:
        with self._idle:
            self._running.add(apply_id)
        try:
            yield
        finally:
            with self._idle:
                self._running.discard(apply_id)
                self._idle.notify_all()

    def _refuse_when_stopping(self, proposal_id: int) -> None:
        if self._stopping:
            raise ProposalStateError(
                f"proposal {proposal_id}: the service is stopping; nothing was done"
            )

    # ------------------------------------------------------------------ acting

    def _run(
        self, apply_id: str, desired: SchedulerConfig, actor: str, *, rollback: bool
    ) -> ProposalRecord:
        kind = "rollback" if rollback else "apply"
        try:
            outcome = self.backend.applier(self.journal).apply(desired, apply_id=apply_id)
        except RollbackFailed as exc:
            self.metrics.failure("rollback-failed")
            why = exc.one_line()
            return self._end(apply_id, "rollback-failed", why, Action.NEEDS_OPERATOR, actor)
        except (ApplyRejected, ApplyNotVerified) as exc:
            self.metrics.failure(f"{kind}-refused")
            refused = Action.ROLLBACK_REFUSED if rollback else Action.APPLY_REFUSED
            return self._end(apply_id, "refused", exc.one_line(), refused, actor)
        except YarnAdaptError as exc:
            self.metrics.failure(f"{kind}-error")
            return self._settle_from_journal(apply_id, exc.one_line(), actor, rollback=rollback)
        except Exception as exc:  # a bug: settle what the journal says, keep the traceback
            log.exception("apply %s failed unexpectedly", apply_id)
            self.metrics.failure(f"{kind}-error")
            why = f"unexpected {type(exc).__name__}: {exc}"
            return self._settle_from_journal(apply_id, why, actor, rollback=rollback)
        done = Action.ROLLBACK_SUCCEEDED if rollback else Action.APPLY_SUCCEEDED
        self.metrics.applied(kind)
        result = "rolled-back" if rollback else "applied"
        return self._end(apply_id, result, outcome.summary(), done, actor)

    def _settle_from_journal(
        self, apply_id: str, why: str, actor: str, *, rollback: bool
    ) -> ProposalRecord:
        """An error outside the applier's own refusals (the RM unreachable, the lock
        held, a file unreadable, a bug): if the applier journaled nothing, nothing
        was changed and the proposal goes back to where it was; otherwise the
        applier's recovery reads the target and the RM and says what is true -- as a
        restart would. If even the RM cannot be read, the apply stays open and the
        next round's reconciliation settles it."""
        entries = self.store.journal_entries(apply_id)
        if not entries:
            undone = Action.ROLLBACK_REFUSED if rollback else Action.APPLY_NOT_STARTED
            return self._end(apply_id, "not-started", why, undone, actor)
        history = ApplyHistory(tuple(entries))
        if history.is_finished:
            return settle(self.store, apply_id, history.last.step, actor, rollback=rollback)
        log.warning("apply %s stopped after %s (%s); recovering", apply_id, history.last.step, why)
        try:
            step = self.backend.recover(history, self.journal)
        except YarnError as exc:
            log.warning("apply %s left to reconcile: %s", apply_id, exc.one_line())
            return self.store.proposal_of_apply(apply_id)
        return settle(self.store, apply_id, step, actor, rollback=rollback)

    def _end(
        self, apply_id: str, result: str, detail: str, action: Action, actor: str
    ) -> ProposalRecord:
        record = self.store.end_apply(apply_id, result, detail, action, actor)
        self.store.keep_backup()
        return record

    def _precheck(self, proposal: ProposalRecord) -> SchedulerConfig | tuple[Action, str]:
        """The running configuration, or why the proposal cannot be applied now and
        where that leaves it: back to approved when the RM cannot be read, superseded
        when the running configuration is no longer the one it was computed against
        (a setting the guard owns may have moved: that is not the configurator's)."""
        try:
            running = self.backend.document().config
        except YarnAdaptError as exc:
            why = f"cannot read the running configuration: {exc.one_line()}"
            return Action.APPLY_NOT_STARTED, why
        base = parse_scheduler_text(proposal.base_xml, proposal.target)
        if type(running) is not type(base) or self.guard_owned.apart(
            diff_configs(base, running), base
        ):
            why = "the running configuration changed since this proposal was made"
            return Action.APPLY_STALE, why
        return running

    def _keeping_the_guards(self, desired: SchedulerConfig) -> SchedulerConfig:
        """``desired`` with the setting the guard owns as it runs now (unchanged
        when the running configuration cannot be read: the applier reads it too)."""
        if self.guard_owned.batch_queue is None:
            return desired
        try:
            running = self.backend.document().config
        except YarnAdaptError:
            return desired
        return self.guard_owned.rebased(desired, running)


def settle(
    store: Store, apply_id: str, step: ApplyStep, actor: str, *, rollback: bool
) -> ProposalRecord:
    """Close an apply whose journal reached ``step`` (a final step), recording what
    that step says runs now: the configuration asked for (applied, or rolled back for
    a rollback), the previous one (refused; back to approved when nothing was ever
    changed), or neither for sure (needs-operator)."""
    result, action = _outcome(step, rollback=rollback)
    return store.end_apply(apply_id, result, f"journal: {step}", action, actor)


def _outcome(step: ApplyStep, *, rollback: bool) -> tuple[str, Action]:
    if step.new_config_runs:
        if rollback:
            return "rolled-back", Action.ROLLBACK_SUCCEEDED
        return "applied", Action.APPLY_SUCCEEDED
    if step is ApplyStep.UNRESOLVED:
        return "rollback-failed", Action.NEEDS_OPERATOR
    if step is ApplyStep.ABANDONED:
        undone = Action.ROLLBACK_REFUSED if rollback else Action.APPLY_NOT_STARTED
        return "not-started", undone
    return "refused", Action.ROLLBACK_REFUSED if rollback else Action.APPLY_REFUSED


def is_settled(proposal: ProposalRecord) -> bool:
    return proposal.state not in (ProposalState.APPLYING, ProposalState.ROLLING_BACK)
