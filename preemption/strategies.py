"""GetKPreemptedTasks(): which batch tasks give up resources, and how much each.

Pure functions of the tasks, the blacklist and the demand (TopoSch §5.3, "pluggable
preemption strategies"):

=====  ===========================================================================
RB     random: the K tasks are drawn at random (seeded)
LTF    longest tasks first: the longest-running tasks (likely stragglers)
NTF    newest tasks first: the most recently started tasks (early stage, little lost)
NLTF   non-locality tasks first: tasks that do not read their input on this node
       (non-local before unknown before local; newest first within a class)
LP     least preempted: the fewest tasks that cover the demand, most reclaimable
       first (the paper's Most Resources First); each gives as much as it can
Kill   YARN's way: newest containers first (the NM's opportunistic LIFO, PCPP's
       reverse allocation order), killed whole until what they were given covers
       the demand (blacklist ignored: a kill needs no aliveness)
=====  ===========================================================================

For the four gradual strategies K = ⌈r / c⌉ per dimension asked for (the larger of
CPU and memory), and the round's demand is split evenly: each task gives
``min(c, ⌈r / K⌉)``, so a round takes r rather than K·c. A task that cannot give its
share (it is near its floor) gives what it can and the next task in the strategy's
order covers the rest. Blacklisted tasks and tasks at their floor are never chosen.
Ties are broken by container id, so every choice is reproducible.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from preemption.model import NOTHING, Amount, BatchTask, Locality


class Strategy(StrEnum):
    RB = "RB"
    LTF = "LTF"
    NTF = "NTF"
    NLTF = "NLTF"
    LP = "LP"
    KILL = "Kill"

    @property
    def gradual(self) -> bool:
        return self is not Strategy.KILL

    @classmethod
    def parse(cls, text: str) -> Strategy:
        for member in cls:
            if member.value.lower() == text.strip().lower():
                return member
        known = ", ".join(member.value for member in cls)
        raise ValueError(f"unknown strategy {text!r} (known: {known})")


@dataclass(frozen=True)
class Assignment:
    """Take ``amount`` from the container (for Kill: the container itself)."""

    container_id: str
    amount: Amount


@dataclass(frozen=True, kw_only=True)
class SelectionSettings:
    per_task: Amount  # c
    floor: Amount  # never squeeze a task's limit below this


def select(
    strategy: Strategy,
    tasks: Sequence[BatchTask],
    demand: Amount,
    settings: SelectionSettings,
    *,
    blacklist: frozenset[str] = frozenset(),
    now_s: float,
    rng: random.Random | None = None,
) -> tuple[Assignment, ...]:
    """The tasks ``strategy`` preempts to cover ``demand``, with each one's share."""
    demand = demand.clamped()
    if not demand.any_positive:
        return ()
    if strategy is Strategy.KILL:
        return _kill_victims(tasks, demand)
    candidates = [t for t in tasks if t.container_id not in blacklist]
    candidates = [t for t in candidates if _reclaimable(t, settings.floor, demand).any_positive]
    if strategy is Strategy.LP:
        return _least_preempted(candidates, demand, settings.floor)
    ordered = _ORDERS[strategy](candidates, now_s, rng or random.Random(0))
    return _even_shares(ordered, demand, settings)


def tasks_needed(demand: Amount, per_task: Amount) -> int:
    """Algorithm 2's K = ⌈r / c⌉ (the larger over the dimensions asked for)."""
    needed = 0
    if demand.cpu_millicores > 0:
        needed = max(needed, math.ceil(demand.cpu_millicores / max(per_task.cpu_millicores, 1)))
    if demand.memory_mb > 0:
        needed = max(needed, math.ceil(demand.memory_mb / max(per_task.memory_mb, 1)))
    return needed


def reclaimable(task: BatchTask, floor: Amount) -> Amount:
    """What ``task`` could still give before reaching ``floor``."""
    return (task.limit - floor).clamped()


