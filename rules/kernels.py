"""Numeric kernels, looked up by the names the rules emit (:mod:`rules.rulebook`).

A kernel does arithmetic the rules chose; it never chooses. Four registries, one per
activation group:

* :data:`ALLOCATION` -- how queues are ranked for the next container and what their
  share/ceiling/floor are (resolved from the configuration by the rule's bindings);
* :data:`ORDERING` -- how a queue ranks its jobs;
* :data:`CONSTRAINTS` -- checks: queue bounds, AM containers, placement, user limit,
  which resource dimensions must fit;
* :data:`ESTIMATION` -- how a granted container turns into task execution.

A binding names where a number comes from (``capacity``, ``maximum``, ``weight``,
``min_resources``, ``max_resources``): :data:`VALUE_SOURCES` reads it from a
:class:`~rules.inputs.QueueConfig`.

What YARN computes -- queue order, fair shares, user and AM limits, active users --
comes from :mod:`yarn_adapt.semantics`, the module the simulator is to share: the
kernels only feed it the queue's numbers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rules.inputs import GroupConstraints, QueueConfig
from rules.mechanism import KernelChoice
from rules.state import INFINITY, JobState, QueueState
from yarn_adapt.errors import SettingsError
from yarn_adapt.model.fair import FairResources
from yarn_adapt.model.resources import Resources
from yarn_adapt.semantics import capacity as cs
from yarn_adapt.semantics import fair as fs


@dataclass(frozen=True)
class Totals:
    """The group's resources and allocation unit, as plain numbers."""

    memory: int
    vcores: int
    unit_mem: int
    unit_vc: int

    @classmethod
    def of(cls, total: Resources, unit: Resources) -> Totals:
        return cls(total.memory_mb, total.vcores, unit.memory_mb, unit.vcores)


Amount = tuple[float, float]


def _percent_of(percent: float, totals: Totals) -> Amount:
    return percent / 100.0 * totals.memory, percent / 100.0 * totals.vcores


def _fair_amount(value: FairResources | None, totals: Totals, absent: float) -> Amount:
    if value is None:
        return absent, absent
    resolved = value.resolve(Resources(totals.memory, totals.vcores))
    return float(resolved.memory_mb), float(resolved.vcores)


VALUE_SOURCES: Mapping[str, Callable[[QueueConfig, Totals], Amount]] = {
    "capacity": lambda q, t: _percent_of(q.capacity, t),
    "maximum": lambda q, t: _percent_of(q.maximum, t),
    "min_resources": lambda q, t: _fair_amount(q.min_resources, t, 0.0),
    "max_resources": lambda q, t: _fair_amount(q.max_resources, t, INFINITY),
    "group": lambda q, t: (float(t.memory), float(t.vcores)),
}


ValueReader = Callable[[QueueConfig, Totals], Amount]


def value_reader(choice: KernelChoice, key: str) -> ValueReader:
    """What reads the value ``choice`` binds to ``key`` from a queue's configuration
    (resolved once per kernel: the queues of every evaluation are configured)."""
    source = choice.binding(key)
    reader = VALUE_SOURCES.get(source)
    if reader is None:
        raise SettingsError(f"kernel {choice.kernel}: no value source {source!r} for {key}")
    return reader


QueueKey = Callable[[QueueState], tuple[float, ...]]
JobKey = Callable[[JobState], tuple[float, ...]]


# --------------------------------------------------------------------------- allocation


class Allocation(Protocol):
    def configure(self, queue: QueueState, config: QueueConfig) -> None: ...

    def key(self, queue: QueueState) -> tuple[float, ...]: ...

    def share_out(self, active: Sequence[QueueState]) -> None:
        """Set each active queue's instantaneous fair share (``fair_mem``/``fair_vc``)."""


class GuaranteedShare:
    """Capacity Scheduler: queues below their floor (S^Queue's minimum, when the
    constraints give one) first, then YARN's order
    (:func:`yarn_adapt.semantics.capacity.queue_order_key`)."""

    def __init__(self, choice: KernelChoice, totals: Totals) -> None:
        self.choice = choice
        self.totals = totals
        self.share = value_reader(choice, "share")
        self.ceiling = value_reader(choice, "ceiling")

    def configure(self, queue: QueueState, config: QueueConfig) -> None:
        queue.share_mem, queue.share_vc = self.share(config, self.totals)
        ceiling = self.ceiling(config, self.totals)
        queue.ceiling_mem = max(ceiling[0], queue.share_mem)
        queue.ceiling_vc = max(ceiling[1], queue.share_vc)

    def key(self, queue: QueueState) -> tuple[float, ...]:
        needy = (
            0.0
            if queue.used_mem < min(queue.floor_mem, queue.used_mem + queue.pending_mem)
            else 1.0
        )
        return (
            needy,
            *cs.queue_order_key(
                queue.used_mem, queue.share_mem, queue.position, cluster=self.totals.memory
            ),
        )

    def share_out(self, active: Sequence[QueueState]) -> None:
        """No instantaneous fair share in the Capacity Scheduler."""


