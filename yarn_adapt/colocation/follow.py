"""Capacity follows the node (pure): what the originals journal should do about each
entry, given the nodes the RM lists now.

The journal (:mod:`~yarn_adapt.colocation.originals`) holds, per node the guard
changed, its total before (``original``) and the totals the guard set or is about to
set. For a node the RM lists, its total now is

- its original, while the guard had set another total and had no change in flight:
  **YARN forgot** the guard's total (a NodeManager that restarted registers with the
  total it is configured with; ``updateNodeResource`` is never written to a state
  store) -- the entry stays, and the guard pushes its total again at once. An operator
  who wants a node whole switches the guard off (it gives every node back); an
  ``updateNodeResource`` to the original while the guard is in ``auto`` is taken as
  the same forgetting;
- its original otherwise: it is whole again (given back) -- the entry goes;
- one the guard set (:meth:`~yarn_adapt.colocation.originals.NodeOriginal.set_by_guard`):
  the guard's change stands -- the entry stays;
- anything else: someone else set it -- an operator's own update, the NodeManager
  re-registering smaller or larger, an RM restart -- and that total is the node's
  capacity now. The entry goes, so the next decision starts from the node as it is
  and the guard journals the new total as the original before it changes the node
  again; nothing ever "restores" the node to a size it no longer registers with.

A node the RM does not list keeps its entry (it may come back under the same id) --
unless the RM lists a node on the same host that the journal does not know: the
NodeManager came back on a new port, hence under a new node id, with the total it
registered with; the old id can never be restored, and its entry goes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from yarn_adapt.colocation.originals import NodeOriginal
from yarn_adapt.model import Node, Resources


class Followed(StrEnum):
    WHOLE = "whole again"
    OUTSIDE = "changed outside the guard"
    NEW_ID = "back under a new node id"
    FORGOTTEN = "YARN forgot the guard's total"
    RM_RESTARTED = "the ResourceManager restarted or failed over"


@dataclass(frozen=True)
class JournalChange:
    """What happened to one entry, and why (for the audit log): the journal drops it,
    or (``FORGOTTEN``) keeps it while the guard pushes its total again; a
    ``RM_RESTARTED`` record names no node: it says the RM is a new one."""

    node_id: str
    followed: Followed
    detail: str
    total: Resources | None = None  # what the node (or its new id) has now


def follow_nodes(
    entries: Mapping[str, NodeOriginal], nodes: Sequence[Node]
) -> tuple[JournalChange, ...]:
    """The entries to drop, in node order."""
    listed = {node.id: node for node in nodes}
    changes = []
    for node_id, entry in sorted(entries.items()):
        node = listed.get(node_id)
        change = _listed(entry, node) if node is not None else _unlisted(entry, nodes, entries)
        if change is not None:
            changes.append(change)
    return tuple(changes)


def _listed(entry: NodeOriginal, node: Node) -> JournalChange | None:
    total = node.total
    if total == entry.original and forgotten(entry):
        assert entry.last_set is not None
        detail = (
            f"it reports its registered total {words(total)} again, not the "
            f"{words(entry.last_set)} the guard set"
        )
        return JournalChange(entry.node_id, Followed.FORGOTTEN, detail, total)
    if total == entry.original:
        return JournalChange(entry.node_id, Followed.WHOLE,
                             f"back at its original total {words(total)}", total)  # fmt: skip
    if entry.set_by_guard(total):
        return None
    guard_set = entry.last_set or entry.intended or entry.original
    detail = (
        f"total {words(total)} was set outside the guard (it had set {words(guard_set)}): "
        f"that is its capacity now, not the journalled original {words(entry.original)}"
    )
    return JournalChange(entry.node_id, Followed.OUTSIDE, detail, total)


def forgotten(entry: NodeOriginal) -> bool:
    """The guard had set a total other than the original, and nothing is in flight:
    a node at its original again has been given it back by YARN, not by the guard."""
    return entry.intended is None and entry.last_set not in (None, entry.original)


def _unlisted(
    entry: NodeOriginal, nodes: Sequence[Node], entries: Mapping[str, NodeOriginal]
) -> JournalChange | None:
    host = host_of(entry.node_id)
    newer = [n for n in nodes if host_of(n.id) == host and n.id not in entries]
    if not host or not newer:
        return None
    successor = min(newer, key=lambda n: n.id)
    detail = (
        f"the RM no longer lists it and lists {successor.id} on the same host, registered "
        f"with {words(successor.total)}: the NodeManager came back under a new id; its "
        f"original {words(entry.original)} can no longer be restored"
    )
    return JournalChange(entry.node_id, Followed.NEW_ID, detail, successor.total)


def host_of(node_id: str) -> str:
    """``host`` of a ``host:port`` node id."""
    return node_id.rsplit(":", 1)[0] if ":" in node_id else ""


def words(resources: Resources) -> str:
    return f"{resources.memory_mb} MB / {resources.vcores} vcores"
