"""What the guard keeps for the latency-critical services on one node: learned
demand where their learners have enough samples, observed usage where they do not,
and a Cilantro policy where several share the node (the decide side of
:class:`~yarn_adapt.colocation.lra.LearnedLraDemand`).

Per node the provider hands :func:`node_demand` one :class:`Part` per application
whose work runs there (its CPU and memory demand on the node, already its share of
the application's, or why they are not trusted yet) and the node's observed usage
(:class:`~yarn_adapt.colocation.demand.ObservedUsageDemand`'s figure, or None). CPU
and memory are decided apart:

- **CPU.** Every part learned enough: one part keeps its ``reserve`` amount (the
  upper bound, or eq. 6's recommendation); several split a pool -- what they would
  keep alone, at most the node's capacity -- by the ``share`` policy
  (:func:`~yarn_adapt.demand.shared.split_node`), and the reason names the policy and
  each share. A part short of samples (or without a target, or with no part at all)
  makes the node's CPU the observed usage plus headroom, and the reason says why
  (``observed usage ... + 25% (shop: learner has 2 of 5 rounds)``). No observed
  figure either: whatever was learned, with its shortfall in the reason.
- **Memory.** Every part learned enough: the sum of the parts' upper bounds (memory
  is not shared by a policy: a service short of its working set is killed, not
  slowed). Otherwise the observed usage plus headroom, as for CPU.

A split is worth keeping: the parts change only when a feedback round closes, while
the guard asks every cycle. ``splits`` (a dict the caller owns) remembers each split
by the parts' figures, rounds and pool.

Pure decision code.
"""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping, Sequence
from dataclasses import dataclass

from yarn_adapt.colocation.model import NodeDemand
from yarn_adapt.demand.learner import PerformanceModel
from yarn_adapt.demand.model import Demand, DemandSource
from yarn_adapt.demand.shared import Claim, NodeSplit, SharePolicy, split_node

Splits = MutableMapping[Hashable, NodeSplit]
SPLITS_KEPT = 1024


@dataclass(frozen=True, eq=False)
class Part:
    """One application's part on one node: its CPU demand there (vcores) and its
    memory demand there (MB), each None or with the reason it is not trusted yet
    (``cpu_short``, ``memory_short``: e.g. ``"learner has 2 of 5 rounds"``; both
    None: the application has none of that resource's work on the node); its
    performance model (present whenever ``cpu`` is) and SLO goal, for a policy when
    it shares the node."""

    application: str
    cpu: Demand | None = None
    memory: Demand | None = None
    cpu_short: str | None = None
    memory_short: str | None = None
    model: PerformanceModel | None = None
    goal: float = 0.95
    rounds: int = 0

    @property
    def cpu_ready(self) -> bool:
        return self.cpu is not None and self.cpu_short is None

    @property
    def memory_ready(self) -> bool:
        return self.memory is not None and self.memory_short is None


@dataclass(frozen=True)
class Reservation:
    """What is kept of one resource on a node (vcores or MB), the estimate behind
    it (CPU) and the reason."""

    amount: float
    estimate: float | None
    reason: str


@dataclass(frozen=True)
class ReserveSettings:
    """``reserve``: what one service alone keeps (``upper`` or ``recommendation``);
    ``share``: the policy when several share a node."""

    reserve: str = "upper"
    share: SharePolicy = SharePolicy.LEAST


def node_demand(
    node_id: str,
    parts: Sequence[Part],
    observed: NodeDemand | None,
    capacity_vcores: float,
    settings: ReserveSettings = ReserveSettings(),
    splits: Splits | None = None,
) -> NodeDemand | None:
    """The node's demand (see the module docstring); None when nothing is known."""
    cpu = cpu_reservation(parts, observed, capacity_vcores, settings, splits)
    memory = memory_reservation(parts, observed)
    if cpu is None and memory is None:
        return None
    source = _joined(cpu, memory)
    return NodeDemand(
        node_id,
        cpu.amount if cpu else 0.0,
        memory.amount if memory else 0.0,
        source,
        cpu.estimate if cpu else None,
    )


