"""Fair Scheduler semantics (Hadoop 3.3/3.4 FairScheduler), simplified where the
docstrings say so. The decisions themselves are :mod:`yarn_adapt.semantics.fair`'s
(through :mod:`.semantics_fair`); this module walks the tree and keeps the books.

* A node heartbeat walks the tree: each parent tries its children in the order of
  its policy's comparator, each leaf its runnable apps in the order of its own
  (FSParentQueue / FSLeafQueue.assignContainer). Comparators:
  ``fair`` (FairSharePolicy, memory): queues with demand first, then those below
  ``min(minResources, demand)`` by usage / min share, then usage / weight, then
  start time and name; ``drf`` (DominantResourceFairnessComparator2): needy when the
  dominant resource's usage is below its min share (not capped by demand), then
  by the dominant share / weight, ties by the other resource; ``fifo`` (apps only):
  priority, then start time.
* A queue is tried only while its usage fits its maxResources, and a container only
  if usage plus the container fits maxResources of the queue and every ancestor
  (assignContainerPreCheck, fitsInMaxShare).
* Instantaneous fair shares (ComputeFairShares) divide the parent's share among
  *active* children (those with running apps) by weight within min/max resources;
  ``fair`` computes memory only, ``drf`` each resource. They decide maxAMShare and
  preemption only, as in YARN.
* maxAMShare (FSLeafQueue.canRunAppAM): an AM starts only while the queue's AM
  usage plus it fits ``fair share x maxAMShare`` (a zero fair share falls back to
  ``min(cluster available, maxResources)``); -1 disables the check.
* maxRunningApps on a queue or any ancestor and ``userMaxAppsDefault`` keep apps
  non-runnable; when an app ends, waiting apps become runnable in start order
  (MaxRunningAppsEnforcer).
* Apps submitted to a queue the file does not define get a new leaf under root
  (the default placement rule ``specified`` with ``create=true``).
* One container per heartbeat unless ``fair_assign_multiple`` (then ``maxassign``,
  or half the node's free resources with ``dynamic.max.assign``).

Not modelled: reservations, app weights other than 1 (sizebasedweight), user
elements other than ``userMaxAppsDefault``, queue placement rules other than the
default, ``maxChildResources``, app-level fair shares (starvation is judged per
queue).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from yarn_adapt.model.fair import FairQueue, FairSchedulerConfig, parse_fair_resources
from yarn_adapt.model.resources import Resources
from yarn_adapt.sim.spec import PreemptionOptions, SimulationOptions

from .semantics_fair import (
    can_app_be_runnable,
    drf_app_key,
    drf_key,
    fair_share_key,
    fair_shares,
    fits_max_share,
    heartbeat_assignments,
    keep_assigning,
    max_am_share_allows,
)
from .state import (
    NO_DEMAND,
    NO_FIT,
    UNLIMITED,
    Claim,
    LeafQueue,
    QueueNode,
    SchedulerModel,
    SimApp,
)

DEFAULT_MONITOR_INTERVAL_S = 0.5  # yarn.scheduler.fair.update-interval-ms
_ELEMENTS = {
    "min": ("minSharePreemptionTimeout", "defaultMinSharePreemptionTimeout"),
    "fair": ("fairSharePreemptionTimeout", "defaultFairSharePreemptionTimeout"),
    "threshold": ("fairSharePreemptionThreshold", "defaultFairSharePreemptionThreshold"),
}

QueueKey = tuple[float, float, float, float]  # semantics.fair.fair_share_key / drf_key


class FairModel(SchedulerModel):
    def __init__(self, config: FairSchedulerConfig, options: SimulationOptions) -> None:
        self.config = config
        self.options = options
        self._nodes: dict[str, QueueNode] = {}
        self._conf: dict[str, FairQueue] = {}
        root = self._build(config.root, None, 0)
        leaves = [q for q in self._nodes.values() if isinstance(q, LeafQueue)]
        super().__init__(leaves, root)
        self._limit = _heartbeat_limit(options)
        self.caps_heartbeat_amount = (
            options.fair_assign_multiple and options.fair_dynamic_max_assign
        )
        self._user_running: dict[str, int] = {}
        self._user_max = _float_or(config.default("userMaxAppsDefault"), UNLIMITED)
        self._shares_dirty = True
        self._fit_blocked = False
        self._starved_since: dict[tuple[str, str], float] = {}
        self._elements: dict[tuple[str, str], str | None] = {}

    # ------------------------------------------------------------------ build

    def _build(self, conf: FairQueue, parent: QueueNode | None, position: int) -> QueueNode:
        leaf = conf.is_leaf and parent is not None
        node = (
            LeafQueue(conf.path, parent, position)
            if leaf
            else QueueNode(conf.path, parent, position)
        )
        self._nodes[conf.path] = node
        self._conf[conf.path] = conf
        node.weight = conf.effective_weight
        policy = self.config.effective_policy(conf)
        node.policy = "fair" if policy == "fifo" and not leaf else policy
        node.max_running = self._max_running(conf)
        if isinstance(node, LeafQueue):
            node.link()
            node.am_percent = self.config.effective_max_am_share(conf)
        if parent is not None:
            parent.children.append(node)
            _rank_by_name(parent.children)
        for index, child in enumerate(conf.children):
            self._build(child, node, index)
        return node

    def _max_running(self, conf: FairQueue) -> float:
        if conf.max_running_apps is not None:
            return float(conf.max_running_apps)
        return _float_or(self.config.default("queueMaxAppsDefault"), UNLIMITED)

    def find_leaf(self, queue: str) -> LeafQueue | None:
        path = queue if queue == "root" or queue.startswith("root.") else f"root.{queue}"
        node = self._nodes.get(path)
        if node is None:
            conf = self.config.find_leaf_by_name(queue)
            node = self._nodes.get(conf.path) if conf else self._create_leaf(path)
        return node if isinstance(node, LeafQueue) else None

    def _create_leaf(self, path: str) -> QueueNode | None:
        parent = self._nodes.get(path.rsplit(".", 1)[0])
        if parent is None or isinstance(parent, LeafQueue):
            return None
        conf = FairQueue(path)
        node = self._build(conf, parent, len(parent.children))
        assert isinstance(node, LeafQueue)
        self.leaves = (*self.leaves, node)
        self.resize(self.cluster_mem, self.cluster_vc)
        return node

    # ------------------------------------------------------------------ resources

    def resize(self, memory: int, vcores: int) -> None:
        super().resize(memory, vcores)
        for path, node in self._nodes.items():
            self._resolve(node, self._conf[path])
        self._shares_dirty = True

    def _resolve(self, node: QueueNode, conf: FairQueue) -> None:
        cluster = Resources(self.cluster_mem, self.cluster_vc)
        if conf.min_resources is not None:
            minimum = conf.min_resources.resolve(cluster)
            node.guar_mem, node.guar_vc = float(minimum.memory_mb), float(minimum.vcores)
        maximum = conf.max_resources
        default_max = self.config.default("queueMaxResourcesDefault")
        if maximum is None and default_max is not None and node.parent is not None:
            maximum = parse_fair_resources(default_max)
        if maximum is not None:
            resolved = maximum.resolve(cluster)
            node.max_mem, node.max_vc = float(resolved.memory_mb), float(resolved.vcores)

    def _update_shares(self) -> None:
        if not self._shares_dirty:
            return
        self._shares_dirty = False
        root = self.root
        root.fair_mem, root.fair_vc = float(self.cluster_mem), float(self.cluster_vc)
        self._share_children(root)

    def _share_children(self, parent: QueueNode) -> None:
        children = parent.children
        if not children:
            return
        active = [c for c in children if c.running_apps > 0]
        for child in children:
            child.fair_mem = child.fair_vc = 0.0
        if active:
            self._split(parent, active)
        for child in children:
            self._share_children(child)

    def _split(self, parent: QueueNode, active: list[QueueNode]) -> None:
        weights = [c.weight for c in active]
        memory = fair_shares(
            weights, [c.guar_mem for c in active], [c.max_mem for c in active], parent.fair_mem
        )
        vcores = (
            fair_shares(
                weights, [c.guar_vc for c in active], [c.max_vc for c in active], parent.fair_vc
            )
            if parent.policy == "drf"
            else [0.0] * len(active)
        )
        for child, share_mem, share_vc in zip(active, memory, vcores, strict=True):
            child.fair_mem, child.fair_vc = share_mem, share_vc

    # ------------------------------------------------------------------ runnable apps

    def admit(self, app: SimApp) -> str:
        leaf = app.leaf
        assert leaf is not None
        leaf.apps[app.index] = app
        if self._can_run(app):
            self._run(app)
        else:
            leaf.waiting.append(app)
        return ""

    def adopt_running(self, app: SimApp) -> None:
        assert app.leaf is not None
        app.leaf.apps[app.index] = app
        self._run(app)

    def remove(self, app: SimApp) -> None:
        leaf = app.leaf
        assert leaf is not None
        leaf.apps.pop(app.index, None)
        if app in leaf.waiting:
            leaf.waiting.remove(app)
            return
        if app.am_batch is not None:
            leaf.am_used_mem -= app.am_mem
            leaf.am_used_vc -= app.am_vc
        self.drop_schedulable(app)
        for queue in leaf.chain:
            queue.running_apps -= 1
        self._user_running[app.user] -= 1
        self._shares_dirty = True
        self._promote_waiting()

    def _can_run(self, app: SimApp) -> bool:
        """semantics.fair.can_app_be_runnable (maxRunningApps)."""
        assert app.leaf is not None
        return can_app_be_runnable(
            self._user_running.get(app.user, 0),
            self._user_max,
            [(q.running_apps, q.max_running) for q in app.leaf.chain],
        )

    def _run(self, app: SimApp) -> None:
        assert app.leaf is not None
        for queue in app.leaf.chain:
            queue.running_apps += 1
        self._user_running[app.user] = self._user_running.get(app.user, 0) + 1
        self._shares_dirty = True
        self.make_schedulable(app)

    def _promote_waiting(self) -> None:
        waiting = sorted(
            (app for leaf in self.leaves for app in leaf.waiting),
            key=lambda a: (a.submit_s, a.index),
        )
        for app in waiting:
            if self._can_run(app):
                assert app.leaf is not None
                app.leaf.waiting.remove(app)
                self._run(app)

    def _demand_changed(self, app: SimApp, has_demand: bool) -> None:
        """Nothing to keep: the Fair Scheduler sorts apps on every assignment."""

    def charge(self, app: SimApp, memory: int, vcores: int, is_am: bool) -> None:
        super().charge(app, memory, vcores, is_am)
        if is_am and memory > 0:
            assert app.leaf is not None
            app.leaf.am_used_mem += memory
            app.leaf.am_used_vc += vcores

    # ------------------------------------------------------------------ choosing

    def heartbeat_limit(self) -> int:
        return self._limit

    def keep_assigning(self, granted: tuple[int, int], start_free: tuple[int, int]) -> bool:
        if not self.options.fair_dynamic_max_assign or not self.options.fair_assign_multiple:
            return True
        return keep_assigning(granted, start_free)

    def choose(self, free_mem: int, free_vc: int) -> SimApp | int:
        if self.root.demand_apps == 0:
            return NO_DEMAND
        self._fit_blocked = False
        self._update_shares()
        app = self._assign(self.root, free_mem, free_vc)
        if app is not None:
            return app
        return NO_FIT if self._fit_blocked else NO_DEMAND

    def _assign(self, queue: QueueNode, free_mem: int, free_vc: int) -> SimApp | None:
        if queue.used_mem > queue.max_mem or queue.used_vc > queue.max_vc:
            return None
        if isinstance(queue, LeafQueue):
            return self._assign_leaf(queue, free_mem, free_vc)
        children = [c for c in queue.children if c.demand_apps > 0]
        if len(children) > 1:
            policy = queue.policy
            children.sort(key=lambda c: self._queue_key(c, policy))
        for child in children:
            app = self._assign(child, free_mem, free_vc)
            if app is not None:
                return app
        return None

    def _assign_leaf(self, leaf: LeafQueue, free_mem: int, free_vc: int) -> SimApp | None:
        apps = list(leaf.demand.values())
        if len(apps) > 1:
            apps.sort(key=self._app_order(leaf.policy))
        for app in apps:
            want_mem, want_vc = app.request
            if app.awaiting_am and not self._can_run_am(leaf, want_mem, want_vc):
                continue
            if not _fits_max_share(leaf, want_mem, want_vc):
                continue
            if want_mem > free_mem or want_vc > free_vc:
                self._fit_blocked = True
                continue
            return app
        return None

    def _can_run_am(self, leaf: LeafQueue, memory: int, vcores: int) -> bool:
        """semantics.fair.max_am_share_allows (FSLeafQueue.canRunAppAM)."""
        return max_am_share_allows(
            am_used=(leaf.am_used_mem, leaf.am_used_vc),
            am_request=(memory, vcores),
            fair_share=(leaf.fair_mem, leaf.fair_vc),
            max_share=(leaf.max_mem, leaf.max_vc),
            available=(self.cluster_mem - self.root.used_mem, self.cluster_vc - self.root.used_vc),
            max_am_share=leaf.am_percent,
        )

    def _queue_key(self, queue: QueueNode, policy: str) -> QueueKey:
        """semantics.fair.fair_share_key (FairSharePolicy, on memory; the demand is
        capped by maxResources as FSQueue.getDemand is) or semantics.fair.drf_key
        (DominantResourceFairnessComparator2); the last tie-break is the queue's
        name (start times are all 0)."""
        if policy == "drf":
            return drf_key(
                used=(queue.used_mem, queue.used_vc),
                min_share=(queue.guar_mem, queue.guar_vc),
                cluster=(self.cluster_mem, self.cluster_vc),
                weight=queue.weight,
                position=queue.name_rank,
            )
        return fair_share_key(
            used=queue.used_mem,
            demand=min(queue.used_mem + queue.pending_mem, queue.max_mem),
            min_share=queue.guar_mem,
            weight=queue.weight,
            position=queue.name_rank,
        )

    def _app_order(self, policy: str) -> Callable[[SimApp], tuple[float, ...]]:
        if policy == "fifo":
            return lambda a: (-a.priority, a.submit_s, a.index)
        if policy == "drf":
            cluster = (self.cluster_mem, self.cluster_vc)
            return lambda a: drf_app_key(
                used=(a.used_mem, a.used_vc), cluster=cluster, start=a.submit_s, index=a.index
            )
        return lambda a: (a.used_mem, a.submit_s, a.index)

    # ------------------------------------------------------------------ preemption

    @property
    def default_monitor_interval_s(self) -> float:
        return DEFAULT_MONITOR_INTERVAL_S

    def preemption_claims(self, now: float) -> list[Claim]:
        """Starved leaves' deficits, taken from leaves above their fair share (most
        over first), never pushing a victim below its fair share."""
        self._update_shares()
        wanted = sum(self._starvation(leaf, now) for leaf in self.leaves)
        if wanted <= 0:
            return []
        over = [leaf for leaf in self.leaves if leaf.used_mem > leaf.fair_mem]
        over.sort(key=lambda q: q.used_mem - q.fair_mem, reverse=True)
        claims = []
        for leaf in over:
            take = min(wanted, leaf.used_mem - leaf.fair_mem)
            take_vc = take * leaf.used_vc / leaf.used_mem if leaf.used_mem else 0.0
            claims.append(Claim(leaf, math.ceil(take), math.ceil(take_vc)))
            wanted -= take
            if wanted <= 0:
                break
        return claims

    def _starvation(self, leaf: LeafQueue, now: float) -> float:
        options = self.options.preemption
        demand = min(leaf.used_mem + leaf.pending_mem, leaf.max_mem)
        min_deficit = max(0.0, min(leaf.guar_mem, demand) - leaf.used_mem)
        threshold = self._setting(leaf, "threshold", options.fair_share_threshold)
        below_fair = leaf.used_mem < threshold * leaf.fair_mem and demand > leaf.used_mem
        fair_deficit = max(0.0, min(leaf.fair_mem, demand) - leaf.used_mem) if below_fair else 0.0
        min_starved = self._starved_for(leaf, "min", min_deficit > 0, now)
        fair_starved = self._starved_for(leaf, "fair", fair_deficit > 0, now)
        return max(
            min_deficit if min_starved >= self._timeout(leaf, "min", options) else 0.0,
            fair_deficit if fair_starved >= self._timeout(leaf, "fair", options) else 0.0,
        )

    def _starved_for(self, leaf: LeafQueue, kind: str, starved: bool, now: float) -> float:
        key = (leaf.path, kind)
        if not starved:
            self._starved_since[key] = now
            return 0.0
        return now - self._starved_since.setdefault(key, now)

    def _timeout(self, leaf: LeafQueue, kind: str, options: PreemptionOptions) -> float:
        fallback = options.min_share_timeout_s if kind == "min" else options.fair_share_timeout_s
        return self._setting(leaf, kind, math.inf if fallback is None else fallback)

    def _setting(self, leaf: LeafQueue, kind: str, fallback: float) -> float:
        raw = self._element(leaf, kind)
        return fallback if raw is None else float(raw)

    def _element(self, leaf: LeafQueue, kind: str) -> str | None:
        """The queue's element, inherited from ancestors, else the file default
        (timeouts are seconds in the allocation file); looked up once."""
        key = (leaf.path, kind)
        if key not in self._elements:
            self._elements[key] = self._find_element(leaf, kind)
        return self._elements[key]

    def _find_element(self, leaf: LeafQueue, kind: str) -> str | None:
        own, default = _ELEMENTS[kind]
        for queue in leaf.chain:
            conf = self._conf[queue.path]
            found = next((v for k, v in conf.other_elements if k == own), None)
            if found is not None:
                return found
        return self.config.default(default)


def _rank_by_name(siblings: list[QueueNode]) -> None:
    """Each sibling's place in name order: the comparators' last tie-break
    (Schedulable names, after start times, all 0 for queues)."""
    for rank, node in enumerate(sorted(siblings, key=lambda q: q.name)):
        node.name_rank = rank


def _fits_max_share(leaf: LeafQueue, memory: int, vcores: int) -> bool:
    """semantics.fair.fits_max_share of the leaf and every ancestor."""
    for q in leaf.chain:
        if not fits_max_share(q.used_mem, q.used_vc, memory, vcores, q.max_mem, q.max_vc):
            return False
    return True


def _heartbeat_limit(options: SimulationOptions) -> int:
    """semantics.fair.heartbeat_assignments, unless the options fix the count."""
    if options.max_assignments_per_heartbeat is not None:
        return options.max_assignments_per_heartbeat
    return heartbeat_assignments(
        assign_multiple=options.fair_assign_multiple,
        max_assign=options.fair_max_assign,
        dynamic=options.fair_dynamic_max_assign,
    )


def _float_or(raw: str | None, fallback: float) -> float:
    return fallback if raw is None else float(raw)
