"""One interval of reclaim on a node: observe the batch cgroups, decide (Algorithm 2),
act through the backend. Shared by the agent (:mod:`preemption.agent`, real v1/v2
cgroups) and the simulator (:mod:`yarn_adapt.cosim.colocation`, a simulated backend),
so a benchmark scores the code the agent runs.

Per interval, :meth:`NodeReclaimer.tick`:

1. reads each container's limit files and usage (one :class:`TaskSample`);
2. gives each newly seen container one interval of observation before it may be
   squeezed, then fixes its *baseline*: the original CFS quota if one was set,
   otherwise the larger of its YARN allocation and what it was using (never above
   the node), and likewise for memory;
3. judges aliveness: full check (CPU progress too) for a task stepped in the last
   interval, process/OOM/progress for the other squeezed tasks;
4. calls :func:`preemption.reclaim.decide`;
5. applies each ``SetLimit`` with :func:`apply_limit` (originals journalled first,
   only changed files written, a failed action rolled back), sends each ``Kill``;
6. brings every other container's files to its limit under the isolation loop's
   :class:`ContainerCaps` (:mod:`preemption.isolator`: suppress quota, batch weight,
   memory cap), through the same :func:`apply_limit`;
7. restores and forgets containers that are gone.

The isolation loop and Algorithm 2 meet in :func:`apply_limit` alone: the squeeze's
file values tightened by the caps (:func:`preemption.cgroups.caps.capped`), so a
container's effective limit is the stricter of the two, and its aliveness is judged
against that effective limit (a task the suppress loop holds back is not hanging).
A group's originals are forgotten only when every file it changed holds its original
again.

Failures are data: a vanished cgroup drops the task, a permission or other cgroup
error sets the task aside for ``retry_after_s`` (excluded from selection) after
rolling back what the action had written. Nothing here raises for one container.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from preemption.aliveness import Verdict, check, cpu_rate_millicores
from preemption.cgroups.base import MIB, Cgroup, CgroupBackend, MemoryPolicy, Usage
from preemption.cgroups.caps import NO_CAPS, Caps, capped
from preemption.errors import CgroupError, CgroupPermissionDenied, CgroupVanished, KillFailed
from preemption.model import NOTHING, Amount, BatchTask, Locality, ReclaimTarget, TaskSample
from preemption.reclaim import (
    Blacklist,
    Decision,
    EngineState,
    Kill,
    Observation,
    ReclaimSettings,
    SetLimit,
    decide,
    without_plan,
)
from preemption.statefile import StateJournal, put_back

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ManagedContainer:
    """A batch container found this interval, with its cgroup."""

    container_id: str
    application_id: str
    group: Cgroup
    started_at_s: float
    allocation: Amount | None = None
    locality: Locality = Locality.UNKNOWN
    alive: bool = True
    progress: float | None = None
    exiting: bool = False  # not alive because its processes exited (not stopped)


@dataclass(frozen=True)
class ContainerCaps:
    """What the isolation loop puts on one batch container this interval: ``caps``
    written with its squeeze limit, and ``cpu_share_millicores``, the CPU the suppress
    loop leaves it (its share of batch's quota), which its aliveness is judged against."""

    caps: Caps = NO_CAPS
    cpu_share_millicores: int | None = None


NO_CONTAINER_CAPS = ContainerCaps()


class Killer(Protocol):
    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        """Kill the container the way YARN does; ``KillFailed`` if it could not."""
        ...


@dataclass(frozen=True)
class Event:
    """Something worth a log line and a counter: ``kind`` is one of ``step``,
    ``blacklisted``, ``killed``, ``kill-failed``, ``vanished``, ``denied``, ``error``,
    ``released``. ``cause`` says why a container was killed: ``reclaim`` (Algorithm
    2's last resort) or ``memory-pressure`` (the isolation loop's eviction)."""

    kind: str
    container_id: str
    detail: str = ""
    cause: str = "reclaim"


@dataclass(frozen=True)
class TickReport:
    decision: Decision
    events: tuple[Event, ...]
    managed: int
    reclaimed: Amount


RECENT_WINDOWS = 5


@dataclass
class _Tracked:
    group: Cgroup
    application_id: str
    previous_sample: TaskSample
    last_sample: TaskSample
    values: dict[str, str]
    usage: Usage
    baseline: Amount | None = None
    limit: Amount = NOTHING
    rate_millicores: float = 0.0
    recent_rates: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_WINDOWS))
    rate_before_step: float = 0.0
    progress_moved_at_s: float | None = None
    set_aside_until_s: float = -math.inf


@dataclass(frozen=True, kw_only=True)
class NodeSettings:
    node_cpu_millicores: int
    retry_after_s: float = 60.0
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    extra_keys: tuple[str, ...] = ()  # files the caps write beyond the backend's own


