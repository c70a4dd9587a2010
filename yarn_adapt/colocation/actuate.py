"""Acting on the RM: each node's total as the scheduler sees it, and putting it back.

:class:`RmNodeTotals` sets a node's total with ``POST /ws/v1/cluster/nodes/{id}/resource``
through :class:`~yarn_adapt.yarn.apply.node_resource.NodeResourceApplier`, with an
overcommit timeout of -1 so the RM never preempts a running container because the
total went below what runs there (the node simply gets nothing new until it drains).
The guard kills nothing itself; whether a node agent ever kills is the agent's own
``[yarn] kill`` setting. For every change, in this order: validate the target (never
negative, never above the node's capacity, never a zero total of a node that has
capacity), journal the node's original total and the intention
(:mod:`~yarn_adapt.colocation.originals`), POST, poll ``/nodes/{id}`` until the total
is confirmed (or put the previous one back), record the confirmed total. Each call
returns an :class:`ActOutcome` -- a refusal, a node that vanished, a lock held
elsewhere are outcomes with a clear status, never a crash of the round.

:meth:`RmNodeTotals.follow` keeps the journal true to the nodes as the RM lists them
(:mod:`~yarn_adapt.colocation.follow`): before each round, and before every restore.
:meth:`RmNodeTotals.restore_all` gives every journalled node its original total
back: at stop, when the guard is disabled, and from ``yarn-adapt recover``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from yarn_adapt.colocation.follow import Followed, JournalChange, follow_nodes, words
from yarn_adapt.colocation.mirror import DynamicResourcesMirror, journalled_mirror
from yarn_adapt.colocation.model import GuardPlan, NodeDecision
from yarn_adapt.colocation.originals import NodeOriginal, OriginalTotals
from yarn_adapt.errors import (
    ApplyError,
    ApplyInProgress,
    RollbackFailed,
    YarnAdaptError,
    YarnError,
    YarnHTTPError,
)
from yarn_adapt.model import ClusterInfo, Node, NodeState, Resources
from yarn_adapt.yarn.apply import ApplySettings, MemoryJournal, PollSettings
from yarn_adapt.yarn.apply.node_resource import (
    NodeResourceApplier,
    NodeResourceRm,
    NodeResourceTarget,
)
from yarn_adapt.yarn.rm import ResourceManagerClient

log = logging.getLogger(__name__)

NEVER_PREEMPT = -1


class Result(StrEnum):
    DONE = "done"  # the RM confirms the new total
    UNCHANGED = "unchanged"  # nothing to do
    REFUSED = "refused"  # the RM refused; the node keeps its previous total
    NOT_CONFIRMED = "not-confirmed"  # never confirmed; the previous total was put back
    GONE = "gone"  # the RM no longer knows the node
    BUSY = "busy"  # another apply holds the lock; next round
    LEFT_ALONE = "left-alone"  # someone else changed the total since
    FAILED = "failed"  # could not even put the previous total back


@dataclass(frozen=True)
class ActOutcome:
    node_id: str
    result: Result
    status: str
    total: Resources | None = None  # what the node has now, when known

    @property
    def ok(self) -> bool:
        return self.result in (Result.DONE, Result.UNCHANGED)


class Actuator(Protocol):
    """What the guard acts through: the RM's node totals, or a batch queue's cap."""

    def journalled(self) -> dict[str, NodeOriginal]:
        """Nodes whose original total is journalled (their real capacity)."""
        ...

    def follow(self, nodes: Sequence[Node]) -> list[JournalChange]:
        """Drop what the nodes the RM lists show to be no longer the guard's; push again
        what YARN forgot (a ``FORGOTTEN`` change's ``total`` is what the node has now)."""
        ...

    def act(self, plan: GuardPlan) -> dict[str, ActOutcome]:
        """Carry out the plan's changes; an outcome per node acted on."""
        ...

    def restore_all(self) -> list[ActOutcome]:
        """Everything the guard changed back as it was."""
        ...

    def pending_nodes(self) -> list[str]:
        """What is not (known to be) back as it was."""
        ...


class NodeTotalsRm(NodeResourceRm, Protocol):
    """What :class:`RmNodeTotals` needs of an RM: the REST client, or the demo's
    simulated RM (``yarn_adapt.service.demo.simcoloc``)."""

    def nodes(self, *, states: Iterable[NodeState | str] = ()) -> tuple[Node, ...]: ...

    def cluster_info(self) -> ClusterInfo: ...


class RmNodeTotals:
    def __init__(
        self,
        rm: NodeTotalsRm,
        state_dir: Path,
        *,
        verify: PollSettings | None = None,
        mirror: DynamicResourcesMirror | None = None,
    ) -> None:
        self.rm = rm
        self.originals = OriginalTotals(state_dir / "guard")
        self.mirror = mirror
        self._rm_started_ms: int | None = None
        self.apply_settings = ApplySettings(
            state_dir=state_dir / "guard",
            verify=verify or PollSettings(timeout_s=20.0, interval_s=0.2),
        )

    def journalled(self) -> dict[str, NodeOriginal]:
        return self.originals.load()

    def follow(self, nodes: Sequence[Node], *, repush: bool = True) -> list[JournalChange]:
        """The journal follows the nodes the RM lists (:mod:`.follow`): entries no longer
        the guard's go; a node YARN gave its registered total back is pushed to the
        guard's total again at once (``repush``; on restore it is simply whole, and its
        entry goes). A new ResourceManager (restart, fail-over) is said first."""
        with self.originals.editing() as entries:
            kept = dict(entries)
            changes = follow_nodes(entries, nodes)
            for change in changes:
                if change.followed is not Followed.FORGOTTEN or not repush:
                    del entries[change.node_id]
        followed = [*self._new_rm(bool(kept))]
        for change in changes:
            if change.followed is Followed.FORGOTTEN:
                change = self._pushed_again(change, kept[change.node_id], repush=repush)
            followed.append(change)
        for change in followed:
            level = logging.INFO if change.followed is Followed.WHOLE else logging.WARNING
            log.log(level, "guard journal: node %s %s: %s", change.node_id, change.followed,
                    change.detail)  # fmt: skip
        self.sync_mirror()
        return followed

    def _pushed_again(
        self, change: JournalChange, entry: NodeOriginal, *, repush: bool
    ) -> JournalChange:
        assert entry.last_set is not None
        if not repush:  # giving nodes back: YARN already did
            return replace(change, followed=Followed.WHOLE)
        self.originals.intend(entry.node_id, entry.original, entry.last_set)
        outcome = self._set(entry.node_id, entry.last_set, entry.original)
        detail = f"{change.detail}; pushed again: {outcome.result}: {outcome.status}"
        return replace(change, detail=detail, total=outcome.total or entry.original)

    def _new_rm(self, watching: bool) -> list[JournalChange]:
        """A record when the RM answering is not the one of the last look (its start
        time changed): a restart or a fail-over, which the audit log should show
        beside what it did to the guard's totals. Read only while nodes are journalled."""
        if not watching:
            return []
        try:
            info = self.rm.cluster_info()
        except YarnError:
            return []  # the node reads say what is wrong
        seen, self._rm_started_ms = self._rm_started_ms, info.started_ms
        if seen is None or seen == info.started_ms:
            return []
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.started_ms / 1000))
        detail = (
            f"the RM answering now started at {started} ({info.ha_state}), not the one "
            "that took the guard's totals; each journalled node is checked below"
        )
        return [JournalChange("", Followed.RM_RESTARTED, detail)]

    def act(self, plan: GuardPlan) -> dict[str, ActOutcome]:
        outcomes = {d.node_id: self.apply(d) for d in plan.decisions if d.changes}
        self.sync_mirror()
        return outcomes

    def sync_mirror(self) -> None:
        """``dynamic-resources.xml`` says the totals the guard holds now (if mirrored);
        a file that cannot be written is logged: the RM's totals are what count."""
        if self.mirror is None:
            return
        held = {n: e.last_set for n, e in self.originals.load().items() if e.last_set is not None}
        try:
            if self.mirror.sync(held):
                log.info("guard: %s now lists %d node(s)", self.mirror.path, len(held))
        except (OSError, YarnAdaptError) as exc:
            message = exc.one_line() if isinstance(exc, YarnAdaptError) else str(exc)
            log.warning("guard: cannot mirror into %s: %s", self.mirror.path, message)

    # ------------------------------------------------------------------ one node

    def apply(self, decision: NodeDecision) -> ActOutcome:
        node_id, target = decision.node_id, decision.target
        if not decision.changes:
            return ActOutcome(node_id, Result.UNCHANGED, "unchanged", decision.current)
        problem = _invalid(target, decision.capacity)
        if problem:
            return ActOutcome(node_id, Result.REFUSED, f"not sent: {problem}", decision.current)
        self._know_the_rm()
        self.originals.intend(node_id, decision.current, target)
        return self._set(node_id, target, decision.current)

    def _know_the_rm(self) -> None:
        """The start time of the RM that takes the guard's first total, so that the
        next look can tell a restart or a fail-over from it (read once)."""
        if self._rm_started_ms is not None:
            return
        try:
            self._rm_started_ms = self.rm.cluster_info().started_ms
        except YarnError:
            return  # the push says what is wrong

    def _set(self, node_id: str, target: Resources, previous: Resources) -> ActOutcome:
        applier = NodeResourceApplier(self.rm, self.apply_settings, MemoryJournal())
        try:
            applier.apply(NodeResourceTarget(node_id, target, NEVER_PREEMPT))
        except ApplyInProgress as exc:
            self.originals.abandoned(node_id)
            return ActOutcome(node_id, Result.BUSY, exc.one_line(), previous)
        except YarnHTTPError as exc:
            return self._refused(node_id, exc, previous)
        except YarnError as exc:
            self.originals.abandoned(node_id)
            return ActOutcome(node_id, Result.REFUSED, f"RM unreachable: {exc.one_line()}")
        except RollbackFailed as exc:  # the journal keeps the intention: restore retries
            return ActOutcome(node_id, Result.FAILED, exc.one_line())
        except ApplyError as exc:  # not confirmed: the applier put the previous one back
            self.originals.abandoned(node_id)
            return ActOutcome(node_id, Result.NOT_CONFIRMED, exc.one_line(), previous)
        self.originals.confirmed(node_id, target)
        return ActOutcome(node_id, Result.DONE, f"set to {words(target)}", target)

    def _refused(self, node_id: str, exc: YarnHTTPError, previous: Resources) -> ActOutcome:
        if exc.status == 404:
            return ActOutcome(
                node_id, Result.GONE, f"the RM no longer knows the node ({exc.status})"
            )
        self.originals.abandoned(node_id)
        return ActOutcome(node_id, Result.REFUSED, f"the RM refused: {exc.one_line()}", previous)

    # ------------------------------------------------------------------ restore

    def pending_nodes(self) -> list[str]:
        return sorted(self.originals.load())

    def restore_all(self) -> list[ActOutcome]:
        """Every journalled node back to its original total (those still at a total
        the guard set), after following the nodes the RM lists (when it answers);
        the journal keeps a node it could not restore."""
        followed = [_followed(change) for change in self._follow_listed()]
        restored = [self.restore(entry) for entry in self.originals.load().values()]
        self.sync_mirror()
        return followed + restored

    def _follow_listed(self) -> list[JournalChange]:
        if not self.originals.load():
            return []
        try:
            nodes = self.rm.nodes()
        except YarnError as exc:  # each restore then says what it cannot read
            log.warning("guard restore: cannot list the nodes: %s", exc.one_line())
            return []
        return self.follow(nodes, repush=False)

    def restore(self, entry: NodeOriginal) -> ActOutcome:
        node_id = entry.node_id
        try:
            current = self.rm.node(node_id).total
        except YarnHTTPError as exc:
            if exc.status == 404:
                return ActOutcome(node_id, Result.GONE, "not known to the RM now; kept in the "
                                  "journal until it re-registers")  # fmt: skip
            return ActOutcome(node_id, Result.FAILED, f"cannot read the node: {exc.one_line()}")
        except YarnError as exc:
            return ActOutcome(node_id, Result.FAILED, f"cannot read the node: {exc.one_line()}")
        if current == entry.original:
            self.originals.forget(node_id)
            return ActOutcome(node_id, Result.UNCHANGED, "already at its original total", current)
        if not entry.set_by_guard(current):
            self.originals.forget(node_id)
            why = (f"its total {words(current)} was set outside the guard (it had set "
                   f"{words(entry.last_set or entry.intended or current)}): that is its "
                   f"capacity now; left alone (journalled original "
                   f"{words(entry.original)})")  # fmt: skip
            log.warning("node %s: %s", node_id, why)
            return ActOutcome(node_id, Result.LEFT_ALONE, why, current)
        self.originals.intend(node_id, current, entry.original)
        outcome = self._set(node_id, entry.original, current)
        if outcome.result is Result.DONE:
            return ActOutcome(node_id, Result.DONE, f"restored {words(entry.original)}",
                              entry.original)  # fmt: skip
        return outcome


