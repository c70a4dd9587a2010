"""Set a node's total resource as the scheduler sees it (``POST /nodes/{id}/resource``)
and confirm it through ``/nodes/{id}``: the path batch-visibility throttling uses.

The RM answers the POST with the total it read *before* applying the update
(RMWebServices.updateNodeResource), so only polling the node confirms it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from yarn_adapt.errors import ApplyNotVerified, RollbackFailed, YarnError
from yarn_adapt.model import Node, Resources
from yarn_adapt.yarn.apply.base import (
    ApplyOutcome,
    ApplyPlan,
    ApplyResult,
    ApplySettings,
    new_apply_id,
)
from yarn_adapt.yarn.apply.journal import ApplyJournal, ApplyStep, JournalEntry
from yarn_adapt.yarn.apply.polling import poll_until
from yarn_adapt.yarn.confxml import ChangeKind, ConfigChange

NAME = "node resource"


class NodeResourceRm(Protocol):
    """What setting a node's total needs of an RM: the REST client
    (:class:`~yarn_adapt.yarn.rm.ResourceManagerClient`) or the demo's simulated RM."""

    def node(self, node_id: str) -> Node: ...

    def update_node_resource(
        self, node_id: str, resources: Resources, *, overcommit_timeout_ms: int = -1
    ) -> Resources: ...


@dataclass(frozen=True)
class NodeResourceTarget:
    node_id: str
    total: Resources
    overcommit_timeout_ms: int = -1


class NodeResourceApplier:
    def __init__(
        self,
        rm: NodeResourceRm,
        settings: ApplySettings,
        journal: ApplyJournal | None = None,
    ) -> None:
        self.rm = rm
        self.settings = settings
        self.journal = journal or settings.default_journal()

    def plan(self, desired: NodeResourceTarget) -> ApplyPlan:
        current = self.rm.node(desired.node_id).total
        changes = (
            ()
            if current == desired.total
            else (
                ConfigChange(
                    ChangeKind.CHANGED,
                    desired.node_id,
                    "totalResource",
                    str(current),
                    str(desired.total),
                ),
            )
        )
        steps = (
            f"POST /nodes/{desired.node_id}/resource {desired.total}",
            f"poll /nodes/{desired.node_id} until totalResource is {desired.total}",
            "on timeout: POST the previous total back",
        )
        return ApplyPlan(NAME, desired.node_id, changes, steps)

    def apply(self, desired: NodeResourceTarget, *, apply_id: str | None = None) -> ApplyOutcome:
        apply_id = apply_id or new_apply_id()
        with self.settings.lock:
            previous = self.rm.node(desired.node_id).total
            plan = self.plan(desired)
            if plan.is_empty:
                self._record(apply_id, desired.node_id, ApplyStep.NOTHING_TO_DO)
                return ApplyOutcome(apply_id, ApplyResult.ALREADY_APPLIED, plan)
            self._record(
                apply_id, desired.node_id, ApplyStep.PLANNED, f"{previous} -> {desired.total}"
            )
            self.rm.update_node_resource(
                desired.node_id, desired.total, overcommit_timeout_ms=desired.overcommit_timeout_ms
            )
            self._record(apply_id, desired.node_id, ApplyStep.ACTIVATED)
            if self._reaches(desired.node_id, desired.total):
                self._record(apply_id, desired.node_id, ApplyStep.VERIFIED)
                return ApplyOutcome(apply_id, ApplyResult.APPLIED, plan)
            self._restore(apply_id, desired, previous)
            raise ApplyNotVerified(
                f"node {desired.node_id}: totalResource did not become {desired.total}; "
                f"restored {previous}"
            )

    def _restore(self, apply_id: str, desired: NodeResourceTarget, previous: Resources) -> None:
        try:
            self.rm.update_node_resource(desired.node_id, previous)
        except YarnError as exc:
            self._record(apply_id, desired.node_id, ApplyStep.FAILED, exc.one_line())
            raise RollbackFailed(
                f"node {desired.node_id}: cannot restore {previous}: {exc.one_line()}"
            ) from exc
        self._record(apply_id, desired.node_id, ApplyStep.ROLLED_BACK)

    def _reaches(self, node_id: str, total: Resources) -> bool:
        reached, _ = poll_until(
            lambda: self._total(node_id), lambda seen: seen == total, self.settings.verify
        )
        return reached

    def _total(self, node_id: str) -> Resources | None:
        try:
            return self.rm.node(node_id).total
        except YarnError:
            return None

    def _record(self, apply_id: str, node_id: str, step: ApplyStep, detail: str = "") -> None:
        self.journal.record(
            JournalEntry(apply_id=apply_id, step=step, applier=NAME, target=node_id, detail=detail)
        )