def cpu_reservation(
    parts: Sequence[Part],
    observed: NodeDemand | None,
    capacity_vcores: float,
    settings: ReserveSettings = ReserveSettings(),
    splits: Splits | None = None,
) -> Reservation | None:
    """The node's CPU: the parts' learned demand, else the observed usage."""
    parts = [p for p in parts if p.cpu is not None or p.cpu_short]  # CPU work here
    ready = bool(parts) and all(p.cpu_ready for p in parts)
    if not ready and observed is not None:
        why = _shortfalls(parts, "cpu") or "no latency-critical service learned here"
        return Reservation(observed.vcores, observed.estimate_vcores, f"{observed.source} ({why})")
    learned = [p for p in parts if p.cpu is not None]
    if not learned:
        return None
    if len(learned) == 1:
        return _alone(learned[0], settings, _shortfalls(parts, "cpu"))
    return _shared(learned, capacity_vcores, settings, _shortfalls(parts, "cpu"), splits)


def memory_reservation(parts: Sequence[Part], observed: NodeDemand | None) -> Reservation | None:
    """The node's memory: the parts' learned bounds summed, else the observed usage."""
    parts = [p for p in parts if p.memory is not None or p.memory_short]  # memory held here
    ready = bool(parts) and all(p.memory_ready for p in parts)
    if not ready and observed is not None:
        why = _shortfalls(parts, "memory") or "no latency-critical service learned here"
        return Reservation(observed.memory_mb, None, f"{observed.source} ({why})")
    learned = [p for p in parts if p.memory is not None]
    if not learned:
        return None
    total = sum(p.memory.upper for p in learned if p.memory is not None)
    each = " + ".join(
        f"{p.application} {p.memory.upper:.0f}" for p in learned if p.memory is not None
    )
    short = _shortfalls(parts, "memory")
    why = f"; {short}" if short else ""
    return Reservation(total, None, f"learned working-set bound {each} MB{why}")


# --------------------------------------------------------------------------- cpu


def _alone(part: Part, settings: ReserveSettings, short: str) -> Reservation:
    assert part.cpu is not None
    amount = reserved_amount(part.cpu, settings.reserve)
    return Reservation(amount, part.cpu.estimate, _alone_words(part, settings.reserve, short))


def _alone_words(part: Part, reserve: str, short: str) -> str:
    assert part.cpu is not None
    if part.cpu.source is DemandSource.STATED:
        return f"{part.application} stated demand x forecast load"
    what = "eq. 6 recommendation" if reserve == "recommendation" else "upper bound"
    why = f"; {short}" if short else f" ({part.rounds} rounds)"
    return f"{part.application} {part.cpu.source} {what} at forecast load{why}"


def _shared(
    parts: Sequence[Part],
    capacity_vcores: float,
    settings: ReserveSettings,
    short: str,
    splits: Splits | None = None,
) -> Reservation:
    alone = [reserved_amount(p.cpu, settings.reserve) for p in parts if p.cpu is not None]
    pool = min(sum(alone), max(0.0, capacity_vcores))
    split = _split(parts, pool, settings.share, {} if splits is None else splits)
    estimate = sum(p.cpu.estimate for p in parts if p.cpu is not None)
    why = f"; {short}" if short else ""
    return Reservation(split.reserved, estimate, split.describe() + why)


def _split(parts: Sequence[Part], pool: float, policy: SharePolicy, splits: Splits) -> NodeSplit:
    """:func:`split_node`, remembered in ``splits`` by what decides it."""
    key = (pool, policy, tuple((p.application, p.rounds, p.cpu, p.goal) for p in parts))
    if key not in splits:
        if len(splits) >= SPLITS_KEPT:
            splits.clear()
        splits[key] = split_node([_claim(p) for p in parts], pool, policy)
    return splits[key]


def _claim(part: Part) -> Claim:
    assert part.cpu is not None and part.model is not None
    return Claim(part.application, part.cpu.load, part.cpu, part.goal, part.model)


def reserved_amount(demand: Demand | None, reserve: str) -> float:
    if demand is None:
        return 0.0
    return demand.estimate if reserve == "recommendation" else demand.upper


# --------------------------------------------------------------------------- words


def _shortfalls(parts: Sequence[Part], resource: str) -> str:
    shorts = [(p.application, p.cpu_short if resource == "cpu" else p.memory_short) for p in parts]
    return "; ".join(f"{app}: {why}" for app, why in shorts if why)


def _joined(cpu: Reservation | None, memory: Reservation | None) -> str:
    if cpu is not None and memory is not None and cpu.reason == memory.reason:
        return cpu.reason
    pieces = []
    if cpu is not None:
        pieces.append(f"vcores: {cpu.reason}")
    if memory is not None:
        pieces.append(f"memory: {memory.reason}")
    return "; ".join(pieces)