class NodeReclaimer:
    """Holds Algorithm 2's state and each container's baseline between intervals."""

    def __init__(
        self,
        backend: CgroupBackend,
        journal: StateJournal,
        killer: Killer,
        settings: ReclaimSettings,
        node: NodeSettings,
    ) -> None:
        self.backend = backend
        self.journal = journal
        self.killer = killer
        self.settings = settings
        self.node = node
        self.state = EngineState()
        self.tracked: dict[str, _Tracked] = {}
        self._caps: Mapping[str, ContainerCaps] = {}

    # ----------------------------------------------------------------- one interval

    def tick(
        self,
        now_s: float,
        containers: Sequence[ManagedContainer],
        target: ReclaimTarget,
        inferred: Amount | None = None,
        caps: Mapping[str, ContainerCaps] | None = None,
    ) -> TickReport:
        """One interval; ``caps``: the isolation loop's, per container (none: no caps)."""
        self._caps = caps or {}
        events: list[Event] = []
        present = self._observe(now_s, containers, events)
        self._forget_departed(present, events)
        health = self._health(now_s, present)
        tasks = self._tasks(present)
        excluded = frozenset(cid for cid in tasks if self.tracked[cid].set_aside_until_s > now_s)
        seen = Observation(
            now_s=now_s,
            tasks=tuple(tasks.values()),
            target=target,
            health=health,
            inferred=inferred,
            excluded=excluded,
        )
        decision = decide(self.state, seen, self.settings)
        self.state = decision.state
        self._act(now_s, decision, tasks, events)
        self._apply_caps(now_s, present, events)
        return TickReport(decision, tuple(events), len(tasks), self.reclaimed(tasks))

    def caps_of(self, container_id: str) -> ContainerCaps:
        return self._caps.get(container_id, NO_CONTAINER_CAPS)

    def effective_cpu_millicores(self, container_id: str) -> int:
        """The CPU a squeezed container may use now: the stricter of its squeeze limit
        and the share the suppress loop leaves it."""
        tracked = self.tracked[container_id]
        share = self.caps_of(container_id).cpu_share_millicores
        limit = tracked.limit.cpu_millicores
        return limit if share is None else min(limit, share)

    def reclaimed(self, tasks: Mapping[str, BatchTask]) -> Amount:
        """What squeezed tasks give now (limits as applied) plus what kills freed."""
        squeezed = NOTHING
        for container_id in tasks:
            tracked = self.tracked.get(container_id)
            if tracked is not None and tracked.baseline is not None:
                squeezed = squeezed + (tracked.baseline - tracked.limit).clamped()
        return squeezed + self.state.freed_by_kill

    def _observe(
        self, now_s: float, containers: Sequence[ManagedContainer], events: list[Event]
    ) -> dict[str, ManagedContainer]:
        present: dict[str, ManagedContainer] = {}
        for container in containers:
            try:
                values, usage = self._read(container.group)
            except CgroupVanished as gone:
                events.append(Event("vanished", container.container_id, gone.one_line()))
                continue
            except CgroupError as error:
                self._set_aside(container.container_id, now_s, error, events)
                continue
            sample = TaskSample(
                now_s, container.alive, usage.cpu_usage_ns, usage.oom_kills, container.progress,
                exiting=container.exiting,
            )  # fmt: skip
            self._track(container, values, usage, sample)
            present[container.container_id] = container
        return present

    def _read(self, group: Cgroup) -> tuple[dict[str, str], Usage]:
        keys = (*self.backend.read_keys, *self.node.extra_keys)
        values = {key: self.backend.read(group, key) for key in keys}
        return values, self.backend.usage(group)

    def _track(
        self,
        container: ManagedContainer,
        values: dict[str, str],
        usage: Usage,
        sample: TaskSample,
    ) -> None:
        tracked = self.tracked.get(container.container_id)
        if tracked is None:
            self.tracked[container.container_id] = _Tracked(
                container.group, container.application_id, sample, sample, values, usage
            )
            return
        tracked.rate_millicores = cpu_rate_millicores(tracked.last_sample, sample)
        tracked.recent_rates.append(tracked.rate_millicores)
        previous = tracked.last_sample.progress
        if sample.progress is not None and (previous is None or sample.progress > previous):
            tracked.progress_moved_at_s = sample.at_s
        tracked.previous_sample, tracked.last_sample = tracked.last_sample, sample
        tracked.values, tracked.usage = values, usage
        if tracked.baseline is None:
            tracked.baseline = self._baseline(container, values, tracked)
            tracked.limit = tracked.baseline

    def _baseline(
        self, container: ManagedContainer, values: Mapping[str, str], tracked: _Tracked
    ) -> Amount:
        originals = self.backend.originals(self._originals(container.group, values))
        node_cpu = self.node.node_cpu_millicores
        allocated = container.allocation
        cpu = originals.cpu_millicores
        if cpu is None:
            # What it was given, or else one core; more if it was using more. Nearest
            # 100 millicores: a busy loop measured at 1003 is using one core, not 1.1.
            used = round(tracked.rate_millicores / 100) * 100
            cpu = max(allocated.cpu_millicores if allocated else 1000, used)
        memory = originals.memory_mb
        if memory is None:
            in_use = math.ceil(tracked.usage.memory_bytes / MIB)
            memory = max(allocated.memory_mb if allocated else in_use, in_use)
        return Amount(min(cpu, node_cpu), memory)

    def _originals(self, group: Cgroup, values: Mapping[str, str]) -> dict[str, str]:
        recorded = self.journal.originals_of(group)
        return {key: recorded.get(key, value) for key, value in values.items()}

    def _forget_departed(
        self, present: Mapping[str, ManagedContainer], events: list[Event]
    ) -> None:
        for container_id in [cid for cid in self.tracked if cid not in present]:
            tracked = self.tracked.pop(container_id)
            self._restore_values(tracked.group, container_id, events)

    def _restore_values(self, group: Cgroup, container_id: str, events: list[Event]) -> None:
        for key, value in sorted(self.journal.originals_of(group).items()):
            try:
                put_back(self.backend, group, key, value)
            except CgroupVanished:
                break
            except CgroupError as error:
                events.append(Event("error", container_id, error.one_line()))
                return  # stays journalled: restored at shutdown or next start
        self.journal.forget_values(group)

    # ----------------------------------------------------------------- judge

    def _health(self, now_s: float, present: Mapping[str, ManagedContainer]) -> dict[str, Verdict]:
        planned = {plan.container_id for plan in self.state.plans if plan.awaiting_check}
        verdicts: dict[str, Verdict] = {}
        for container_id in present:
            tracked = self.tracked[container_id]
            squeezed = tracked.baseline is not None and tracked.limit != tracked.baseline
            if container_id not in planned and not squeezed:
                continue
            verdicts[container_id] = check(
                tracked.previous_sample,
                tracked.last_sample,
                rate_before_millicores=tracked.rate_before_step if container_id in planned else 0.0,
                limit_millicores=self.effective_cpu_millicores(container_id),
                progress_moved_at_s=tracked.progress_moved_at_s,
                settings=self.settings.aliveness,
            )
        return verdicts

    def _tasks(self, present: Mapping[str, ManagedContainer]) -> dict[str, BatchTask]:
        tasks: dict[str, BatchTask] = {}
        for container_id, container in present.items():
            tracked = self.tracked[container_id]
            if tracked.baseline is None:
                continue  # one interval of observation first
            tasks[container_id] = BatchTask(
                container_id,
                container.application_id,
                container.started_at_s,
                tracked.baseline,
                tracked.limit,
                container.locality,
            )
        return tasks

    # ----------------------------------------------------------------- act

    def _act(
        self,
        now_s: float,
        decision: Decision,
        tasks: Mapping[str, BatchTask],
        events: list[Event],
    ) -> None:
        for action in decision.actions:
            if isinstance(action, SetLimit):
                self._set_limit(now_s, action, events)
            elif isinstance(action, Kill):
                self._kill(action, tasks, events)
            elif isinstance(action, Blacklist):
                events.append(Event("blacklisted", action.container_id, action.reason))

    def _set_limit(self, now_s: float, action: SetLimit, events: list[Event]) -> None:
        tracked = self.tracked[action.container_id]
        assert tracked.baseline is not None
        written = self._write(now_s, action.container_id, action.limit, events)
        if written is None:
            return
        stepping_down = action.limit.cpu_millicores < tracked.limit.cpu_millicores or (
            action.limit.memory_mb < tracked.limit.memory_mb
        )
        if stepping_down:
            # The busiest recent interval: one short interval on a contended node can
            # read near zero, and a task that starts hanging must still show as busy.
            tracked.rate_before_step = max(tracked.recent_rates, default=0.0)
        kind = "step" if stepping_down else "released"
        events.append(Event(kind, action.container_id, f"{action.limit}: {action.reason}"))
        tracked.limit = action.limit

    def _write(
        self, now_s: float, container_id: str, limit: Amount, events: list[Event]
    ) -> dict[str, str] | None:
        """``limit`` under the container's caps written; None if the write failed
        (the container vanished, or is set aside)."""
        tracked = self.tracked[container_id]
        baseline = tracked.baseline if tracked.baseline is not None else limit
        try:
            written = apply_limit(
                self.backend, self.journal, tracked.group, limit, baseline,
                tracked.values, tracked.usage, self.caps_of(container_id).caps,
                self.node.memory,
            )  # fmt: skip
        except CgroupVanished as gone:
            events.append(Event("vanished", container_id, gone.one_line()))
            return None
        except CgroupError as error:
            self._set_aside(container_id, now_s, error, events)
            return None
        tracked.values.update(written)
        return written

    def _apply_caps(
        self, now_s: float, present: Mapping[str, ManagedContainer], events: list[Event]
    ) -> None:
        """Every container's files brought to its limit under its caps (only what
        differs is written; a container set aside is left alone)."""
        for container_id in present:
            tracked = self.tracked.get(container_id)
            if tracked is None or tracked.set_aside_until_s > now_s:
                continue
            limit = tracked.limit if tracked.baseline is not None else NOTHING
            self._write(now_s, container_id, limit, events)

    def _set_aside(
        self, container_id: str, now_s: float, error: CgroupError, events: list[Event]
    ) -> None:
        kind = "denied" if isinstance(error, CgroupPermissionDenied) else "error"
        events.append(Event(kind, container_id, error.one_line()))
        tracked = self.tracked.get(container_id)
        if tracked is not None:
            tracked.set_aside_until_s = now_s + self.node.retry_after_s
        self.state = without_plan(self.state, container_id)

    def _kill(self, action: Kill, tasks: Mapping[str, BatchTask], events: list[Event]) -> None:
        try:
            self.killer.kill(action.container_id, action.application_id, action.reason)
        except KillFailed as error:
            events.append(Event("kill-failed", action.container_id, error.one_line()))
            task = tasks[action.container_id]
            self.state = replace(
                self.state,
                killing=self.state.killing - {action.container_id},
                freed_by_kill=(self.state.freed_by_kill - task.baseline).clamped(),
            )
            return
        events.append(Event("killed", action.container_id, action.reason))

    # ----------------------------------------------------------------- shutdown

    def restore_all(self) -> list[Event]:
        """Every tracked container back to its original limits (SIGTERM, stop)."""
        events: list[Event] = []
        for container_id, tracked in sorted(self.tracked.items()):
            self._restore_values(tracked.group, container_id, events)
        self.tracked.clear()
        self.state = EngineState()
        return events