def _invalid(target: Resources, capacity: Resources) -> str:
    if target.memory_mb < 0 or target.vcores < 0:
        return f"negative total {words(target)}"
    if not target.fits_in(capacity):
        return f"{words(target)} exceeds the node's capacity {words(capacity)}"
    if (target.memory_mb == 0 < capacity.memory_mb) or (target.vcores == 0 < capacity.vcores):
        return f"{words(target)} would empty the node (capacity {words(capacity)})"
    return ""


def _followed(change: JournalChange) -> ActOutcome:
    """A journal entry dropped before restoring, as the outcome ``recover`` prints."""
    if change.followed is Followed.WHOLE:
        return ActOutcome(change.node_id, Result.UNCHANGED, change.detail, change.total)
    return ActOutcome(change.node_id, Result.LEFT_ALONE, f"{change.followed}: {change.detail}",
                      change.total)  # fmt: skip


def restore_journalled(rm: ResourceManagerClient, state_dir: Path) -> list[ActOutcome]:
    """``yarn-adapt recover``: every journalled node back to its original total, and
    the operator's ``dynamic-resources.xml`` back once no node is held."""
    actuator = RmNodeTotals(rm, state_dir, mirror=journalled_mirror(state_dir / "guard"))
    if not actuator.pending_nodes():
        actuator.sync_mirror()
        return []
    return actuator.restore_all()
