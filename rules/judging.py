"""Judging a configuration against a kept path (:mod:`rules.paths`): does it decide
every configuration-dependent decision of the path the same way?

A :class:`PathJudge` holds one configuration's queues and kernels and runs no mix:
each check overwrites the queues' state with what the recorded decision read, so a
judge can be asked about any number of paths.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rules.inputs import GroupConfig, GroupConstraints, GroupResources
from rules.kernels import Totals
from rules.kernelset import FairShares, kernel_set, make_queues
from rules.mechanism import Mechanism
from rules.paths import (
    AmDecision,
    Ceiling,
    Order,
    Path,
    UserDecision,
    loaded,
    remember,
    users_dict,
)
from rules.state import JobState


class PathJudge:
    """Whether one configuration follows recorded paths."""

    def __init__(
        self,
        mechanism: Mechanism,
        config: GroupConfig,
        resources: GroupResources,
        constraints: GroupConstraints,
    ) -> None:
        self.kernels = kernel_set(
            mechanism, Totals.of(resources.total, resources.unit), constraints
        )
        self.queues = make_queues(self.kernels, mechanism, config)
        self.shares = FairShares(self.kernels.allocation, self.queues)

    def follows(self, path: Path) -> bool:
        """Whether this configuration decides every decision of ``path`` (recorded
        under another configuration with the same mechanism and queues) the same
        way."""
        decisions, jobs = path.decisions, path.jobs
        hot = decisions.hot
        # Decisions that told configurations apart before go first: one of them
        # usually settles a configuration that takes another path.
        if (
            self._broken_order(hot.orders) is not None
            or self._broken_ceiling(hot.ceilings) is not None
            or self._broken_user_limit(hot.users, jobs) is not None
            or self._broken_am_limit(hot.ams, jobs) is not None
        ):
            return False
        order = self._broken_order(decisions.orders)
        if order is not None:
            return remember(hot.orders, order)
        ceiling = self._broken_ceiling(decisions.ceilings)
        if ceiling is not None:
            return remember(hot.ceilings, ceiling)
        user = self._broken_user_limit(decisions.users, jobs)
        if user is not None:
            return remember(hot.users, user)
        am = self._broken_am_limit(decisions.ams, jobs)
        if am is not None:
            return remember(hot.ams, am)
        return True

    def _broken_order(self, orders: Iterable[Order]) -> Order | None:
        queues, key = self.queues, self.kernels.allocation.key
        for decision in orders:
            asking = [loaded(queues[load.position], load) for load in decision.loads]
            asking.sort(key=key)
            if tuple(q.position for q in asking) != decision.order:
                return decision
        return None

    def _broken_ceiling(self, ceilings: Iterable[Ceiling]) -> Ceiling | None:
        queues, both_dims = self.queues, self.kernels.both_dims
        for decision in ceilings:
            queue = queues[decision.position]
            over = decision.asked_mem > queue.ceiling_mem or (
                both_dims and decision.asked_vc > queue.ceiling_vc
            )
            if over != decision.over:
                return decision
        return None

    def _broken_user_limit(
        self, users: Iterable[UserDecision], jobs: Sequence[JobState]
    ) -> UserDecision | None:
        check = self.kernels.users
        for decision in users:
            queue = self.queues[decision.position]
            queue.used_mem = decision.used_mem
            queue.users = users_dict(decision.users)
            if check.allows(queue, jobs[decision.job]) != decision.allowed:
                return decision
        return None

    def _broken_am_limit(
        self, ams: Iterable[AmDecision], jobs: Sequence[JobState]
    ) -> AmDecision | None:
        am = self.kernels.am
        shares: tuple[int, ...] | bool | None = False  # which fair shares the queues hold
        for decision in ams:
            queue = loaded(self.queues[decision.load.position], decision.load)
            queue.am_used_mem, queue.am_used_vc = decision.am_mem, decision.am_vc
            if am.reads_users:
                queue.users = users_dict(decision.users)
            if decision.shares_of != shares:
                shares = decision.shares_of
                self.shares.set(decision.shares_of)
            if am.allows(queue, jobs[decision.job], decision.used) != decision.allowed:
                return decision
        return None
