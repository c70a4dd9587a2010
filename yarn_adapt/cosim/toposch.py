"""TopoSch's batch scheduling intervention, Algorithm 1 (§4.2.2), pure.

One scheduling pass over the waiting batch containers:

1. Containers are taken by waiting time, longest first (Line 1).
2. ``N``: the nodes with enough *real* available resources for the container
   (Lines 2-3); the nodes where the container has data locality come first, the
   others keep the caller's (heartbeat) order.
3. Per node, the resources batch may see (Lines 4-10): zero when zero-violation is
   on and the node hosts a service whose application misses its QoS target;
   otherwise ``R_vis = R_real * (1 - clip(nu * R_n, 0, 1))``, or the visible amount
   the caller supplies (the co-location guard's decision, which already includes
   the risk reservation, learned demand and its safety steps).
4. The container goes to the first node whose visible resources cover it
   (Lines 11-12). If none does it waits for the next pass (``retry += 1``, Line 23)
   until it has waited ``max_retry_time`` passes; then (Lines 13-19) it is placed
   anyway: on a node it has locality to if one is in ``N``, else on the node of
   ``N`` with the lowest risk -- chosen by ``ToposchSettings.lowest_risk`` (a
   :class:`LowestRiskChooser`; default :func:`scan_lowest_risk`, every node of
   ``N`` ranked; the placement layer's Tarcil chooser samples instead:
   :func:`yarn_adapt.placement.guard_choice.lowest_risk_chooser`).

``nu = 0`` switches TopoSch off: every node shows all it has, and the pass is
YARN's own (the first node with room, local nodes first).

:func:`place_on_visible` is YARN's own pass over what the RM shows when something
else lowered it (the co-location guard's ``updateNodeResource``): the first node
whose visible free resources cover the container, else it waits. Lines 13-19 have
no counterpart there: YARN never places beyond what the RM sees, however long a
container waited (``schedule(..., placer=YARN)``).

:class:`Algorithm1Placement` is the same pass as a
:class:`~yarn_adapt.sim.hooks.PlacementPolicy` for the discrete-event engine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from yarn_adapt.errors import InputError
from yarn_adapt.model.resources import Resources
from yarn_adapt.sim.hooks import ClusterView, PlacementRequest


class LowestRiskChooser(Protocol):
    """Algorithm 1's "the node with the lowest risk" (Lines 17-18): one of
    ``candidates`` (never empty; heartbeat order, local nodes first) for
    ``container``."""

    def __call__(
        self, container: WaitingContainer, candidates: Sequence[NodeState]
    ) -> NodeState: ...


def scan_lowest_risk(container: WaitingContainer, candidates: Sequence[NodeState]) -> NodeState:
    """Every candidate ranked: the first of the lowest risk."""
    return min(candidates, key=lambda n: n.risk)


@dataclass(frozen=True)
class ToposchSettings:
    """``nu``: the reservation coefficient; ``max_retry_time``: passes a container
    may be held back before it is placed regardless; ``zero_violation``: the global
    flag of §4.2.2; ``lowest_risk``: how the lowest-risk node is chosen."""

    nu: float = 1.0
    max_retry_time: int = 1
    zero_violation: bool = False
    lowest_risk: LowestRiskChooser = scan_lowest_risk

    def __post_init__(self) -> None:
        if not (math.isfinite(self.nu) and self.nu >= 0):
            raise InputError(f"toposch: nu must be a number >= 0, got {self.nu!r}")
        if self.max_retry_time < 0:
            raise InputError(f"toposch: max_retry_time must be >= 0, got {self.max_retry_time}")


@dataclass(frozen=True)
class WaitingContainer:
    """A pending batch container: what it asks for, since when, how often it was
    held back, and the nodes it has data locality to (none: no requirement)."""

    id: str
    request: Resources
    waiting_since_s: float
    retry: int = 0
    local_nodes: tuple[str, ...] = ()

    def with_retry(self, retry: int) -> WaitingContainer:
        """The container held back ``retry`` times; built directly, not by
        ``dataclasses.replace``: a pass over a long queue makes one per container."""
        return WaitingContainer(self.id, self.request, self.waiting_since_s, retry,
                                self.local_nodes)  # fmt: skip


@dataclass(frozen=True)
class NodeState:
    """A node as one pass sees it. ``available``: real free resources for batch;
    ``risk``: R_n (normalised, eq. 8); ``visible``: the visible free resources when
    the guard decides them (then ``nu`` is not applied again)."""

    node_id: str
    available: Resources
    risk: float
    qos_violated: bool = False
    visible: Resources | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.risk) and 0.0 <= self.risk <= 1.0):
            raise InputError(f"toposch: node {self.node_id}: risk {self.risk!r} is not in [0, 1]")


@dataclass(frozen=True)
class Placement:
    container_id: str
    node_id: str
    reason: str  # "visible", "locality after retries", "lowest risk after retries"


@dataclass(frozen=True)
class SchedulePass:
    placements: tuple[Placement, ...]
    held: tuple[WaitingContainer, ...]  # still waiting, retry counted


def visible_available(node: NodeState, settings: ToposchSettings) -> Resources:
    """Lines 4-10: what batch may see of the node's free resources."""
    if settings.zero_violation and node.qos_violated:
        return Resources(0, 0)
    if node.visible is not None:
        return node.visible.component_min(node.available)
    keep = 1.0 - min(1.0, max(0.0, settings.nu * node.risk))
    return Resources(
        math.floor(node.available.memory_mb * keep), math.floor(node.available.vcores * keep)
    )