class WeightedFair:
    """Fair Scheduler between queues: FairSharePolicy on memory
    (:func:`yarn_adapt.semantics.fair.fair_share_key`) or, under a ``drf`` parent,
    DominantResourceFairnessPolicy (:func:`yarn_adapt.semantics.fair.drf_key`: the
    min-share check on the dominant resource). Fair shares:
    :func:`yarn_adapt.semantics.fair.fair_shares`."""

    def __init__(self, choice: KernelChoice, totals: Totals) -> None:
        self.choice = choice
        self.totals = totals
        self.dominant = choice.binding("measure") == "dominant"
        self.floor = value_reader(choice, "floor")
        self.ceiling = value_reader(choice, "ceiling")

    def configure(self, queue: QueueState, config: QueueConfig) -> None:
        queue.weight = config.weight
        queue.floor_mem, queue.floor_vc = self.floor(config, self.totals)
        queue.ceiling_mem, queue.ceiling_vc = self.ceiling(config, self.totals)

    def key(self, queue: QueueState) -> tuple[float, ...]:
        if self.dominant:
            return fs.drf_key(
                used=(queue.used_mem, queue.used_vc),
                min_share=(queue.floor_mem, queue.floor_vc),
                cluster=(self.totals.memory, self.totals.vcores),
                weight=queue.weight,
                position=queue.position,
            )
        return fs.fair_share_key(
            used=queue.used_mem,
            demand=min(queue.used_mem + queue.pending_mem, queue.ceiling_mem),
            min_share=queue.floor_mem,
            weight=queue.weight,
            position=queue.position,
        )

    def share_out(self, active: Sequence[QueueState]) -> None:
        """ComputeFairShares among the active queues by weight within floor/ceiling;
        vcores only under a drf parent, as YARN does."""
        weights = tuple(q.weight for q in active)
        memory = _shares(
            weights,
            tuple(q.floor_mem for q in active),
            tuple(q.ceiling_mem for q in active),
            float(self.totals.memory),
        )
        vcores = (
            _shares(
                weights,
                tuple(q.floor_vc for q in active),
                tuple(q.ceiling_vc for q in active),
                float(self.totals.vcores),
            )
            if self.dominant
            else (0.0,) * len(active)
        )
        for queue, share_mem, share_vc in zip(active, memory, vcores, strict=True):
            queue.fair_mem, queue.fair_vc = share_mem, share_vc


@functools.lru_cache(maxsize=4096)
def _shares(
    weights: tuple[float, ...],
    minimums: tuple[float, ...],
    maximums: tuple[float, ...],
    total: float,
) -> tuple[float, ...]:
    # The same few active-queue sets recur within and across evaluations; the
    # bisection costs ~100 us, a cache hit well under 1 us.
    return tuple(fs.fair_shares(weights, minimums, maximums, total))


ALLOCATION: Mapping[str, Callable[[KernelChoice, Totals], Allocation]] = {
    "guaranteed_share": GuaranteedShare,
    "weighted_fair": WeightedFair,
}


# --------------------------------------------------------------------------- ordering


def _fifo(choice: KernelChoice, totals: Totals) -> JobKey:
    return lambda j: (-j.priority, j.submit, j.index)


def _least_used(choice: KernelChoice, totals: Totals) -> JobKey:
    if choice.binding("measure") == "dominant":
        cluster = (float(totals.memory), float(max(totals.vcores, 1)))
        return lambda j: fs.drf_app_key(
            used=(j.used_mem, j.used_vc), cluster=cluster, start=j.submit, index=j.index
        )
    return lambda j: (j.used_mem, j.submit, j.index)


def _earliest_deadline(choice: KernelChoice, totals: Totals) -> JobKey:
    return lambda j: (j.deadline, j.submit, j.index)


def _least_remaining_time(choice: KernelChoice, totals: Totals) -> JobKey:
    return lambda j: (j.work_left, j.submit, j.index)


