"""Seams of the simulator for the parts that come later.

* :class:`NodeCapacityProvider` -- how much of each node batch work may use, over
  time. The co-location guard shrinks this on risky nodes; shrinking below what is
  in use kills nothing, the node just gets no new batch containers until it drains.
* :class:`PlacementPolicy` -- which node a granted container goes to. YARN places on
  the node whose heartbeat triggered the grant; a sampling placer (Tarcil) may pick
  another node that fits, or decline (the grant waits for a later heartbeat).
* :class:`LongRunningWorkload` -- latency-critical long-running containers (LRAs)
  beside batch. They take their node's resources at their start; if the node is
  short they wait there, and batch gets nothing on that node until they fit.

Each has a default that changes nothing: full node capacity, the heartbeating
node, no LRAs.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from yarn_adapt.model.resources import Resources


@dataclass(frozen=True)
class CapacityChange:
    """From ``time_s`` on, batch may use ``visible`` on ``node_id``."""

    time_s: float
    node_id: str
    visible: Resources


@runtime_checkable
class NodeCapacityProvider(Protocol):
    def initial_capacity(self, node_id: str, total: Resources) -> Resources:
        """What batch may use on the node when the simulation starts."""
        ...

    def capacity_changes(self) -> Iterable[CapacityChange]:
        """Later changes, in any order."""
        ...


class StaticNodeCapacity:
    """Batch sees every node whole, always."""

    def initial_capacity(self, node_id: str, total: Resources) -> Resources:
        return total

    def capacity_changes(self) -> Iterable[CapacityChange]:
        return ()


@dataclass(frozen=True)
class ScheduledNodeCapacity:
    """A fixed plan: optional starting capacities per node, then timed changes."""

    initial: tuple[tuple[str, Resources], ...] = ()
    changes: tuple[CapacityChange, ...] = ()

    def initial_capacity(self, node_id: str, total: Resources) -> Resources:
        return dict(self.initial).get(node_id, total)

    def capacity_changes(self) -> Iterable[CapacityChange]:
        return self.changes


@dataclass(frozen=True)
class PlacementRequest:
    """A container the scheduler has granted and that now needs a node."""

    job_id: str
    queue: str
    resources: Resources
    is_am: bool


class ClusterView(Protocol):
    """Read-only view of the nodes for a placement policy."""

    @property
    def node_ids(self) -> Sequence[str]: ...

    def free(self, node_id: str) -> Resources:
        """Resources batch may still take on the node now."""
        ...

    def fits(self, node_id: str, resources: Resources) -> bool: ...


@runtime_checkable
class PlacementPolicy(Protocol):
    def choose_node(
        self,
        request: PlacementRequest,
        heartbeat_node: str,
        cluster: ClusterView,
        rng: random.Random,
    ) -> str | None:
        """The node for the container (one where it fits), or ``None`` to decline
        now; the scheduler then tries again at a later heartbeat."""
        ...


class HeartbeatNodePlacement:
    """YARN's own behaviour: the container goes to the node that heartbeated."""

    def choose_node(
        self,
        request: PlacementRequest,
        heartbeat_node: str,
        cluster: ClusterView,
        rng: random.Random,
    ) -> str | None:
        return heartbeat_node


@dataclass(frozen=True)
class LongRunningContainer:
    """A latency-critical service container on ``node_id`` from ``start_s`` until
    ``end_s`` (``None``: until the simulation ends)."""

    id: str
    node_id: str
    resources: Resources
    start_s: float
    end_s: float | None = None


@runtime_checkable
class LongRunningWorkload(Protocol):
    def containers(self) -> Sequence[LongRunningContainer]: ...


@dataclass(frozen=True)
class FixedLongRunning:
    """A fixed list of LRA containers."""

    items: tuple[LongRunningContainer, ...] = ()

    def containers(self) -> Sequence[LongRunningContainer]:
        return self.items


NO_LONG_RUNNING = FixedLongRunning()