class PlaceOne(Protocol):
    """One container's placement on ``nodes`` (heartbeat order), or None (it waits)."""

    def __call__(
        self, container: WaitingContainer, nodes: Sequence[NodeState], settings: ToposchSettings
    ) -> Placement | None: ...


def schedule(
    queue: Sequence[WaitingContainer],
    nodes: Sequence[NodeState],
    settings: ToposchSettings,
    placer: Placer | None = None,
) -> SchedulePass:
    """One pass of Algorithm 1 (``placer``: :data:`ALGORITHM1`, or YARN's own
    :data:`YARN`) over ``queue``, longest waiting first; ``nodes`` in heartbeat order."""
    ordered = sorted(queue, key=lambda c: c.waiting_since_s)
    return place_in_order(ordered, nodes, settings, placer or ALGORITHM1)


def place_in_order(
    ordered: Iterable[WaitingContainer],
    nodes: Sequence[NodeState],
    settings: ToposchSettings,
    placer: Placer,
    floor: Resources | None = None,
) -> SchedulePass:
    """The pass over containers already in order (longest waiting first).

    A container whose request fits no node's room (the placer's) waits, and so does
    every later one asking at least as much, without a look at the nodes: rooms only
    shrink during a pass. With ``floor`` (no container asks less) the pass stops
    there once no node has room for ``floor``: every container not taken from
    ``ordered`` waits too, and is not in ``held`` (a caller passing ``floor`` counts
    their retries itself). A pass over a long queue on a full cluster then costs
    what it places, not what waits."""
    free = {n.node_id: n for n in nodes}
    placements: list[Placement] = []
    held: list[WaitingContainer] = []
    exhausted: list[Resources] = []  # requests no node had room for
    for container in ordered:
        request = container.request
        if _covered(request, exhausted):
            held.append(container.with_retry(container.retry + 1))  # Line 23
            continue
        in_order = [free[n.node_id] for n in nodes]
        placed = placer.place(container, in_order, settings)
        if placed is None:
            held.append(container.with_retry(container.retry + 1))  # Line 23
            if not any(request.fits_in(placer.room(node)) for node in in_order):
                exhausted.append(request)
                if floor is not None and request.fits_in(floor):
                    break
            continue
        placements.append(placed)
        node = free[placed.node_id]
        free[placed.node_id] = replace(
            node,
            available=node.available - request,
            visible=None if node.visible is None else (node.visible - request).clamped(),
        )
    return SchedulePass(tuple(placements), tuple(held))


