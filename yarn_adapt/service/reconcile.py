"""Start-up reconciliation: finish or undo the applies a crash interrupted.

Two records can be left open by a crash: the appliers' journal (a file written but
its refresh never confirmed) and the service's ``applies`` row with its proposal in
``applying`` / ``rolling-back``. The journal is settled first, by the applier's own
``recover()`` -- it verifies against the RM, then finishes the apply or restores the
backup -- and then each open ``applies`` row follows what its journal says.
"""

from __future__ import annotations

import logging

from yarn_adapt.service.backend import ClusterBackend
from yarn_adapt.service.desk import settle
from yarn_adapt.service.statemachine import Action
from yarn_adapt.service.store import SqliteJournal, Store
from yarn_adapt.yarn.apply import unfinished

log = logging.getLogger(__name__)
ACTOR = "reconcile"


def reconcile(store: Store, backend: ClusterBackend) -> list[str]:
    """Settle every interrupted apply; returns what was done, one line each. A
    YarnError (the RM is down) propagates: the caller tries again later."""
    journal = SqliteJournal(store)
    done: list[str] = []
    for entry in unfinished(journal):
        step = backend.recover(entry, journal)
        done.append(f"apply {entry.apply_id} (interrupted after {entry.step}): {step}")
    for record in store.unfinished_applies():
        done.append(_close(store, record.apply_id, rollback=record.kind == "rollback"))
    for line in done:
        log.warning("reconciled %s", line)
        store.audit(ACTOR, "reconcile", None, line)
    return done


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