ORDERING: Mapping[str, Callable[[KernelChoice, Totals], JobKey]] = {
    "fifo": _fifo,
    "least_used": _least_used,
    "earliest_deadline": _earliest_deadline,
    "least_remaining_time": _least_remaining_time,
}


# --------------------------------------------------------------------------- constraints


class Bounds:
    """Queue bounds: the configuration's (already set by the allocation kernel) or
    also S^Queue's fractions of the group."""

    def __init__(self, choice: KernelChoice, totals: Totals, constraints: GroupConstraints) -> None:
        self.from_constraints = choice.binding("source") == "constraints"
        self.totals = totals
        self.constraints = constraints

    def configure(self, queue: QueueState) -> None:
        if not self.from_constraints:
            return
        upper = self.constraints.queue_max.get(queue.name)
        if upper is not None:
            queue.ceiling_mem = min(queue.ceiling_mem, upper * self.totals.memory)
            queue.ceiling_vc = min(queue.ceiling_vc, upper * self.totals.vcores)
        lower = self.constraints.queue_min.get(queue.name)
        if lower is not None:
            queue.floor_mem = max(queue.floor_mem, lower * self.totals.memory)
            queue.floor_vc = max(queue.floor_vc, lower * self.totals.vcores)


class AmPolicy(Protocol):
    needs_am: bool
    on_activation: bool
    # whether ``allows`` reads the queue's users (rules.paths records them only then)
    reads_users: bool

    def allows(self, queue: QueueState, job: JobState, used: tuple[int, int]) -> bool: ...

    def reads_used(self, queue: QueueState, job: JobState) -> bool:
        """Whether ``allows`` can answer otherwise for another ``used`` (the group's
        use), the rest as it is."""
        ...


class NoAm:
    needs_am = False
    on_activation = False
    reads_users = False

    def __init__(self, choice: KernelChoice, totals: Totals) -> None:
        pass

    def allows(self, queue: QueueState, job: JobState, used: tuple[int, int]) -> bool:
        return True

    def reads_used(self, queue: QueueState, job: JobState) -> bool:
        return False


class AmLimit:
    """AM containers within a share of a base amount. ``queue_limit`` (Capacity):
    checked when a job is activated, against the queue's and the user's AM limits
    (:func:`yarn_adapt.semantics.capacity.may_activate`). ``fair_share`` (Fair):
    checked when the AM is granted, against the queue's instantaneous fair share x
    maxAMShare (:func:`yarn_adapt.semantics.fair.max_am_share_allows`)."""

    needs_am = True

    def __init__(self, choice: KernelChoice, totals: Totals) -> None:
        self.totals = totals
        self.on_activation = choice.binding("base") == "queue_limit"
        self.at_least_one = choice.binding("at_least_one") == "yes"
        self.reads_users = self.on_activation  # the user AM limit; not at grant time

    def allows(self, queue: QueueState, job: JobState, used: tuple[int, int]) -> bool:
        if self.on_activation:
            return self._activation_allows(queue, job, used[0])
        return self._grant_allows(queue, job, used)

    def reads_used(self, queue: QueueState, job: JobState) -> bool:
        """At activation, always. At grant time the group's use enters only as the
        base of a resource whose fair share is 0 (``min(available, maxResources)``),
        and that base can refuse only an AM use above 0 of that resource: with
        none (memory-only comparisons hold no AM vcores) the check passes at any
        base -- or always, with maxAMShare -1."""
        if self.on_activation:
            return True
        if abs(queue.am_fraction + 1.0) < 1e-4:
            return False
        if queue.am_fraction < 0:
            return True  # a negative limit refuses even none
        if not queue.fair_mem and queue.am_used_mem + job.am_mem > 0:
            return True
        return not queue.fair_vc and queue.am_used_vc + job.am_vc > 0

    def _activation_allows(self, queue: QueueState, job: JobState, used_mem: int) -> bool:
        step = self.totals.unit_mem
        current = min(queue.ceiling_mem, self.totals.memory - used_mem + queue.used_mem)
        limit = cs.am_limit(queue.share_mem, current, queue.am_fraction, step)
        user = queue.users.get(job.user)
        user_limit = cs.user_am_limit(
            guaranteed=queue.share_mem,
            am_percent=queue.am_fraction,
            minimum_user_limit_percent=queue.user_minimum,
            active_users=_active_users(queue),
            user_limit_factor=queue.user_factor,
            queue_am_limit=limit,
            step=step,
        )
        return cs.may_activate(
            am_request=job.am_mem,
            queue_am_used=queue.am_used_mem,
            queue_am_limit=limit,
            user_am_used=user[2] if user else 0,
            user_am_limit=user_limit,
            at_least_one=self.at_least_one,
        )

    def _grant_allows(self, queue: QueueState, job: JobState, used: tuple[int, int]) -> bool:
        return fs.max_am_share_allows(
            am_used=(queue.am_used_mem, queue.am_used_vc),
            am_request=(job.am_mem, job.am_vc),
            fair_share=(queue.fair_mem, queue.fair_vc),
            max_share=(queue.ceiling_mem, queue.ceiling_vc),
            available=(self.totals.memory - used[0], self.totals.vcores - used[1]),
            max_am_share=queue.am_fraction,
        )