def _covered(request: Resources, exhausted: Sequence[Resources]) -> bool:
    """Whether ``request`` asks at least as much as one no node had room for."""
    for small in exhausted:  # noqa: SIM110 (no generator per container in the hot pass)
        if small.fits_in(request):
            return True
    return False


def place_one(
    container: WaitingContainer, nodes: Sequence[NodeState], settings: ToposchSettings
) -> Placement | None:
    """Lines 2-22 for one container: its placement, or None (held back)."""
    local = set(container.local_nodes)
    candidates = _candidates(container, nodes)
    for node in candidates:
        if container.request.fits_in(visible_available(node, settings)):
            return Placement(container.id, node.node_id, "visible")
        if container.retry >= settings.max_retry_time:
            if node.node_id in local:
                return Placement(container.id, node.node_id, "locality after retries")
            lowest = settings.lowest_risk(container, candidates)
            return Placement(container.id, lowest.node_id, "lowest risk after retries")
    return None


def place_on_visible(
    container: WaitingContainer, nodes: Sequence[NodeState], settings: ToposchSettings
) -> Placement | None:
    """YARN's own placement over what the RM shows: the first node (local ones
    first, then heartbeat order) whose visible free resources cover the container
    (``visible`` when the caller gives it, else the real free resources), or None:
    the container waits, however often it waited before. ``settings`` is not read
    (no ``nu``, no retry): it is there to share :func:`schedule`'s pass."""
    for node in _candidates(container, nodes):
        if container.request.fits_in(shown_room(node)):
            return Placement(container.id, node.node_id, "visible")
    return None


def real_room(node: NodeState) -> Resources:
    """Algorithm 1 places on real free resources (after its retries): its room."""
    return node.available


def shown_room(node: NodeState) -> Resources:
    """YARN places only on what the RM shows (the visible part of the real room)."""
    shown = node.available if node.visible is None else node.visible
    return shown.component_min(node.available)


@dataclass(frozen=True)
class Placer:
    """One container's placement, and the room on a node it can ever place in: a
    container whose request fits no node's room is held whatever else holds."""

    place: PlaceOne
    room: Callable[[NodeState], Resources]


def _candidates(container: WaitingContainer, nodes: Sequence[NodeState]) -> list[NodeState]:
    """``N``: the nodes with enough real free resources, local ones first."""
    fitting = [n for n in nodes if container.request.fits_in(n.available)]
    local = set(container.local_nodes)
    return [n for n in fitting if n.node_id in local] + [
        n for n in fitting if n.node_id not in local
    ]


ALGORITHM1 = Placer(place_one, real_room)
"""Algorithm 1 (Lines 2-22): visible first, anywhere with real room after its retries."""
YARN = Placer(place_on_visible, shown_room)
"""YARN's own placement over what the RM shows: never beyond it."""


class Algorithm1Placement:
    """Algorithm 1 as the engine's :class:`~yarn_adapt.sim.hooks.PlacementPolicy`:
    each granted container is one pass over the cluster view with the node risk
    ``risk_of`` gives now; a declined container counts a retry (per job and kind)."""

    def __init__(
        self,
        risk_of: Callable[[], Mapping[str, float]],
        settings: ToposchSettings,
    ) -> None:
        self._risk_of = risk_of
        self._settings = settings
        self._retries: dict[tuple[str, bool], int] = {}

    def choose_node(
        self,
        request: PlacementRequest,
        heartbeat_node: str,
        cluster: ClusterView,
        rng: random.Random,
    ) -> str | None:
        risk = self._risk_of()
        ids = list(cluster.node_ids)
        start = ids.index(heartbeat_node) if heartbeat_node in ids else 0
        ordered = ids[start:] + ids[:start]
        nodes = [NodeState(n, cluster.free(n), risk.get(n, 0.0)) for n in ordered]
        key = (request.job_id, request.is_am)
        container = WaitingContainer(
            f"{request.job_id}/{'am' if request.is_am else 'task'}",
            request.resources,
            0.0,
            self._retries.get(key, 0),
        )
        placed = place_one(container, nodes, self._settings)
        if placed is None:
            self._retries[key] = container.retry + 1
            return None
        self._retries.pop(key, None)
        return placed.node_id