def apply_limit(
    backend: CgroupBackend,
    journal: StateJournal,
    group: Cgroup,
    limit: Amount,
    baseline: Amount,
    current: Mapping[str, str],
    usage: Usage,
    caps: Caps = NO_CAPS,
    policy: MemoryPolicy | None = None,
) -> dict[str, str]:
    """Write the files that must change for ``limit`` under ``caps`` (the stricter of
    the two, :func:`~preemption.cgroups.caps.capped`); journal each original first.
    A limit at (or above) the baseline and no caps write the originals back.

    Returns the values written. If a write fails, the keys already written in this
    call are put back to the values they had, then the error is raised. Once every
    file holds its original again the group's originals are forgotten.
    """
    recorded = journal.originals_of(group)
    originals = {key: recorded.get(key, value) for key, value in current.items()}
    desired = desired_for(backend, journal, group, limit, baseline, current, usage, caps, policy)
    keys = [*backend.limit_keys, *(key for key in desired if key not in backend.limit_keys)]
    changing = [key for key in keys if key in desired and desired[key] != current.get(key)]
    with journal.one_save():  # every original on disk before the first write
        for key in changing:
            journal.remember_original(group, key, current[key])
    written: list[tuple[str, str]] = []
    try:
        for key in changing:
            backend.write(group, key, desired[key])
            written.append((key, current[key]))
    except CgroupError:
        _roll_back(backend, group, written)
        raise
    if all(desired[key] == originals.get(key, desired[key]) for key in desired):
        journal.forget_values(group)
    return {key: desired[key] for key, _ in written}


def desired_for(
    backend: CgroupBackend,
    journal: StateJournal,
    group: Cgroup,
    limit: Amount,
    baseline: Amount,
    current: Mapping[str, str],
    usage: Usage,
    caps: Caps = NO_CAPS,
    policy: MemoryPolicy | None = None,
) -> dict[str, str]:
    """The file values for ``limit`` under ``caps``, from the group's originals (the
    journal's where it has them, else the current values)."""
    recorded = journal.originals_of(group)
    originals = {key: recorded.get(key, value) for key, value in current.items()}
    squeezed = backend.desired_values(limit, baseline, originals, usage)
    return capped(squeezed, originals, usage, caps, policy or MemoryPolicy())


def _roll_back(backend: CgroupBackend, group: Cgroup, written: list[tuple[str, str]]) -> None:
    for key, previous in reversed(written):
        try:
            backend.write(group, key, previous)
        except CgroupError as error:
            # Still journalled with its original: restored at shutdown or next start.
            log.warning("could not roll back %s: %s", key, error.one_line())
