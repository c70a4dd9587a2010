"""What the configurator plans on: each node's real capacity, never a total the
co-location guard lowered for a while.

The guard lowers a node's total on the RM (``updateNodeResource``) for as long as its
latency-critical services need protecting; the configurator tunes queues for hours
of jobs. Planning on a throttled total would size queues for a cluster that shrinks
and grows every few seconds, and every throttle would read as lost capacity. So the
tuner sees, per node:

- the node's real capacity: the original the guard journalled before changing it
  (``<state dir>/guard/originals.json``), when the RM still reports a total the guard
  set; otherwise what the RM reports (the node is the guard's no longer, or never was);
- minus what the guard reserves there for latency-critical services (their demand
  bound), so batch is planned on what it can count on;
- never below what the node's containers hold now (the tuner's simulator starts from
  them).

:class:`OnRealCapacity` puts this in front of any proposer: it rewrites the nodes of
the snapshot the proposer reads, and nothing else. The guard acts through node
totals and the tuner never tunes those, so the two controllers no longer fight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from yarn_adapt.colocation.originals import NodeOriginal, OriginalTotals
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    ClusterSnapshot,
    Node,
    Percentage,
    Resources,
    SchedulerConfig,
)
from yarn_adapt.service.backend import Observed
from yarn_adapt.service.proposers.seam import Proposer
from yarn_adapt.service.settings import Settings
from yarn_adapt.service.state.records import Suggestion
from yarn_adapt.yarn.schedconf.capacity_xml import MAXIMUM_CAPACITY
from yarn_adapt.yarn.schedconf.diff import ConfigChange

if TYPE_CHECKING:
    from yarn_adapt.colocation.guard import ColocationGuard

NOTHING = Resources(0, 0)

Reserved = Callable[[], Mapping[str, Resources]]
"""What the guard reserves for latency-critical services now, per node id."""


def no_reservation() -> Mapping[str, Resources]:
    return {}


def real_total(node: Node, journalled: NodeOriginal | None) -> Resources:
    """The node's capacity: its journalled original while it runs a total the guard
    set, else what the RM reports."""
    if journalled is not None and journalled.set_by_guard(node.total):
        return journalled.original
    return node.total


def planning_node(node: Node, journalled: NodeOriginal | None, reserved: Resources) -> Node:
    planned = (real_total(node, journalled) - reserved).clamped().component_max(node.used)
    return node if planned == node.total else replace(node, total=planned)


def planning_nodes(
    nodes: Sequence[Node],
    journalled: Mapping[str, NodeOriginal],
    reserved: Mapping[str, Resources],
) -> tuple[Node, ...]:
    """The nodes as the configurator plans on them (see the module docstring)."""
    return tuple(
        planning_node(node, journalled.get(node.id), reserved.get(node.id, NOTHING))
        for node in nodes
    )


def services_reserved(guard: ColocationGuard) -> Reserved:
    """What the guard's last cycle bounds the latency-critical services' demand at, per
    node (whole MB and vcores, rounded up): the part of a node the configurator must
    not count on for batch, however much the guard lets batch see this minute."""

    def reserved() -> Mapping[str, Resources]:
        return {
            node_id: Resources(math.ceil(a.demand.memory_mb), math.ceil(a.demand.vcores))
            for node_id, a in guard.allowances().items()
            if a.demand is not None and a.demand.usable
        }

    return reserved


@dataclass(frozen=True)
class GuardCapacity:
    """The guard's journal (read fresh each time: the guard's own loop writes it) and
    its reservations."""

    guard_dir: Path
    reserved: Reserved = no_reservation

    def nodes(self, nodes: Sequence[Node]) -> tuple[Node, ...]:
        return planning_nodes(nodes, OriginalTotals(self.guard_dir).load(), self.reserved())


class OnRealCapacity:
    """A proposer that plans on :class:`GuardCapacity`'s nodes instead of the RM's
    current totals; every other part of the observation is passed on as it is."""

    def __init__(self, inner: Proposer, capacity: GuardCapacity) -> None:
        self.inner = inner
        self.capacity = capacity

    def reserve_for(self, reserved: Reserved) -> None:
        """Plan on the capacity minus what ``reserved`` keeps for services."""
        self.capacity = replace(self.capacity, reserved=reserved)

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        return self.inner.propose(self._planned(observed), frozen)

    def _planned(self, observed: Observed) -> Observed:
        snapshot = observed.view
        if not isinstance(snapshot, ClusterSnapshot):
            return observed  # a simulated cluster: no guard changes its nodes
        nodes = self.capacity.nodes(snapshot.nodes)
        if nodes == tuple(snapshot.nodes):
            return observed
        return replace(observed, view=replace(snapshot, nodes=nodes))


# --------------------------------------------------------------------------- what the guard owns


@dataclass(frozen=True)
class GuardOwned:
    """The one scheduler setting the guard may own: with ``[colocation] actuator =
    "queue-cap"`` the batch queue's ``maximum-capacity`` (its cap follows the guard's
    plan every cycle). The configurator leaves it alone: a change of it is no reason
    to call a pending proposal stale, and applying (or rolling back) a proposal keeps
    the cap the guard set, instead of the one in force when the proposal was made.
    ``batch_queue`` None (the default actuator, node totals): the guard owns no
    scheduler setting."""

    batch_queue: str | None = None

    @classmethod
    def of(cls, settings: Settings) -> GuardOwned:
        section = settings.colocation
        owns = section.enabled and section.actuator == "queue-cap" and section.batch_queue
        return cls(section.batch_queue if owns else None)

    def owns(self, change: ConfigChange, config: SchedulerConfig) -> bool:
        path = self._path(config)
        return path is not None and (change.queue, change.prop) == (path, MAXIMUM_CAPACITY)

    def apart(self, changes: Sequence[ConfigChange], config: SchedulerConfig) -> list[ConfigChange]:
        """The changes that are the configurator's (those of the guard's setting left out)."""
        return [change for change in changes if not self.owns(change, config)]

    def rebased(self, config: SchedulerConfig, running: SchedulerConfig) -> SchedulerConfig:
        """``config`` with the guard's setting as it runs now (raised to the queue's
        capacity in ``config`` where it is below: YARN refuses a maximum under it)."""
        if not isinstance(config, CapacitySchedulerConfig):
            return config
        if not isinstance(running, CapacitySchedulerConfig):
            return config
        path = self._path(config)
        ours = config.find(path) if path else None
        theirs = running.find(path) if path else None
        if ours is None or theirs is None:
            return config
        maximum = theirs.maximum_capacity
        if isinstance(maximum, Percentage) and isinstance(ours.capacity, Percentage):
            maximum = Percentage(max(maximum.percent, ours.capacity.percent))
        return config.with_queue(replace(ours, maximum_capacity=maximum))

    def _path(self, config: SchedulerConfig) -> str | None:
        if self.batch_queue is None or not isinstance(config, CapacitySchedulerConfig):
            return None
        queue = config.find_leaf_by_name(self.batch_queue)
        return queue.path if queue is not None else None
