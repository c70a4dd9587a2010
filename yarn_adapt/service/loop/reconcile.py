"""Reconciliation: finish or undo the applies a crash (or an error) interrupted.

Two records can be left open: the appliers' journal (an apply that did not reach a
final step) and the service's ``applies`` row with its proposal in ``applying`` /
``rolling-back``. The journal is settled first, by the applier's own ``recover()``
from the apply's whole history -- it compares the target and the RM with both
configurations, then finishes the apply or rolls it back, refresh and verification
included -- and then each open ``applies`` row records what its journal's final step
says runs now (see :func:`~yarn_adapt.service.loop.desk.settle`).

Applies running in this process (``busy``) are never touched; one held by another
process (its lock) is left for a later pass.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from yarn_adapt.errors import ApplyInProgress, YarnAdaptError, YarnError
from yarn_adapt.service.backend import ClusterBackend
from yarn_adapt.service.loop.desk import settle
from yarn_adapt.service.state.statemachine import Action
from yarn_adapt.service.state.store import SqliteJournal, Store
from yarn_adapt.yarn.apply import ApplyHistory, interrupted

log = logging.getLogger(__name__)
ACTOR = "reconcile"


def reconcile(store: Store, backend: ClusterBackend, busy: Collection[str] = ()) -> list[str]:
    """Settle every interrupted apply except ``busy`` ones; returns what was done,
    one line each. A YarnError (the RM is down) propagates: the caller tries again
    later."""
    journal = SqliteJournal(store)
    done: list[str] = []
    for history in interrupted(journal):
        if history.apply_id in busy:
            continue
        line = _recover(history, backend, journal)
        if line:
            done.append(line)
    for record in store.unfinished_applies():
        if record.apply_id not in busy:
            done.append(_close(store, record.apply_id, rollback=record.kind == "rollback"))
    for line in done:
        log.warning("reconciled %s", line)
        store.audit(ACTOR, "reconcile", None, line)
    return done


def needs_reconcile(store: Store, busy: Collection[str] = ()) -> bool:
    """Whether an apply outside ``busy`` is still open (cheap: two queries)."""
    if any(apply_id not in busy for apply_id in store.unfinished_journal_applies()):
        return True
    return any(record.apply_id not in busy for record in store.unfinished_applies())


def _recover(history: ApplyHistory, backend: ClusterBackend, journal: SqliteJournal) -> str:
    try:
        step = backend.recover(history, journal)
    except ApplyInProgress as exc:
        log.warning("apply %s: %s; left for later", history.apply_id, exc.one_line())
        return ""
    except YarnError:
        raise  # the RM cannot be read: the whole pass is tried again later
    except YarnAdaptError as exc:
        log.error("apply %s cannot be recovered yet: %s", history.apply_id, exc.one_line())
        return f"apply {history.apply_id}: cannot be recovered yet: {exc.one_line()}"
    last = journal.store.journal_entries(history.apply_id)[-1]
    detail = f" ({last.detail})" if last.detail else ""
    return f"apply {history.apply_id} (interrupted after {history.last.step}): {step}{detail}"


def _close(store: Store, apply_id: str, *, rollback: bool) -> str:
    entries = store.journal_entries(apply_id)
    if not entries:
        action = Action.ROLLBACK_REFUSED if rollback else Action.APPLY_NOT_STARTED
        why = "interrupted before the applier started; nothing was changed"
        proposal = store.end_apply(apply_id, "not-started", why, action, ACTOR)
        return f"{apply_id}: {why} (proposal {proposal.id} is {proposal.state})"
    step = entries[-1].step
    if not step.is_final:
        return f"{apply_id}: still unsettled after {step}"
    proposal = settle(store, apply_id, step, ACTOR, rollback=rollback)
    return f"{apply_id}: journal says {step} (proposal {proposal.id} is {proposal.state})"
