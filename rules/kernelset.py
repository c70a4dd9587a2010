"""A mechanism's kernels, made once and shared: the objects an evaluation of
Algorithm 1 (:mod:`rules.engine`) and a path judge (:mod:`rules.judging`) call.

Kernels keep no state of a run, so one set serves every evaluation with the same
mechanism, group totals and constraints (:func:`kernel_set` caches them). The
queues of a configuration are built from a set by :func:`make_queues`, and
:class:`FairShares` keeps each set of active queues' instantaneous fair shares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from rules.inputs import GroupConfig, GroupConstraints
from rules.kernels import (
    ALLOCATION,
    CONSTRAINTS,
    ESTIMATION,
    ORDERING,
    Allocation,
    AmPolicy,
    Bounds,
    JobKey,
    NoUserLimit,
    Timing,
    Totals,
    UserCheck,
    lookup,
)
from rules.mechanism import Mechanism
from rules.state import JobState, QueueState
from yarn_adapt.errors import SettingsError

_KEPT = 10_000


@dataclass(frozen=True)
class KernelSet:
    """What the rules chose, as callables and flags."""

    allocation: Allocation
    ordering: tuple[JobKey, ...]
    bounds: Bounds
    am: AmPolicy
    users: UserCheck
    no_user_limit: bool
    job_cap: Callable[[JobState], float]
    both_dims: bool
    timing: Timing
    reuse: bool
    fair_am: bool
    block_at_ceiling: bool


_SETS: dict[tuple[Mechanism, Totals, int], tuple[GroupConstraints, KernelSet]] = {}


def kernel_set(mechanism: Mechanism, totals: Totals, constraints: GroupConstraints) -> KernelSet:
    """The kernels of ``mechanism`` for these totals and constraints (cached)."""
    key = (mechanism, totals, id(constraints))
    found = _SETS.get(key)
    if found is not None and found[0] is constraints:
        return found[1]
    made = _make(mechanism, totals, constraints)
    if len(_SETS) >= _KEPT:
        _SETS.clear()
    _SETS[key] = (constraints, made)
    return made


def _make(mechanism: Mechanism, totals: Totals, constraints: GroupConstraints) -> KernelSet:
    choice = mechanism.allocation
    allocation = cast(Callable[..., Allocation], lookup(ALLOCATION, choice))(choice, totals)
    ordering = tuple(
        cast(Callable[..., JobKey], lookup(ORDERING, c))(c, totals) for c in mechanism.ordering
    )
    am = cast(AmPolicy, _constraint(mechanism, totals, "am"))
    users = cast(UserCheck, _constraint(mechanism, totals, "user_limit"))
    return KernelSet(
        allocation=allocation,
        ordering=ordering,
        bounds=cast(Bounds, _constraint(mechanism, totals, "queue_bounds", constraints)),
        am=am,
        users=users,
        no_user_limit=isinstance(users, NoUserLimit),
        job_cap=cast(Callable[[JobState], float], _constraint(mechanism, totals, "placement")),
        both_dims=bool(_constraint(mechanism, totals, "resource_fit")),
        timing=cast(Timing, _constraint(mechanism, totals, "heartbeat")),
        reuse=bool(lookup(ESTIMATION, mechanism.estimation)),
        fair_am=am.needs_am and not am.on_activation,
        block_at_ceiling=mechanism.allocation.binding("over_ceiling") == "block",
    )


def _constraint(mechanism: Mechanism, totals: Totals, kind: str, *extra: object) -> object:
    choice = mechanism.constraint(kind)
    factory = cast(Callable[..., object], lookup(CONSTRAINTS, choice))
    return factory(choice, totals, *extra)


def make_queues(kernels: KernelSet, mechanism: Mechanism, config: GroupConfig) -> list[QueueState]:
    """The configuration's leaf queues, their numbers resolved by the kernels."""
    if len(mechanism.ordering) != len(config.queues):
        raise SettingsError("mechanism and configuration disagree on the queue count")
    queues = []
    for position, conf in enumerate(config.queues):
        queue = QueueState(conf.name, position)
        kernels.allocation.configure(queue, conf)
        kernels.bounds.configure(queue)
        queue.am_fraction = conf.am_share
        queue.user_factor = conf.user_limit_factor
        queue.user_minimum = conf.minimum_user_limit_percent
        queues.append(queue)
    return queues


class FairShares:
    """Each queue's instantaneous fair share. It depends only on which queues are
    active (their weights and bounds are fixed while a mix runs), so it is worked
    out once per set of active queues."""

    def __init__(self, allocation: Allocation, queues: list[QueueState]) -> None:
        self.allocation = allocation
        self.queues = queues
        self._known: dict[tuple[int, ...], tuple[tuple[float, float], ...]] = {}

    def set(self, active: tuple[int, ...] | None) -> None:
        """Give the queues the fair shares of ``active`` (``None``: no shares)."""
        queues = self.queues
        if active is None:
            for queue in queues:
                queue.fair_mem = queue.fair_vc = 0.0
            return
        shares = self._known.get(active)
        if shares is None:
            for queue in queues:
                queue.fair_mem = queue.fair_vc = 0.0
            if active:
                self.allocation.share_out([queues[p] for p in active])
            self._known[active] = tuple((q.fair_mem, q.fair_vc) for q in queues)
            return
        for queue, (fair_mem, fair_vc) in zip(queues, shares, strict=True):
            queue.fair_mem, queue.fair_vc = fair_mem, fair_vc
