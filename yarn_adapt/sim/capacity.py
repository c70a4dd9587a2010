"""Capacity Scheduler semantics (Hadoop 3.3/3.4 CapacityScheduler), simplified where
the docstrings say so. The decisions themselves are :mod:`yarn_adapt.semantics.capacity`'s
(through :mod:`.semantics_capacity`); this module walks the tree and keeps the books.

* Guarantees are whole units, floored, as YARN holds them.
* Capacities resolve to absolute guaranteed and maximum resources per queue:
  absolute ``[memory=..,vcores=..]`` first, percentages of the parent's guarantee,
  then weights share what the parent has left (the 3.4 capacity-vector order).
  ``maximum-capacity`` is a percentage of the parent's maximum (unset: 100 %).
* Child queues are tried least-served first (PriorityUtilizationQueueOrderingPolicy
  "utilization": used / guaranteed; queues with zero capacity last; ties go to the
  larger capacity, then configuration order).
* A queue never goes over its limit, ``min(max, parent limit - parent used + used)``
  (ParentQueue.getResourceLimitsOfChild, AbstractCSQueue.canAssignToThisQueue).
* Leaf ``ordering-policy``: ``fifo`` (priority, then submission) or ``fair``
  (FairOrderingPolicy: least memory used first, then submission).
* User limit (UsersManager.computeUserLimit): ``max(used by active users /
  #active users, current capacity x minimum-user-limit-percent)`` capped by
  ``capacity x user-limit-factor``; a user may be granted while not *over* it
  (LeafQueue.canAssignToUser), so one container past it. Users are active while
  one of their apps asks for containers, an app waiting for activation included
  (its AM's ask is pending); user weights are 1.
* AM limit (LeafQueue.activateApplications): an app is activated only if its AM
  fits under ``max(guarantee, current limit) x maximum-am-resource-percent`` and the
  per-user AM limit, except that a queue with no active app always activates one.
  Activation is tried when an app arrives or leaves, as in YARN.
* ``state=STOPPED`` (on the leaf or an ancestor) refuses new apps; running ones
  finish. ``maximum-applications`` (per queue, or 10000 x absolute capacity) refuses
  apps beyond it.
* A node heartbeat grants up to ``per-node-heartbeat.maximum-container-assignments``
  (100; -1 unlimited) containers while ``multiple-assignments-enabled`` (true),
  and at most ``maximum-offswitch-assignments`` (1) when requests are ANY-only
  (``SimulationOptions.off_switch_requests``); CapacityScheduler.canAllocateMore.
* Resource comparisons follow the configured resource calculator: the default
  (DefaultResourceCalculator) looks at memory only, also when fitting a container on
  a node; DominantResourceCalculator compares dominant shares.

Not modelled: node labels, reservations (a request that fits no node waits; later
apps may be served), application priorities across queues, max-parallel-apps,
preemption of reserved containers, auto-created queues.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort

from yarn_adapt.model.capacity import (
    AbsoluteCapacity,
    CapacityQueue,
    CapacitySchedulerConfig,
    Percentage,
    QueueState,
    Weight,
)
from yarn_adapt.model.resources import Resources
from yarn_adapt.sim.spec import PreemptionOptions, SimulationOptions

from .semantics_capacity import (
    am_limit,
    can_assign_to_user,
    child_limit,
    effective_capacity,
    heartbeat_assignments,
    is_active_user,
    maximum_applications,
    may_activate,
    queue_order_key,
    round_up,
    user_am_limit,
    user_limit,
)
from .shares import ideal_shares
from .state import (
    NO_DEMAND,
    NO_FIT,
    AskQueue,
    Claim,
    LeafQueue,
    QueueNode,
    SchedulerModel,
    SimApp,
    UserUsage,
)

MULTIPLE_ASSIGNMENTS = "per-node-heartbeat.multiple-assignments-enabled"
MAX_ASSIGNMENTS = "per-node-heartbeat.maximum-container-assignments"
MAX_OFFSWITCH = "per-node-heartbeat.maximum-offswitch-assignments"
RESOURCE_CALCULATOR = "resource-calculator"
MAX_APPLICATIONS = "maximum-applications"
DEFAULT_MONITOR_INTERVAL_S = 3.0  # ProportionalCapacityPreemptionPolicy


QueueKey = tuple[float, float, float, float]  # semantics.capacity.queue_order_key


def _steps_within(used: float, limit: float, step: int) -> int:
    """Grants of ``step`` that keep ``used`` at or under ``limit``."""
    return max(0, math.floor((limit - used) / step + 1e-9)) if step else 1 << 30


def _steps_below(used: float, step: float, cap: float, inclusive: bool) -> int:
    """Largest m >= 0 with ``used + m * step`` below ``cap`` (or equal to it when
    ``inclusive``), assuming m = 0 qualifies."""
    if step <= 0:
        return 1 << 30
    room = (cap - used) / step - 1e-9  # rounding may only ever cost a grant, not add one
    return max(0, math.floor(room) if inclusive else math.ceil(room) - 1)


def _entry_key(entry: tuple[int, SimApp]) -> int:
    return entry[0]


def _fair_app_order(app: SimApp) -> tuple[float, ...]:
    return (app.used_mem, app.submit_s, app.index)


def _fair_steps(app: SimApp, rival: SimApp, memory: int) -> int:
    """Grants after the first for which ``app`` stays first in a fair leaf."""
    wins_tie = (app.submit_s, app.index) < (rival.submit_s, rival.index)
    return _steps_below(app.used_mem, memory, rival.used_mem, wins_tie)


class CapacityModel(SchedulerModel):
    def __init__(
        self,
        config: CapacitySchedulerConfig,
        minimum_allocation: Resources,
        options: SimulationOptions,
    ) -> None:
        self.config = config
        self.step_mem = minimum_allocation.memory_mb
        self.step_vc = minimum_allocation.vcores
        self.preemption = options.preemption
        calculator = config.global_value(RESOURCE_CALCULATOR) or ""
        self.memory_only = "DominantResourceCalculator" not in calculator
        self._limit = _heartbeat_limit(config, options)
        self._conf: dict[str, CapacityQueue] = {}
        self._nodes: dict[str, QueueNode] = {}
        root = self._build(config.root, None, 0)
        leaves = [q for q in self._nodes.values() if isinstance(q, LeafQueue)]
        super().__init__(leaves, root)
        self._by_path = {q.path: q for q in leaves}
        self._leaf_by_name: dict[str, LeafQueue | None] = {}
        self._fit_blocked = False
        self._path: list[tuple[QueueNode, QueueKey | None]] = []
        self._leaf_limit = (0.0, 0.0)
        # The user limit of the leaf being walked (the same for all its asking
        # users), computed when first needed in a walk.
        self._user_cap_known = False
        self._user_cap_mem = 0.0
        self._user_cap_vc = 0.0
        self._passed_over_by_user = False
        self._skipped_for_room = 0  # largest ask passed over for want of node room
        self._next_app: SimApp | None = None

    # ------------------------------------------------------------------ build

    def _build(self, conf: CapacityQueue, parent: QueueNode | None, position: int) -> QueueNode:
        node: QueueNode = (
            LeafQueue(conf.path, parent, position)
            if conf.is_leaf
            else QueueNode(conf.path, parent, position)
        )
        self._nodes[conf.path] = node
        self._conf[conf.path] = conf
        node.stopped = conf.effective_state is QueueState.STOPPED or bool(parent and parent.stopped)
        if isinstance(node, LeafQueue):
            self._configure_leaf(node, conf)
        for index, child in enumerate(conf.children):
            node.children.append(self._build(child, node, index))
        return node

    def _configure_leaf(self, leaf: LeafQueue, conf: CapacityQueue) -> None:
        leaf.link()
        leaf.policy = conf.effective_ordering_policy
        leaf.am_percent = self.config.effective_am_percent(conf)
        leaf.user_limit_factor = conf.effective_user_limit_factor
        leaf.minimum_user_limit = conf.effective_minimum_user_limit_percent

    def find_leaf(self, queue: str) -> LeafQueue | None:
        """The leaf a job names (by path or unique short name), looked up once per
        name."""
        if queue not in self._leaf_by_name:
            conf = self.config.find_leaf_by_name(queue)
            self._leaf_by_name[queue] = None if conf is None else self._by_path.get(conf.path)
        return self._leaf_by_name[queue]

    # ------------------------------------------------------------------ capacities

    def resize(self, memory: int, vcores: int) -> None:
        super().resize(memory, vcores)
        root = self.root
        root.guar_mem = root.max_mem = float(memory)
        root.guar_vc = root.max_vc = float(vcores)
        root.abs_capacity = 1.0
        self._resolve_children(root, float(memory), float(vcores))

    def _resolve_children(self, parent: QueueNode, parent_mem: float, parent_vc: float) -> None:
        """Each child's guarantee from its parent's as configured (fractions of
        fractions, as YARN's absolute capacities multiply), held as YARN holds it:
        whole units, floored (semantics.capacity.effective_capacity)."""
        confs = [self._conf[c.path] for c in parent.children]
        guarantees = _guarantees(parent_mem, parent_vc, confs)
        for child, conf, (gm, gv) in zip(parent.children, confs, guarantees, strict=True):
            mm, mv = _maximum(parent, conf)
            child.guar_mem, child.guar_vc = effective_capacity(gm), effective_capacity(gv)
            child.max_mem, child.max_vc = max(mm, child.guar_mem), max(mv, child.guar_vc)
            child.abs_capacity = gm / self.cluster_mem if self.cluster_mem else 0.0
            if isinstance(child, LeafQueue):
                child.max_apps = self._max_apps(conf, child.abs_capacity)
            self._resolve_children(child, gm, gv)

    def _max_apps(self, conf: CapacityQueue, abs_capacity: float) -> float:
        """semantics.capacity.maximum_applications."""
        own = conf.other(MAX_APPLICATIONS)
        system = self.config.global_value(MAX_APPLICATIONS)
        return float(
            maximum_applications(
                None if own is None else int(own),
                None if system is None else int(system),
                abs_capacity,
            )
        )

    # ------------------------------------------------------------------ admission

    def admit(self, app: SimApp) -> str:
        leaf = app.leaf
        assert leaf is not None
        # An app the RM accepted before a refresh stays when the new configuration
        # stops its queue or lowers its maximum-applications (YARN checks both at
        # submission only: CapacityScheduler.addApplication via
        # LeafQueue.submitApplication; refreshQueues keeps the apps it holds).
        if leaf.stopped and not app.accepted:
            return f"queue {leaf.path} is STOPPED"
        if len(leaf.apps) >= leaf.max_apps and not app.accepted:
            return f"queue {leaf.path} already has {len(leaf.apps)} applications"
        leaf.apps[app.index] = app
        leaf.waiting.append(app)
        leaf.user(app.user).waiting_apps += 1
        self._activate(leaf)
        return ""

    def adopt_running(self, app: SimApp) -> None:
        leaf = app.leaf
        assert leaf is not None
        leaf.apps[app.index] = app
        self._start(leaf, app)

    def remove(self, app: SimApp) -> None:
        leaf = app.leaf
        assert leaf is not None
        if app.schedulable:
            self.drop_schedulable(app)
            self._charge_am(leaf, app, -1)
        elif app in leaf.waiting:
            leaf.waiting.remove(app)
            leaf.user(app.user).waiting_apps -= 1
        leaf.apps.pop(app.index, None)
        self._activate(leaf)

    def _activate(self, leaf: LeafQueue) -> None:
        for app in list(leaf.waiting):
            if self._may_activate(leaf, app):
                leaf.waiting.remove(app)
                leaf.user(app.user).waiting_apps -= 1
                self._start(leaf, app)

    def _start(self, leaf: LeafQueue, app: SimApp) -> None:
        self._charge_am(leaf, app, 1)
        self.make_schedulable(app)

    def _charge_am(self, leaf: LeafQueue, app: SimApp, sign: int) -> None:
        user = leaf.user(app.user)
        leaf.am_used_mem += sign * app.am_mem
        leaf.am_used_vc += sign * app.am_vc
        user.am_mem += sign * app.am_mem
        user.am_vc += sign * app.am_vc

    def _may_activate(self, leaf: LeafQueue, app: SimApp) -> bool:
        """semantics.capacity.may_activate (AbstractLeafQueue.activateApplications)."""
        user = leaf.user(app.user)
        if self.memory_only:
            queue_limit = self._am_limit_memory(leaf)
            return may_activate(
                am_request=app.am_mem,
                queue_am_used=leaf.am_used_mem,
                queue_am_limit=queue_limit,
                user_am_used=user.am_mem,
                user_am_limit=self._user_am_limit_memory(leaf, queue_limit),
            )
        if leaf.am_used_mem <= 0 and leaf.am_used_vc <= 0:
            return True  # "skipping enforcement to allow at least one application"
        limit = self._am_limit(leaf)
        if self._greater(leaf.am_used_mem + app.am_mem, leaf.am_used_vc + app.am_vc, *limit):
            return False
        user_limit = self._user_am_limit(leaf, limit)
        return not self._greater(user.am_mem + app.am_mem, user.am_vc + app.am_vc, *user_limit)

    def _am_limit_memory(self, leaf: LeafQueue) -> float:
        """semantics.capacity.am_limit on memory (DefaultResourceCalculator)."""
        current = self._current_limit(leaf)[0]
        return am_limit(leaf.guar_mem, current, leaf.am_percent, self.step_mem)

    def _user_am_limit_memory(self, leaf: LeafQueue, queue_limit: float) -> float:
        """semantics.capacity.user_am_limit on memory."""
        return user_am_limit(
            guaranteed=leaf.guar_mem,
            am_percent=leaf.am_percent,
            minimum_user_limit_percent=leaf.minimum_user_limit,
            active_users=self._active_users(leaf),
            user_limit_factor=leaf.user_limit_factor,
            queue_am_limit=queue_limit,
            step=self.step_mem,
        )

    def _am_limit(self, leaf: LeafQueue) -> tuple[float, float]:
        """:meth:`_am_limit_memory` on both resources (DominantResourceCalculator):
        the larger of the floored guarantee and the current limit, compared as
        YARN's calculator compares them."""
        guar = (leaf.guar_mem, leaf.guar_vc)
        current = self._current_limit(leaf)
        usable = current if self._greater(*current, *guar) else guar
        return self._scaled_up(usable, leaf.am_percent)

    def _user_am_limit(self, leaf: LeafQueue, am_limit: tuple[float, float]) -> tuple[float, float]:
        """:meth:`_user_am_limit_memory` on both resources (the factor -1 leaves
        the guarantee x AM percent)."""
        share = max(leaf.minimum_user_limit / 100.0, 1.0 / self._active_users(leaf))
        factor = leaf.am_percent
        if leaf.user_limit_factor != -1:
            factor = leaf.am_percent * share * leaf.user_limit_factor
        user_limit = self._scaled_up((leaf.guar_mem, leaf.guar_vc), factor)
        return am_limit if self._greater(*user_limit, *am_limit) else user_limit

    @staticmethod
    def _active(user: UserUsage) -> bool:
        """semantics.capacity.is_active_user: an app of the user asks for
        containers, or waits for activation (its AM's ask is pending)."""
        return is_active_user(user.demand_apps + user.waiting_apps)

    def _active_users(self, leaf: LeafQueue) -> int:
        """UsersManager.getNumActiveUsers, at least 1."""
        return max(1, sum(1 for u in leaf.users.values() if self._active(u)))

    def _scaled_up(self, amount: tuple[float, float], factor: float) -> tuple[float, float]:
        return (
            round_up(amount[0] * factor, self.step_mem),
            round_up(amount[1] * factor, self.step_vc),
        )

    def _current_limit(self, leaf: LeafQueue) -> tuple[float, float]:
        limit_mem, limit_vc = float(self.cluster_mem), float(self.cluster_vc)
        for queue in reversed(leaf.chain[:-1]):
            parent = queue.parent
            assert parent is not None
            limit_mem = child_limit(queue.max_mem, limit_mem, parent.used_mem, queue.used_mem)
            limit_vc = child_limit(queue.max_vc, limit_vc, parent.used_vc, queue.used_vc)
        return limit_mem, limit_vc

    # ------------------------------------------------------------------ choosing

    def heartbeat_limit(self) -> int:
        return self._limit

    def choose(self, free_mem: int, free_vc: int) -> SimApp | int:
        root = self.root
        if root.demand_apps == 0:
            return NO_DEMAND
        self._fit_blocked = False
        self._path.clear()
        app = self._assign(root, root.max_mem, root.max_vc, free_mem, free_vc)
        if app is not None:
            return app
        return NO_FIT if self._fit_blocked else NO_DEMAND

    def _assign(
        self, queue: QueueNode, limit_mem: float, limit_vc: float, free_mem: int, free_vc: int
    ) -> SimApp | None:
        if isinstance(queue, LeafQueue):
            return self._assign_leaf(queue, limit_mem, limit_vc, free_mem, free_vc)
        asking = [c for c in queue.children if c.demand_apps > 0]
        if len(asking) == 1:
            child = asking[0]
            child_mem = child_limit(child.max_mem, limit_mem, queue.used_mem, child.used_mem)
            child_vc = child_limit(child.max_vc, limit_vc, queue.used_vc, child.used_vc)
            app = self._assign(child, child_mem, child_vc, free_mem, free_vc)
            if app is not None:
                self._path.append((child, None))
            return app
        ranked = sorted((self._queue_order(c), c) for c in asking)
        for i, (_, child) in enumerate(ranked):
            child_mem = child_limit(child.max_mem, limit_mem, queue.used_mem, child.used_mem)
            child_vc = child_limit(child.max_vc, limit_vc, queue.used_vc, child.used_vc)
            app = self._assign(child, child_mem, child_vc, free_mem, free_vc)
            if app is not None:
                self._path.append((child, ranked[i + 1][0] if i + 1 < len(ranked) else None))
                return app
        return None

    def _queue_order(self, queue: QueueNode) -> QueueKey:
        """semantics.capacity.queue_order_key; with DominantResourceCalculator on
        dominant shares of the cluster (used capacity = used / guarantee as that
        calculator divides)."""
        if self.memory_only:
            return queue_order_key(
                queue.used_mem, queue.guar_mem, queue.position, cluster=self.cluster_mem
            )
        return queue_order_key(
            self._dominant(queue.used_mem, queue.used_vc),
            self._dominant(queue.guar_mem, queue.guar_vc),
            queue.position,
            cluster=1.0,
        )

    def _assign_leaf(
        self, leaf: LeafQueue, limit_mem: float, limit_vc: float, free_mem: int, free_vc: int
    ) -> SimApp | None:
        """The first app in the leaf's order that its user's limit and the node's
        room allow. Users over their limit are skipped (LeafQueue moves on to the
        next app); the first app whose ask would take the leaf over its limit ends
        the search (RegularContainerAllocator's headroom check gives QUEUE_SKIPPED
        and the leaf returns: later, smaller asks wait behind it)."""
        self._leaf_limit = (limit_mem, limit_vc)
        self._user_cap_known = False
        self._passed_over_by_user = False
        self._skipped_for_room = 0
        if self._index_pays(leaf):
            return self._assign_by_ask(leaf, limit_mem, limit_vc, free_mem, free_vc)
        return self._walk_leaf(leaf, limit_mem, limit_vc, free_mem, free_vc)

    def _index_pays(self, leaf: LeafQueue) -> bool:
        """A FIFO leaf's asks are indexed; reading the index costs a step per
        (user, size), walking the leaf a step per app."""
        return leaf.policy != "fair" and 2 * len(leaf.by_ask) < len(leaf.ordered)

    def _walk_leaf(
        self, leaf: LeafQueue, limit_mem: float, limit_vc: float, free_mem: int, free_vc: int
    ) -> SimApp | None:
        """:meth:`_assign_leaf` app by app, in the leaf's order."""
        memory_only = self.memory_only
        over_limit: set[str] = set()
        entries = self._apps_in_order(leaf) if leaf.policy == "fair" else leaf.ordered
        for i, (_, app) in enumerate(entries):
            if app.user in over_limit:
                continue
            if not self._within_user_limit(leaf, app.user):
                self._passed_over_by_user = True
                over_limit.add(app.user)
                continue
            want_mem, want_vc = app.request
            if memory_only:
                if leaf.used_mem + want_mem > limit_mem:
                    return None
            elif self._greater(
                leaf.used_mem + want_mem, leaf.used_vc + want_vc, limit_mem, limit_vc
            ):
                return None
            if want_mem > free_mem or (want_vc > free_vc and not memory_only):
                self._fit_blocked = True
                self._skipped_for_room = max(self._skipped_for_room, want_mem)
                continue
            fair = leaf.policy == "fair" and i + 1 < len(entries)
            self._next_app = entries[i + 1][1] if fair else None
            return app
        return None

    def _assign_by_ask(
        self, leaf: LeafQueue, limit_mem: float, limit_vc: float, free_mem: int, free_vc: int
    ) -> SimApp | None:
        """:meth:`_assign_leaf` for a FIFO leaf, from its asks indexed by user and
        container size: the same app and the same record of what was passed over,
        without walking past every app that cannot be served on this node. Per
        (user, size) only the first app in the leaf's order matters: apps of a user
        over the limit are passed over; an ask within the leaf's limit that does
        not fit the node is passed over for room; any other ends the walk (it is
        granted, or it would take the leaf over its limit and nothing is)."""
        memory_only = self.memory_only
        used_mem, used_vc = leaf.used_mem, leaf.used_vc
        best: SimApp | None = None
        best_key = 0
        best_within = True
        passed = False
        for ask in leaf.by_ask.values():
            if not self._usage_within_limit(leaf, ask.usage):
                passed = True
                continue
            want_mem, want_vc = ask.memory, ask.vcores
            if memory_only:
                within = used_mem + want_mem <= limit_mem
            else:
                within = not self._greater(
                    used_mem + want_mem, used_vc + want_vc, limit_mem, limit_vc
                )
            if within and (want_mem > free_mem or (want_vc > free_vc and not memory_only)):
                passed = True
                continue
            key = ask.keys[0]
            if best is None or key < best_key:
                best, best_key, best_within = ask.apps[0], key, within
        if passed:
            self._record_passed_over(
                leaf, best is not None, best_key, limit_mem, limit_vc, free_mem, free_vc
            )
        if best is None or not best_within:
            return None
        self._next_app = None
        return best

    def _record_passed_over(
        self,
        leaf: LeafQueue,
        stopped: bool,
        stop: int,
        limit_mem: float,
        limit_vc: float,
        free_mem: int,
        free_vc: int,
    ) -> None:
        """What walking the leaf up to the app ordered ``stop`` (to the end when
        not ``stopped``) passes over: apps of users over their limit, asks that do
        not fit the node."""
        memory_only = self.memory_only
        used_mem, used_vc = leaf.used_mem, leaf.used_vc
        for ask in leaf.by_ask.values():
            if stopped and ask.keys[0] >= stop:
                continue
            if not self._usage_within_limit(leaf, ask.usage):
                self._passed_over_by_user = True
                continue
            want_mem, want_vc = ask.memory, ask.vcores
            if memory_only:
                within = used_mem + want_mem <= limit_mem
            else:
                within = not self._greater(
                    used_mem + want_mem, used_vc + want_vc, limit_mem, limit_vc
                )
            if within and (want_mem > free_mem or (want_vc > free_vc and not memory_only)):
                self._fit_blocked = True
                self._skipped_for_room = max(self._skipped_for_room, want_mem)

    def _apps_in_order(self, leaf: LeafQueue) -> list[tuple[tuple[float, ...], SimApp]]:
        """(order key, app) pairs of the apps asking for containers, first first."""
        if leaf.policy == "fair":
            return sorted((_fair_app_order(a), a) for a in leaf.demand.values())
        return leaf.ordered  # type: ignore[return-value]

    def repeat_count(self, app: SimApp, free_mem: int, free_vc: int, most: int) -> int:
        """How many containers in a row, the one just chosen included, :meth:`choose`
        would give ``app`` on this node: bounded by its current task group, the
        node's room, the leaf's limit, the user limit as computed now (it only grows
        as the user gets more), and the order of sibling queues and of apps in a
        fair leaf. Any doubt gives 1."""
        if app.awaiting_am or self._passed_over_by_user:
            return 1
        memory, vcores = app.request
        if memory > free_mem // 2 or (vcores > free_vc // 2 and not self.memory_only):
            return 1  # no room for a second one on this node
        leaf = app.leaf
        assert leaf is not None
        room = free_mem // memory
        if not self.memory_only and vcores:
            room = min(room, free_vc // vcores)
        bound = app.head_run(min(most, room))
        if bound == 1:
            return 1
        limit_mem, limit_vc = self._leaf_limit
        bound = min(bound, _steps_within(leaf.used_mem, limit_mem, memory))
        if self._skipped_for_room:
            # An earlier app that found no room here blocks the leaf once its ask
            # no longer fits under the limit.
            if not self.memory_only:
                return 1
            skipped = leaf.used_mem + self._skipped_for_room
            bound = min(bound, 1 + _steps_within(skipped, limit_mem, memory))
        if not self.memory_only:
            bound = min(bound, _steps_within(leaf.used_vc, limit_vc, vcores))
        bound = min(bound, 1 + self._user_steps(leaf, app, memory, vcores))
        if self._next_app is not None:
            bound = min(bound, 1 + _fair_steps(app, self._next_app, memory))
        for queue, next_key in self._path:
            if next_key is not None:
                bound = min(bound, 1 + self._order_steps(queue, next_key, memory, vcores))
        return max(1, bound)

    def _user_steps(self, leaf: LeafQueue, app: SimApp, memory: int, vcores: int) -> int:
        """Grants after the first for which the user stays not over the limit."""
        assert self._user_cap_known
        user = self._usage(leaf, app)
        steps = math.floor((self._user_cap_mem - user.used_mem) / memory)
        if not self.memory_only and vcores:
            steps = min(steps, math.floor((self._user_cap_vc - user.used_vc) / vcores))
        return max(0, steps)

    def _order_steps(self, queue: QueueNode, rival: QueueKey, memory: int, vcores: int) -> int:
        """Grants after the first for which ``queue`` stays ahead of ``rival``."""
        own = self._queue_order(queue)
        if own[0] == 1 or rival[0] == 1:
            return 0 if own[0] == 1 else 1 << 30
        wins_tie = (own[2], own[3]) < (rival[2], rival[3])
        limits: list[tuple[float, float, float]]
        if self.memory_only:
            limits = [(queue.used_mem, memory, rival[1] * queue.guar_mem)]
        else:
            scale = -own[2]
            limits = [
                (queue.used_mem / self.cluster_mem, memory / self.cluster_mem, rival[1] * scale),
                (queue.used_vc / self.cluster_vc, vcores / self.cluster_vc, rival[1] * scale),
            ]
        return min(_steps_below(used, step, cap, wins_tie) for used, step, cap in limits)

    def charge(self, app: SimApp, memory: int, vcores: int, is_am: bool) -> None:
        app.used_mem += memory
        app.used_vc += vcores
        leaf = app.leaf
        assert leaf is not None
        for queue in leaf.chain:
            queue.used_mem += memory
            queue.used_vc += vcores
        user = self._usage(leaf, app)
        user.used_mem += memory
        user.used_vc += vcores

    @staticmethod
    def _usage(leaf: LeafQueue, app: SimApp) -> UserUsage:
        """The app's user's usage in its leaf (looked up once per app)."""
        usage = app.usage
        if usage is None:
            usage = app.usage = leaf.users[app.user]
        return usage

    def _demand_changed(self, app: SimApp, has_demand: bool) -> None:
        leaf = app.leaf
        assert leaf is not None
        leaf.user(app.user).demand_apps += 1 if has_demand else -1
        entry = (app.order, app)
        if has_demand:
            insort(leaf.ordered, entry, key=_entry_key)
            if leaf.policy != "fair":
                self._file(leaf, app)
        else:
            del leaf.ordered[bisect_left(leaf.ordered, entry[0], key=_entry_key)]
            if app.filed is not None:
                self._unfile(leaf, app)

    def request_changed(self, app: SimApp) -> None:
        ask = app.filed
        if ask is not None and app.request != (ask.memory, ask.vcores):
            leaf = app.leaf
            assert leaf is not None
            self._unfile(leaf, app)
            self._file(leaf, app)

    def _file(self, leaf: LeafQueue, app: SimApp) -> None:
        """Index a FIFO leaf's asking app under its user and the container it asks
        for."""
        memory, vcores = app.request
        name = (app.user, memory, vcores)
        ask = leaf.by_ask.get(name)
        if ask is None:
            ask = leaf.by_ask[name] = AskQueue(app.user, leaf.user(app.user), memory, vcores)
        at = bisect_left(ask.keys, app.order)
        ask.keys.insert(at, app.order)
        ask.apps.insert(at, app)
        app.filed = ask

    def _unfile(self, leaf: LeafQueue, app: SimApp) -> None:
        ask = app.filed
        assert ask is not None
        at = bisect_left(ask.keys, app.order)
        del ask.keys[at]
        del ask.apps[at]
        if not ask.keys:
            del leaf.by_ask[(ask.user, ask.memory, ask.vcores)]
        app.filed = None

    # ------------------------------------------------------------------ user limit

    def _within_user_limit(self, leaf: LeafQueue, user_name: str) -> bool:
        return self._usage_within_limit(leaf, leaf.users[user_name])

    def _usage_within_limit(self, leaf: LeafQueue, user: UserUsage) -> bool:
        if not self._user_cap_known:
            self._user_cap_known = True
            if self.memory_only:
                self._user_cap_mem, self._user_cap_vc = self._user_limit_memory(leaf), math.inf
            else:
                self._user_cap_mem, self._user_cap_vc = self.user_limit(leaf)
        if self.memory_only:
            return can_assign_to_user(user.used_mem, self._user_cap_mem)
        return not self._greater(user.used_mem, user.used_vc, self._user_cap_mem, self._user_cap_vc)

    def user_limit(self, leaf: LeafQueue) -> tuple[float, float]:
        """UsersManager.computeUserLimit for an active user (user weights 1); the
        same for every active user of the leaf."""
        if self.memory_only:
            return self._user_limit_memory(leaf), math.inf
        step = (float(self.step_mem), float(self.step_vc))
        capacity = self._max_of((leaf.guar_mem, leaf.guar_vc), step)
        used = (float(leaf.used_mem), float(leaf.used_vc))
        if self._greater(*capacity, *used):
            current = capacity
        else:
            current = (used[0] + step[0], used[1] + step[1])
        active = [u for u in leaf.users.values() if self._active(u)]
        count = max(1, len(active))
        active_used = (
            sum(u.used_mem for u in active) + step[0],
            sum(u.used_vc for u in active) + step[1],
        )
        even_split = (math.ceil(active_used[0] / count), math.ceil(active_used[1] / count))
        floor_share = leaf.minimum_user_limit / 100.0
        minimum = (math.ceil(current[0] * floor_share), math.ceil(current[1] * floor_share))
        limit = self._max_of(even_split, minimum)
        limit = self._min_of(limit, self._user_cap(leaf, capacity))
        return (round_up(limit[0], self.step_mem), round_up(limit[1], self.step_vc))

    def _user_limit_memory(self, leaf: LeafQueue) -> float:
        """The memory-only form of :meth:`user_limit` (DefaultResourceCalculator).
        With one user it depends on the queue's use alone, so it is kept per use."""
        if len(leaf.users) == 1:
            used, guar = leaf.used_mem, leaf.guar_mem
            asking = is_active_user(leaf.demand_apps + len(leaf.waiting))
            if (
                leaf.limit_for_used == used
                and leaf.limit_for_guar == guar
                and leaf.limit_for_asking == asking
            ):
                return leaf.limit_value
            value = self._compute_user_limit_memory(leaf)
            leaf.limit_for_used, leaf.limit_for_guar, leaf.limit_for_asking = used, guar, asking
            leaf.limit_value = value
            return value
        return self._compute_user_limit_memory(leaf)

    def _compute_user_limit_memory(self, leaf: LeafQueue) -> float:
        """semantics.capacity.user_limit over the leaf's active users."""
        active_used = 0
        count = 0
        for user in leaf.users.values():
            if self._active(user):
                active_used += user.used_mem
                count += 1
        return user_limit(
            guaranteed=leaf.guar_mem,
            queue_used=leaf.used_mem,
            active_used=active_used,
            active_users=count,
            minimum_user_limit_percent=leaf.minimum_user_limit,
            user_limit_factor=leaf.user_limit_factor,
            queue_maximum=leaf.max_mem,
            step=self.step_mem,
        )

    def _user_cap(self, leaf: LeafQueue, capacity: tuple[float, float]) -> tuple[float, float]:
        factor = leaf.user_limit_factor
        if factor == -1:  # -1 disables the factor (3.4): the queue's maximum caps the user
            return leaf.max_mem, leaf.max_vc
        return math.floor(capacity[0] * factor), math.floor(capacity[1] * factor)

    # ------------------------------------------------------------------ comparisons

    def _greater(self, a_mem: float, a_vc: float, b_mem: float, b_vc: float) -> bool:
        if self.memory_only:
            return a_mem > b_mem
        return self._shares(a_mem, a_vc) > self._shares(b_mem, b_vc)

    def _shares(self, memory: float, vcores: float) -> tuple[float, float]:
        """DominantResourceCalculator's order: the larger share, then the other."""
        mem_share = memory / self.cluster_mem if self.cluster_mem else 0.0
        vc_share = vcores / self.cluster_vc if self.cluster_vc else 0.0
        return (mem_share, vc_share) if mem_share >= vc_share else (vc_share, mem_share)

    def _dominant(self, memory: float, vcores: float) -> float:
        return self._shares(memory, vcores)[0]

    def _max_of(self, a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
        return a if self._greater(*a, *b) else b

    def _min_of(self, a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
        return b if self._greater(*a, *b) else a

    # ------------------------------------------------------------------ preemption

    @property
    def default_monitor_interval_s(self) -> float:
        return DEFAULT_MONITOR_INTERVAL_S

    def preemption_claims(self, now: float) -> list[Claim]:
        """ProportionalCapacityPreemptionPolicy, on memory: each leaf's ideal share
        is the guarantee-weighted water-fill of what queues use and ask (capped by
        maximum capacity); leaves over ``ideal x (1 + max_ignored_over_capacity)``
        give back ``natural_termination_factor`` of the excess, all claims together
        at most ``total_preemption_per_round`` of the cluster."""
        ideal = ideal_shares(self.root, self.cluster_mem)
        claims = [self._claim(leaf, ideal[leaf.path], self.preemption) for leaf in self.leaves]
        wanted = [c for c in claims if c is not None]
        return _cap_round(wanted, self.preemption.total_preemption_per_round * self.cluster_mem)

    def _claim(self, leaf: LeafQueue, ideal: float, options: PreemptionOptions) -> Claim | None:
        if leaf.used_mem <= ideal * (1 + options.max_ignored_over_capacity):
            return None
        take = (leaf.used_mem - ideal) * options.natural_termination_factor
        take_vc = take * leaf.used_vc / leaf.used_mem if leaf.used_mem else 0.0
        return Claim(leaf, math.ceil(take), math.ceil(take_vc))


def _cap_round(claims: list[Claim], allowed: float) -> list[Claim]:
    total = sum(c.memory for c in claims)
    if total <= allowed or total == 0:
        return claims
    scale = allowed / total
    return [Claim(c.leaf, math.ceil(c.memory * scale), math.ceil(c.vcores * scale)) for c in claims]


def _heartbeat_limit(config: CapacitySchedulerConfig, options: SimulationOptions) -> int:
    """semantics.capacity.heartbeat_assignments, unless the options fix the count."""
    if options.max_assignments_per_heartbeat is not None:
        return options.max_assignments_per_heartbeat
    raw = config.global_value(MAX_ASSIGNMENTS)
    raw_off = config.global_value(MAX_OFFSWITCH)
    return heartbeat_assignments(
        multiple_enabled=(config.global_value(MULTIPLE_ASSIGNMENTS) or "true").strip().lower()
        == "true",
        maximum_assignments=None if raw is None else int(raw),
        off_switch_only=options.off_switch_requests,
        maximum_offswitch=None if raw_off is None else int(raw_off),
    )


def _guarantees(
    parent_mem: float, parent_vc: float, confs: list[CapacityQueue]
) -> list[tuple[float, float]]:
    """Absolute first, then percentages of the parent's guarantee, then weights share
    what is left (unrounded)."""
    fixed: list[tuple[float, float] | None] = []
    for conf in confs:
        capacity = conf.capacity
        if isinstance(capacity, AbsoluteCapacity):
            fixed.append((float(capacity.resources.memory_mb), float(capacity.resources.vcores)))
        elif isinstance(capacity, Weight):
            fixed.append(None)
        else:
            percent = capacity.percent if isinstance(capacity, Percentage) else 0.0
            fixed.append((parent_mem * percent / 100, parent_vc * percent / 100))
    left_mem = max(0.0, parent_mem - sum(f[0] for f in fixed if f))
    left_vc = max(0.0, parent_vc - sum(f[1] for f in fixed if f))
    weights = [c.capacity.weight if isinstance(c.capacity, Weight) else 0.0 for c in confs]
    total_weight = sum(weights)
    return [
        f if f is not None else _weighted(left_mem, left_vc, w, total_weight)
        for f, w in zip(fixed, weights, strict=True)
    ]


def _weighted(memory: float, vcores: float, weight: float, total: float) -> tuple[float, float]:
    share = weight / total if total > 0 else 0.0
    return memory * share, vcores * share


def _maximum(parent: QueueNode, conf: CapacityQueue) -> tuple[float, float]:
    maximum = conf.maximum_capacity
    if isinstance(maximum, Percentage):
        return parent.max_mem * maximum.percent / 100, parent.max_vc * maximum.percent / 100
    if isinstance(maximum, AbsoluteCapacity):
        res = maximum.resources
        return min(float(res.memory_mb), parent.max_mem), min(float(res.vcores), parent.max_vc)
    return parent.max_mem, parent.max_vc