def _active_users(queue: QueueState) -> int:
    """UsersManager's active users: those with an app that asks for containers."""
    return sum(1 for held in queue.users.values() if cs.is_active_user(held[3]))


class UserCheck(Protocol):
    def allows(self, queue: QueueState, job: JobState) -> bool: ...


class NoUserLimit:
    def __init__(self, choice: KernelChoice, totals: Totals) -> None:
        pass

    def allows(self, queue: QueueState, job: JobState) -> bool:
        return True


class UserLimit:
    """The Capacity Scheduler's user limit (user weights 1):
    :func:`yarn_adapt.semantics.capacity.user_limit` over the queue's active users
    (:func:`yarn_adapt.semantics.capacity.is_active_user`), checked as
    :func:`yarn_adapt.semantics.capacity.can_assign_to_user` does."""

    def __init__(self, choice: KernelChoice, totals: Totals) -> None:
        self.step = totals.unit_mem

    def allows(self, queue: QueueState, job: JobState) -> bool:
        used = queue.users.get(job.user)
        return used is None or cs.can_assign_to_user(used[0], self._limit(queue))

    def _limit(self, queue: QueueState) -> float:
        held, active = cs.active_usage((user[0], user[3]) for user in queue.users.values())
        return cs.user_limit(
            guaranteed=queue.share_mem,
            queue_used=queue.used_mem,
            active_used=held,
            active_users=active,
            minimum_user_limit_percent=queue.user_minimum,
            user_limit_factor=queue.user_factor,
            queue_maximum=queue.ceiling_mem,
            step=self.step,
        )


def _placement_cap(choice: KernelChoice, totals: Totals) -> Callable[[JobState], float]:
    if choice.kernel == "allowed_machines":
        return lambda j: (
            INFINITY if j.spec.allowed_share is None else j.spec.allowed_share * totals.memory
        )
    return lambda j: INFINITY


@dataclass(frozen=True)
class Timing:
    """When containers are granted. ``continuous``: the moment room and demand meet;
    otherwise on node heartbeats, at most ``limit`` per heartbeat (``half_free``: stop
    once half the node's free resources went, the Fair Scheduler's dynamic
    maxassign)."""

    continuous: bool
    limit: float = INFINITY
    half_free: bool = False


_PER_HEARTBEAT = {"one": 1.0, "max_assignments": 100.0, "half_free": INFINITY}


def _timing(choice: KernelChoice, totals: Totals) -> Timing:
    if choice.kernel == "continuous":
        return Timing(True)
    per_heartbeat = choice.binding("per_heartbeat")
    if per_heartbeat not in _PER_HEARTBEAT:
        raise SettingsError(f"rule {choice.rule}: unknown per-heartbeat limit {per_heartbeat!r}")
    return Timing(False, _PER_HEARTBEAT[per_heartbeat], per_heartbeat == "half_free")


CONSTRAINTS: Mapping[str, Callable[..., object]] = {
    "queue_bounds": Bounds,
    "no_am": NoAm,
    "am_limit": AmLimit,
    "no_user_limit": NoUserLimit,
    "user_limit": UserLimit,
    "any_machine": _placement_cap,
    "allowed_machines": _placement_cap,
    "fit": lambda choice, totals: choice.binding("dimensions") != "memory",
    "continuous": _timing,
    "heartbeat_grants": _timing,
}


# --------------------------------------------------------------------------- estimation

# Whether a container stays with its job for the job's next pending task.
ESTIMATION: Mapping[str, bool] = {
    "per_task_containers": False,
    "container_reuse": True,
}


def lookup(registry: Mapping[str, object], choice: KernelChoice) -> object:
    found = registry.get(choice.kernel)
    if found is None:
        raise SettingsError(f"no numeric kernel {choice.kernel!r} (chosen by rule {choice.rule})")
    return found