def _reclaimable(task: BatchTask, floor: Amount, demand: Amount) -> Amount:
    """``reclaimable`` in the dimensions ``demand`` asks for only."""
    room = reclaimable(task, floor)
    return Amount(
        room.cpu_millicores if demand.cpu_millicores > 0 else 0,
        room.memory_mb if demand.memory_mb > 0 else 0,
    )


# ----------------------------------------------------------------- orders

Order = Callable[[list[BatchTask], float, random.Random], list[BatchTask]]


def _random(tasks: list[BatchTask], now_s: float, rng: random.Random) -> list[BatchTask]:
    ordered = sorted(tasks, key=lambda t: t.container_id)
    rng.shuffle(ordered)
    return ordered


def _longest_first(tasks: list[BatchTask], now_s: float, rng: random.Random) -> list[BatchTask]:
    return sorted(tasks, key=lambda t: (-t.elapsed_s(now_s), t.container_id))


def _newest_first(tasks: list[BatchTask], now_s: float, rng: random.Random) -> list[BatchTask]:
    return sorted(tasks, key=lambda t: (-t.started_at_s, t.container_id))


_LOCALITY_RANK = {Locality.NON_LOCAL: 0, Locality.UNKNOWN: 1, Locality.LOCAL: 2}


def _non_local_first(tasks: list[BatchTask], now_s: float, rng: random.Random) -> list[BatchTask]:
    return sorted(
        tasks, key=lambda t: (_LOCALITY_RANK[t.locality], -t.started_at_s, t.container_id)
    )


_ORDERS: dict[Strategy, Order] = {
    Strategy.RB: _random,
    Strategy.LTF: _longest_first,
    Strategy.NTF: _newest_first,
    Strategy.NLTF: _non_local_first,
}


# ----------------------------------------------------------------- shares


def _even_shares(
    ordered: list[BatchTask], demand: Amount, settings: SelectionSettings
) -> tuple[Assignment, ...]:
    count = tasks_needed(demand, settings.per_task)
    share = Amount(
        min(settings.per_task.cpu_millicores, math.ceil(demand.cpu_millicores / count)),
        min(settings.per_task.memory_mb, math.ceil(demand.memory_mb / count)),
    )
    assignments: list[Assignment] = []
    left = demand
    for task in ordered:
        if not left.any_positive:
            break
        # Exactly K tasks take even shares; any further task covers only what the
        # first K could not give.
        wanted = share if len(assignments) < count else left
        amount = wanted.min(left.clamped()).min(_reclaimable(task, settings.floor, demand))
        if amount.any_positive:
            assignments.append(Assignment(task.container_id, amount))
            left = left - amount
    return tuple(assignments)


def _least_preempted(
    candidates: list[BatchTask], demand: Amount, floor: Amount
) -> tuple[Assignment, ...]:
    def weight(task: BatchTask) -> float:
        room = _reclaimable(task, floor, demand)
        cpu = room.cpu_millicores / demand.cpu_millicores if demand.cpu_millicores else 0.0
        memory = room.memory_mb / demand.memory_mb if demand.memory_mb else 0.0
        return cpu + memory

    ordered = sorted(candidates, key=lambda t: (-weight(t), t.container_id))
    assignments: list[Assignment] = []
    left = demand
    for task in ordered:
        if not left.any_positive:
            break
        amount = left.clamped().min(_reclaimable(task, floor, demand))
        if amount.any_positive:
            assignments.append(Assignment(task.container_id, amount))
            left = left - amount
    return tuple(assignments)


def _kill_victims(tasks: Sequence[BatchTask], demand: Amount) -> tuple[Assignment, ...]:
    """Newest first; a killed container frees everything it was given (its baseline)."""
    ordered = sorted(tasks, key=lambda t: (-t.started_at_s, t.container_id))
    victims: list[Assignment] = []
    freed = NOTHING
    for task in ordered:
        if freed.covers(demand):
            break
        victims.append(Assignment(task.container_id, task.baseline))
        freed = freed + task.baseline
    return tuple(victims)
