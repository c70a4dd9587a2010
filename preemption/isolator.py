"""The isolation loop on one node: observe, decide (:mod:`preemption.isolation`), act.

Every interval in which the agent trusts its NodeManager, :class:`NodeIsolator`:

1. **observes** the node's CPU ticks (``/proc/stat`` over ``[suppress] cpus``) and
   memory (``/proc/meminfo``) through :class:`~preemption.nodestat.NodeStat`, and
   batch's own counters: the agent's hierarchy (process-tree mode) or each listed
   batch container's cgroup (LinuxContainerExecutor);
2. **decides** where batch's caps go and what they are (:meth:`NodeIsolator.plan`):

   * *agent-hierarchy* mode, when ``[discovery] agent_hierarchy`` exists and holds
     nothing but the batch containers the agent adopted (no process of its own, no
     cgroup the state file does not list): the hierarchy gets batch's weight, the
     suppress quota, the memory cap and the cpuset; each container below it the same
     quota as a ceiling (cgroup v1 refuses a child quota above its parent's);
   * *per-container* mode otherwise (LCE cgroups, or a hierarchy that holds anything
     else, which is then left alone and said why once): each listed batch container
     gets batch's weight, its share of the quota by vcores, its memory cap and the
     cpuset. Latency-critical containers never get anything. A container's weight
     ranks it only among YARN's containers: services outside YARN meet YARN's
     hierarchy at *its* weight. So with LCE cgroups (``yarn_hierarchy``) the hierarchy
     itself gets batch's weight as well, while it holds nothing but listed batch
     containers (no process of its own, no other cgroup, a latency-critical
     container's included); otherwise its original weight is put back and the reason
     said once.

3. **acts**: the hierarchy's files through :func:`~preemption.node.apply_limit` (each
   original journalled first, only differences written), before the containers'
   when its quota rises and after them when it falls, so a child's quota never
   exceeds its parent's; the containers' caps are written by
   :class:`~preemption.node.NodeReclaimer` with their squeeze (the stricter of the
   two); the services' ``memory.low`` (v2) under memory pressure; and, only with
   ``[yarn] kill`` allowing kills, the memory eviction.

Nothing here raises for one cgroup: a failure is an :class:`~preemption.node.Event`
(logged and counted by the agent); a missing ``/proc`` counter holds the last quota.
What it did is an :class:`IsolationReport` (metrics, the status file).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from preemption.cgroups.base import MIB, Cgroup, CgroupBackend, MemoryPolicy, Usage, page_aligned
from preemption.cgroups.caps import (
    NO_CAPS,
    V1_LOWEST_SHARES,
    V2_LOWEST_WEIGHT,
    Caps,
    lowered_weight,
    quota_ratio,
)
from preemption.errors import CgroupError, CgroupVanished, KillFailed, NodeStatError
from preemption.isolation import (
    CpuUse,
    EvictionRules,
    EvictionState,
    MemoryHolder,
    MemoryInfo,
    MemorySettings,
    PrioritySettings,
    QuotaStep,
    SuppressSettings,
    batch_budget,
    cpu_list,
    memory_victim,
    next_quota,
    split_quota,
    track_pressure,
    under_pressure,
)
from preemption.model import NOTHING
from preemption.node import (
    ContainerCaps,
    Event,
    Killer,
    ManagedContainer,
    apply_limit,
    desired_for,
)
from preemption.nodestat import CpuTicks, NodeStat, used_millicores
from preemption.statefile import StateJournal, put_back

log = logging.getLogger(__name__)

AGENT_HIERARCHY = "agent-hierarchy"
PER_CONTAINER = "per-container"
OFF = "off"
MEMORY_LOW_DEAD_BAND = 16 * MIB  # a service's memory.low is rewritten when it moves more


@dataclass(frozen=True, kw_only=True)
class IsolationSettings:
    priority: PrioritySettings = field(default_factory=PrioritySettings)
    suppress: SuppressSettings = field(default_factory=SuppressSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    eviction: EvictionRules = field(default_factory=EvictionRules)
    agent_hierarchy: str = "yarn-adapt"
    per_container_only: bool = False  # [discovery] source = "cgroup": no agent hierarchy
    # LCE cgroups: YARN's hierarchy, weighed too while it holds only listed batch
    yarn_hierarchy: str = ""
    memory_policy: MemoryPolicy = field(default_factory=MemoryPolicy)

    @property
    def active(self) -> bool:
        return self.priority.enabled or self.suppress.enabled or self.memory.enabled


@dataclass(frozen=True)
class IsolationPlan:
    """This interval's caps: per container, and on the agent's hierarchy (``parent``)."""

    mode: str
    containers: Mapping[str, ContainerCaps]
    parent: Cgroup | None = None
    parent_caps: Caps = NO_CAPS
    parent_first: bool = False
    use: CpuUse | None = None
    step: QuotaStep | None = None
    memory: MemoryInfo | None = None
    pressure: bool = False
    refused: str | None = None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class IsolationReport:
    """What the isolation loop did this interval (metrics, status file, logs)."""

    mode: str
    quota_millicores: int | None
    step: QuotaStep | None
    use: CpuUse | None
    weighted_groups: int
    memory: MemoryInfo | None
    pressure: bool
    memory_capped_groups: int
    services_protected: int
    refused: str | None
    events: tuple[Event, ...]


OFF_REPORT = IsolationReport(OFF, None, None, None, 0, None, False, 0, 0, None, ())


class NodeIsolator:
    """Holds the suppress quota, the memory-pressure state and the counters between
    intervals."""

    def __init__(
        self,
        backend: CgroupBackend,
        journal: StateJournal,
        killer: Killer,
        settings: IsolationSettings,
        *,
        nodestat: NodeStat | None = None,
        extra_keys: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.journal = journal
        self.killer = killer
        self.settings = settings
        self.nodestat = nodestat or NodeStat()
        self.extra_keys = extra_keys
        self.clock = clock
        self.quota: int | None = None
        self.pressure = False
        self.frozen: dict[str, int] = {}  # relpath -> MiB it held when the pressure began
        self.eviction = EvictionState()
        self._ticks: CpuTicks | None = None
        self._batch_ns: dict[str, int] = {}
        self._read_at: float | None = None
        self._said: set[str] = set()
        self._services_protected = 0
        self.yarn_weighed = False  # YARN's hierarchy has batch's weight (LCE cgroups)
        self.batch_cpus = batch_cpuset(settings, self.nodestat)

    # ----------------------------------------------------------------- plan

    def plan(self, containers: Sequence[ManagedContainer]) -> IsolationPlan:
        """Observe and decide; nothing is written."""
        if not self.settings.active:
            return IsolationPlan(OFF, {})
        problems: list[str] = []
        mode, parent, refused = self._mode(containers)
        groups = [parent] if parent is not None else [c.group for c in containers]
        readings = self._usage(groups)
        use = self._cpu_use(readings, problems)
        step = self._suppress(use)
        memory = self._memory(readings, problems)
        caps, parent_caps = self._caps(mode, parent, containers)
        first = parent is not None and self._parent_rises(parent, parent_caps, readings)
        return IsolationPlan(
            mode, caps, parent, parent_caps, first, use, step, memory, self.pressure,
            refused, tuple(problems),
        )  # fmt: skip

    def _mode(
        self, containers: Sequence[ManagedContainer]
    ) -> tuple[str, Cgroup | None, str | None]:
        """The agent's hierarchy when it holds only the batch it adopted; else each
        container (with the reason the hierarchy was not used, if it exists)."""
        if self.settings.per_container_only:
            return PER_CONTAINER, None, None
        parent = Cgroup(self.settings.agent_hierarchy.strip("/"))
        try:
            if not self.backend.exists(parent):
                return PER_CONTAINER, None, None
        except CgroupError as error:
            return PER_CONTAINER, None, error.one_line()
        outside = [c for c in containers if not c.group.relpath.startswith(parent.relpath + "/")]
        if outside:
            return PER_CONTAINER, None, f"batch container {outside[0].container_id} is outside it"
        foreign = self._foreign(parent)
        if foreign is not None:
            return PER_CONTAINER, None, foreign
        return AGENT_HIERARCHY, parent, None

    def _children(self, group: Cgroup) -> tuple[list[Cgroup], str]:
        """``group``'s child cgroups, or why it holds more than cgroups (processes of
        its own, or an unreadable group)."""
        try:
            pids = self.backend.pids(group)
            children = list(self.backend.children(group))
        except CgroupError as error:
            return [], error.one_line()
        if pids:
            return [], f"{group.relpath} holds processes of its own (pid {pids[0]})"
        return children, ""

    def _foreign(self, parent: Cgroup) -> str | None:
        """Why ``parent`` holds more than the agent's own batch cgroups, or None."""
        children, why = self._children(parent)
        if why:
            return why
        strangers = [child.relpath for child in children if not self.journal.owns(child)]
        if strangers:
            return f"{parent.relpath} holds a cgroup the agent did not make: {strangers[0]}"
        return None

    def _usage(self, groups: Sequence[Cgroup]) -> dict[str, Usage]:
        readings: dict[str, Usage] = {}
        for group in groups:
            try:
                readings[group.relpath] = self.backend.usage(group)
            except CgroupError:
                continue  # vanished or unreadable: the reclaimer reports it
        return readings

    def _cpu_use(self, readings: Mapping[str, Usage], problems: list[str]) -> CpuUse | None:
        """The node's and batch's CPU use since the last interval (None the first time,
        or when /proc/stat could not be read)."""
        if not self.settings.suppress.enabled:
            return None
        try:
            ticks = self.nodestat.cpu(self.settings.suppress.cpus)
        except NodeStatError as error:
            problems.append(error.one_line())
            return None
        now = self.clock()
        batch_ns = {relpath: usage.cpu_usage_ns for relpath, usage in readings.items()}
        previous, previous_ns, read_at = self._ticks, self._batch_ns, self._read_at
        self._ticks, self._batch_ns, self._read_at = ticks, batch_ns, now
        if previous is None or read_at is None or now <= read_at:
            return None
        used_ns = sum(
            max(0, ns - previous_ns[relpath])
            for relpath, ns in batch_ns.items()
            if relpath in previous_ns
        )
        batch = used_ns / 1e6 / (now - read_at)
        return CpuUse(ticks.cpus * 1000, used_millicores(previous, ticks), batch)

    def _suppress(self, use: CpuUse | None) -> QuotaStep | None:
        if use is None:
            return None
        suppress = self.settings.suppress
        budget = batch_budget(use, suppress)
        step = next_quota(self.quota, budget, use.capacity_millicores, suppress)
        self.quota = step.quota_millicores
        return step

    def _memory(self, readings: Mapping[str, Usage], problems: list[str]) -> MemoryInfo | None:
        if not self.settings.memory.enabled:
            return None
        try:
            info = self.nodestat.memory()
        except NodeStatError as error:
            problems.append(error.one_line())
            return None
        self.pressure = under_pressure(self.pressure, info, self.settings.memory)
        if not self.pressure:
            self.frozen.clear()
            return info
        self.frozen = {
            relpath: self.frozen.get(relpath, math.ceil(usage.memory_bytes / MIB))
            for relpath, usage in readings.items()
        }  # what each batch cgroup held when the pressure began (or it appeared)
        return info

    def _caps(
        self, mode: str, parent: Cgroup | None, containers: Sequence[ManagedContainer]
    ) -> tuple[dict[str, ContainerCaps], Caps]:
        priority = self.settings.priority
        fraction = priority.weight_fraction if priority.enabled else None
        weights = {c.container_id: _vcore_weight(c) for c in containers}
        shares = split_quota(self.quota, weights) if self.quota is not None else {}
        if parent is not None:
            parent_caps = Caps(self.quota, fraction, self._memory_cap(parent), self.batch_cpus)
            ceiling = Caps(cpu_millicores=self.quota)
            below = {c.container_id: ContainerCaps(ceiling, shares.get(c.container_id))
                     for c in containers}  # fmt: skip
            return below, parent_caps
        each = {}
        for c in containers:
            share = shares.get(c.container_id)
            own = Caps(share, fraction, self._memory_cap(c.group), self.batch_cpus)
            each[c.container_id] = ContainerCaps(own, share)
        return each, NO_CAPS

    def _memory_cap(self, group: Cgroup) -> int | None:
        return self.frozen.get(group.relpath) if self.pressure else None

    def _parent_rises(self, parent: Cgroup, caps: Caps, readings: Mapping[str, Usage]) -> bool:
        """True when the hierarchy's quota is to rise (it goes before its children)."""
        try:
            current = self._values(parent)
        except CgroupError:
            return False
        usage = readings.get(parent.relpath, Usage(0, 0))
        desired = desired_for(
            self.backend, self.journal, parent, NOTHING, NOTHING, current, usage, caps,
            self.settings.memory_policy,
        )  # fmt: skip
        return quota_ratio(desired) >= quota_ratio(current)

    def _values(self, group: Cgroup) -> dict[str, str]:
        keys = (*self.backend.read_keys, *self.extra_keys)
        return {key: self.backend.read(group, key) for key in keys}

    # ----------------------------------------------------------------- act

    def before_children(self, plan: IsolationPlan) -> list[Event]:
        """The hierarchy's files, when its quota rises (before its children's)."""
        if plan.parent is None or not plan.parent_first:
            return []
        return self._apply_parent(plan.parent, plan.parent_caps)

    def after_children(
        self,
        now_s: float,
        plan: IsolationPlan,
        containers: Sequence[ManagedContainer],
        latency_critical: Collection[str] = (),
    ) -> list[Event]:
        """The hierarchy's files (or its originals back when it is not used), YARN's
        hierarchy's weight (``latency_critical``: the listed latency-critical
        containers), the services' memory protection, and the memory eviction."""
        events = [Event("error", "", problem) for problem in plan.problems]
        if plan.parent is not None:
            events += self._apply_parent(plan.parent, plan.parent_caps)
        else:
            events += self._release_parent()
        events += self._weigh_yarn(plan, containers, latency_critical)
        events += self._protect_services(plan.pressure)
        events += self._evict(now_s, plan, containers)
        return events

    def _apply_parent(self, parent: Cgroup, caps: Caps) -> list[Event]:
        try:
            current = self._values(parent)
            usage = self.backend.usage(parent)
            apply_limit(
                self.backend, self.journal, parent, NOTHING, NOTHING, current, usage, caps,
                self.settings.memory_policy,
            )  # fmt: skip
        except CgroupVanished:
            self.journal.forget_values(parent)
            return []
        except CgroupError as error:
            return [Event("error", "", f"batch hierarchy: {error.one_line()}")]
        return []

    def _weigh_yarn(
        self,
        plan: IsolationPlan,
        containers: Sequence[ManagedContainer],
        latency_critical: Collection[str],
    ) -> list[Event]:
        """YARN's hierarchy at batch's weight while batch runs in it and nothing
        latency-critical does (LCE cgroups, priority on); else its original weight
        back."""
        yarn = self.settings.yarn_hierarchy.strip("/")
        if not yarn:
            return []
        group = Cgroup(yarn)
        why = self._yarn_not_batch_only(plan, group, containers, latency_critical)
        if why:
            self.yarn_weighed = False
            if why not in self._said and containers:
                self._said.add(why)
                log.info("YARN's hierarchy keeps its weight: %s", why)
            return self._put_back(group, "YARN hierarchy")
        key = "cpu.shares" if "cpu.shares" in self.backend.read_keys else "cpu.weight"
        lowest = V1_LOWEST_SHARES if key == "cpu.shares" else V2_LOWEST_WEIGHT
        try:
            current = self.backend.read(group, key)
            original = self.journal.original(group, key) or current
            wanted = lowered_weight(int(original), self.settings.priority.weight_fraction, lowest)
            if int(current) != wanted:
                self.journal.remember_original(group, key, current)
                self.backend.write(group, key, str(wanted))
        except CgroupVanished:
            self.journal.forget_values(group)
            return []
        except (CgroupError, ValueError) as error:
            detail = error.one_line() if isinstance(error, CgroupError) else str(error)
            return [Event("error", "", f"YARN hierarchy: {detail}")]
        self.yarn_weighed = True
        return []

    def _yarn_not_batch_only(
        self,
        plan: IsolationPlan,
        group: Cgroup,
        containers: Sequence[ManagedContainer],
        latency_critical: Collection[str],
    ) -> str:
        """Why YARN's hierarchy is not weighed now ("" when it is). A child cgroup the
        NodeManager does not list yet (a container starting) does not stop it: it is
        judged once listed, an interval later."""
        if plan.mode != PER_CONTAINER or not self.settings.priority.enabled:
            return "priority is not on per container"
        if not containers:
            return "no batch container runs"
        children, why = self._children(group)
        if why:
            return why
        listed = set(latency_critical)
        protected = sorted(c.name for c in children if c.name in listed)
        if protected:
            return f"latency-critical container {protected[0]} runs in {group.relpath}"
        return ""

    def _release_parent(self) -> list[Event]:
        """The hierarchy's originals back when this interval does not use it."""
        if self.settings.per_container_only:
            return []
        parent = Cgroup(self.settings.agent_hierarchy.strip("/"))
        return self._put_back(parent, "batch hierarchy")

    def _put_back(self, group: Cgroup, what: str) -> list[Event]:
        originals = self.journal.originals_of(group)
        try:
            for key, value in sorted(originals.items()):
                put_back(self.backend, group, key, value)
        except CgroupVanished:
            pass
        except CgroupError as error:
            return [Event("error", "", f"{what}: {error.one_line()}")]
        if originals:
            self.journal.forget_values(group)
        return []

    def _protect_services(self, pressure: bool) -> list[Event]:
        """Under pressure each configured service cgroup (v2) gets ``memory.low`` at
        what it holds (never below its original); afterwards its original back."""
        events: list[Event] = []
        protected = 0
        for relpath in self.settings.memory.service_cgroups:
            group = Cgroup(relpath)
            if not pressure:
                events += self._put_back(group, f"service cgroup {relpath}")
                continue
            try:
                self._protect(group)
            except CgroupError as error:
                events.append(Event("error", "", f"service cgroup {relpath}: {error.one_line()}"))
                continue
            protected += 1
        self._services_protected = protected
        return events

    def _protect(self, group: Cgroup) -> None:
        current = self.backend.read(group, "memory.low")
        original = self.journal.original(group, "memory.low") or current
        if original == "max":
            return
        held = page_aligned(self.backend.usage(group).memory_bytes)
        wanted = max(int(original), held)
        if current != "max" and abs(int(current) - wanted) <= MEMORY_LOW_DEAD_BAND:
            return
        self.journal.remember_original(group, "memory.low", current)
        self.backend.write(group, "memory.low", str(wanted))

    def _evict(
        self, now_s: float, plan: IsolationPlan, containers: Sequence[ManagedContainer]
    ) -> list[Event]:
        """Only with kills allowed, after batch was capped for the grace period."""
        present = frozenset(c.container_id for c in containers)
        self.eviction = track_pressure(self.eviction, plan.pressure, now_s, present)
        rules = self.settings.eviction
        if not rules.enabled or self.eviction.pressure_since_s is None:
            return []
        holders = self._holders(containers)
        victim = memory_victim(self.eviction, now_s, holders, rules)
        if victim is None:
            return []
        waited = now_s - self.eviction.pressure_since_s
        reason = f"node memory under pressure for {waited:.0f} s with batch capped"
        self.eviction = replace(self.eviction, last_eviction_s=now_s)
        try:
            self.killer.kill(victim.container_id, victim.application_id, reason)
        except KillFailed as error:
            return [Event("kill-failed", victim.container_id, error.one_line(), "memory-pressure")]
        evicting = self.eviction.evicting | {victim.container_id}
        self.eviction = replace(self.eviction, evicting=evicting)
        return [Event("killed", victim.container_id, reason, "memory-pressure")]

    def _holders(self, containers: Sequence[ManagedContainer]) -> list[MemoryHolder]:
        holders = []
        for container in containers:
            try:
                held = self.backend.usage(container.group).memory_bytes
            except CgroupError:
                continue
            holders.append(MemoryHolder(container.container_id, container.application_id, held))
        return holders

    def _once(self, events: list[Event]) -> list[Event]:
        """A problem that repeats every interval is reported the first time only."""
        fresh = []
        for event in events:
            key = f"{event.kind}:{event.container_id}:{event.detail}"
            if event.kind in ("error", "denied") and key in self._said:
                continue
            self._said.add(key)
            fresh.append(event)
        return fresh

    # ----------------------------------------------------------------- report

    def report(self, plan: IsolationPlan, events: Sequence[Event]) -> IsolationReport:
        if plan.mode == OFF:
            return OFF_REPORT
        weighted = 0
        if self.settings.priority.enabled:
            weighted = 1 if plan.parent is not None else len(plan.containers)
            weighted += 1 if self.yarn_weighed else 0
        capped = len(self.frozen) if plan.pressure else 0
        if plan.refused and plan.refused not in self._said:
            self._said.add(plan.refused)
            log.warning("batch hierarchy not used (caps go on each container): %s", plan.refused)
        return IsolationReport(
            plan.mode, self.quota, plan.step, plan.use, weighted, plan.memory, plan.pressure,
            capped, self._services_protected, plan.refused, tuple(self._once(list(events))),
        )  # fmt: skip


def batch_cpuset(settings: IsolationSettings, nodestat: NodeStat) -> str | None:
    """Batch's cpuset (the node's CPUs without the services'), if one is asked; an
    empty string when the services would take every CPU."""
    priority = settings.priority
    if not priority.enabled or not priority.service_cpus:
        return None
    node = settings.suppress.cpus or nodestat.all_cpus()
    return cpu_list(frozenset(node) - priority.service_cpus)


def _vcore_weight(container: ManagedContainer) -> int:
    """A container's weight in the split of batch's quota: its allocated CPU."""
    allocation = container.allocation
    return allocation.cpu_millicores if allocation is not None else 1000
