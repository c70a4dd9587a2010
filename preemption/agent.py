"""The node agent: one per NodeManager host, beside the NodeManager.

Every ``interval_s``:

0. **trust**: verify the NodeManager process and read the containers it lists as
   running (:mod:`preemption.nodemanager`); if either fails, act on nothing this
   interval (the reason is logged once, and counted);
1. **observe**: find those containers' processes or cgroups
   (:mod:`preemption.discovery`), classify each through the RM
   (:mod:`preemption.classify`; an RM outage keeps the last known kind), give batch
   containers their own cgroup when YARN did not (:mod:`preemption.adopt`), take
   allocations from the NodeManager's list and MapReduce progress from the AM for
   squeezed tasks, read the target (:mod:`preemption.targets`) and, with a QoS
   model, infer the reclaim it needs (:mod:`preemption.qos`);
2. **isolate**: the isolation loop (:mod:`preemption.isolator`) reads the node's CPU
   and memory counters and batch's own, and decides batch's caps (low CPU weight,
   the suppress quota, a memory cap under pressure), whatever the target asks;
3. **decide and act**: one interval of Algorithm 2 through
   :class:`~preemption.node.NodeReclaimer` (the same code the simulator runs), which
   writes each container's squeeze under its caps (the stricter of the two); the
   agent's hierarchy gets its caps before the containers when its quota rises and
   after them when it falls; then the services' memory protection and, only where
   kills are allowed, the memory eviction;
4. **record**: log and count every event (:mod:`preemption.metrics`), write the
   status file (:mod:`preemption.status`), append a QoS sample, remove the cgroups of
   containers that ended.

On start it restores whatever a previous run left in the state file (a crash); on
stop (SIGTERM) it restores every limit it changed and moves adopted processes back.
An unexpected exception restores everything before it propagates, so no limit is
left behind by a bug either. A kill is asked of the RM only for a container the
NodeManager lists as running in that same interval (:class:`ListedOnly`), and only
when ``[yarn] kill`` enables kills (off by default).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from preemption.adopt import Adopter
from preemption.cgroups.base import MIB, Cgroup, CgroupBackend, OwnerAware
from preemption.cgroups.dryrun import DryRunBackend
from preemption.cgroups.files import CgroupFiles
from preemption.cgroups.v1 import V1Backend, v1_mounts
from preemption.cgroups.v2 import V2Backend
from preemption.classify import AppFacts, classify
from preemption.discovery import FoundContainer, containers_in_hierarchy, containers_in_tree
from preemption.errors import CgroupError, CgroupUnsupported, KillFailed, RestoreIncomplete
from preemption.isolator import IsolationReport, NodeIsolator, batch_cpuset
from preemption.metrics import AgentMetrics
from preemption.model import NOTHING, Amount, ContainerRef, Locality, TaskKind
from preemption.node import (
    Event,
    Killer,
    ManagedContainer,
    NodeReclaimer,
    NodeSettings,
    TickReport,
)
from preemption.nodemanager import (
    NodeManagerSource,
    NodeManagerView,
    NodeManagerWatch,
    VerifiedNodeManager,
)
from preemption.nodestat import NodeStat
from preemption.procfs import ProcFs
from preemption.reclaim import Decision, Status
from preemption.settings import AgentSettings
from preemption.statefile import RestoreReport, StateJournal, restore
from preemption.status import (
    Eviction,
    SqueezedContainer,
    squeeze_json,
    status_document,
    status_lines,
    write_status,
)
from preemption.targets import Fetched, ServiceTarget, StandaloneTarget
from preemption.yarnedge import NodeManagerClient, YarnEdge
from yarn_adapt.errors import SettingsError, YarnError
from yarn_adapt.yarn.http import HttpSettings

if TYPE_CHECKING:
    from preemption.qos import QosSample

log = logging.getLogger("preemption.agent")


class TargetSource(Protocol):
    def current(self) -> Fetched: ...

    def report(self, lines: Sequence[str]) -> None:
        """What the agent does now, in words (for the service's page)."""


class YarnView(Protocol):
    """What the agent needs from YARN (:class:`~preemption.yarnedge.YarnEdge`)."""

    def app_facts(self, application_id: str) -> AppFacts | None: ...

    def task_progress(self, application_id: str, container_id: str) -> float | None: ...

    def locality(self, container_id: str) -> Locality: ...

    def kill(self, container_id: str, application_id: str, reason: str) -> None: ...


class LoggingKiller:
    """Used without an RM, and in dry runs: the kill is logged, nothing happens."""

    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        raise KillFailed(f"{container_id}: no ResourceManager to kill through ({reason})")


class ListedOnly:
    """A killer that passes on only kills of containers the NodeManager lists as
    running this interval (the agent updates ``listed`` every interval)."""

    def __init__(self, killer: Killer) -> None:
        self.killer = killer
        self.listed: frozenset[str] = frozenset()

    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        if container_id not in self.listed:
            raise KillFailed(f"{container_id}: the NodeManager does not list it as running")
        self.killer.kill(container_id, application_id, reason)


class DryRunKiller:
    def __init__(self) -> None:
        self.would_kill: list[str] = []

    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        self.would_kill.append(container_id)
        log.warning("dry run: would kill %s through the RM: %s", container_id, reason)


@dataclass
class AgentParts:
    """The agent's edges, each replaceable in tests."""

    backend: CgroupBackend
    journal: StateJournal
    target: TargetSource
    procfs: ProcFs = field(default_factory=ProcFs)
    yarn: YarnView | None = None
    killer: Killer | None = None
    nodemanager: NodeManagerSource | None = None  # None: the settings' (verified)
    metrics: AgentMetrics = field(default_factory=AgentMetrics)
    clock: Callable[[], float] = time.time
    nodestat: NodeStat = field(default_factory=NodeStat)
    status_file: Path | None = None  # None: no status file (dry run, most tests)


@dataclass(frozen=True)
class NodeView:
    """One interval's view of the node: what the NodeManager vouches for, and where
    those containers are. No containers when the NodeManager is not trusted."""

    nodemanager: NodeManagerView
    containers: tuple[FoundContainer, ...] = ()

    @property
    def problem(self) -> str | None:
        if self.nodemanager.trusted:
            return None
        return self.nodemanager.problem or "no verified NodeManager"


class Agent:
    def __init__(self, settings: AgentSettings, parts: AgentParts) -> None:
        self.settings = settings
        self.parts = parts
        self.backend = parts.backend
        self.journal = parts.journal
        self.metrics = parts.metrics
        self.adopter = Adopter(
            self.backend, self.journal, settings.discovery.agent_hierarchy, parts.procfs
        )
        self.nodemanager = parts.nodemanager or host_nodemanager(settings, parts.procfs)
        self.killer = ListedOnly(parts.killer or parts.yarn or LoggingKiller())
        isolation = settings.isolation_settings()
        batch_cpus = batch_cpuset(isolation, parts.nodestat)
        extra_keys = _checked_isolation(settings, self.backend.version, batch_cpus)
        self.isolator = NodeIsolator(
            self.backend, self.journal, self.killer, isolation, nodestat=parts.nodestat,
            extra_keys=extra_keys,
        )  # fmt: skip
        self.reclaimer = NodeReclaimer(
            self.backend,
            self.journal,
            self.killer,
            settings.reclaim_settings(),
            NodeSettings(
                node_cpu_millicores=node_cpu_millicores(settings),
                retry_after_s=settings.reclaim.retry_after_s,
                memory=settings.memory_policy(),
                extra_keys=extra_keys,
            ),
        )
        self._kinds: dict[str, TaskKind] = {}
        # the listed latency-critical containers of the last interval (not a batch AM)
        self.latency_critical: frozenset[str] = frozenset()
        self._progress: dict[str, tuple[float, float | None]] = {}
        self._qos = QosTraining(settings) if settings.qos.model != "off" else None
        self.last_report: TickReport | None = None
        self.last_isolation: IsolationReport | None = None
        self.evictions: deque[Eviction] = deque(maxlen=20)

    # ----------------------------------------------------------------- life cycle

    @classmethod
    def build(
        cls, settings: AgentSettings, *, dry_run: bool | None = None, restore_only: bool = False
    ) -> Agent:
        """The agent for this host, as the settings describe it. ``restore_only``: for
        ``agent restore``, which must work whatever the service's address or token
        (it asks the service nothing) and whatever the isolation settings this host's
        cgroups cannot do (it isolates nothing)."""
        if restore_only:
            settings = settings.without_isolation()
        dry = settings.agent.dry_run if dry_run is None else dry_run
        backend: CgroupBackend = host_backend(settings)
        procfs = ProcFs()
        yarn = None
        if settings.yarn.rm:
            yarn = YarnEdge(
                settings.yarn.rm, yarn_http(settings), kill_mode=settings.yarn.kill,
                millicores_per_vcore=settings.yarn.millicores_per_vcore,
                jobhistory=settings.yarn.jobhistory,
            )  # fmt: skip
        state_file = None if dry else Path(settings.agent.state_file)
        killer: Killer | None = None
        if dry:
            backend = DryRunBackend(backend, procfs)
            killer = DryRunKiller()
        journal = StateJournal.open(state_file, backend.describe())
        parts = AgentParts(
            backend=backend,
            journal=journal,
            target=StandaloneTarget(NOTHING) if restore_only else target_source(settings),
            procfs=procfs,
            yarn=yarn,
            killer=killer,
            nodemanager=host_nodemanager(settings, procfs),
            status_file=None if dry else settings.status_path(),
        )
        return cls(settings, parts)

    def recover(self) -> RestoreReport:
        """Restore what a previous run left behind (it crashed or was SIGKILLed)."""
        if self.journal.empty:
            return RestoreReport()
        report = restore(self.journal, self.backend, self.parts.procfs)
        self._count_restore(report, "leftovers of a previous run")
        return report

    def shutdown(self) -> RestoreReport:
        """Every limit back to its original, adopted processes back (SIGTERM, stop)."""
        for event in self.reclaimer.restore_all():
            self._record(event)
        report = restore(self.journal, self.backend, self.parts.procfs)
        self._count_restore(report, "on stop")
        return report

    def _count_restore(self, report: RestoreReport, when: str) -> None:
        outcome = "complete" if report.complete else "incomplete"
        self.metrics.restores.labels(outcome).inc()
        log.warning("restore %s: %s", when, report.summary())
        if not report.complete:
            raise RestoreIncomplete(f"restore {when} incomplete: {report.summary()}")

    def run(self, stop: threading.Event, *, ticks: int | None = None) -> None:
        """Tick every interval until ``stop`` is set (or ``ticks`` intervals ran)."""
        done = 0
        while not stop.is_set() and (ticks is None or done < ticks):
            started = time.monotonic()
            self.tick()
            done += 1
            if ticks is not None and done >= ticks:
                break
            stop.wait(max(0.0, self.settings.agent.interval_s - (time.monotonic() - started)))

    # ----------------------------------------------------------------- one interval

    def tick(self) -> TickReport:
        started = time.monotonic()
        try:
            report = self._tick()
        except BaseException:
            log.exception("unexpected failure: restoring every limit before stopping")
            self.shutdown()
            raise
        self.metrics.tick_seconds.observe(time.monotonic() - started)
        return report

    def _tick(self) -> TickReport:
        now = self.parts.clock()
        view = self.observe()
        if view.problem is not None:
            return self._held(now, view.problem)
        self.killer.listed = frozenset(view.nodemanager.running)
        managed = self._managed(now, view)
        fetched = self.parts.target.current()
        if fetched.problem is not None:
            self.metrics.request_errors.labels(fetched.problem_kind or "malformed").inc()
            log.warning("reclaim target: %s (keeping the last valid one)", fetched.problem)
        inferred = self._infer(fetched, managed)
        plan = self.isolator.plan(managed)
        early = self.isolator.before_children(plan)
        report = self.reclaimer.tick(now, managed, fetched.target, inferred, plan.containers)
        late = self.isolator.after_children(now, plan, managed, self.latency_critical)
        isolation = self.isolator.report(plan, [*early, *late])
        self.metrics.record_tick(report)
        self.metrics.record_isolation(isolation)
        for event in (*report.events, *isolation.events):
            self._log(event)
            self._remember_eviction(now, event)
        self._release_finished({container.container_id for container in view.containers})
        self._sample_qos(fetched, report)
        self.last_report, self.last_isolation = report, isolation
        self._write_status(now, None)
        return report

    def _held(self, now: float, problem: str) -> TickReport:
        """An interval the NodeManager could not vouch for: nothing is written, moved,
        restored or killed; every limit stays as it is until it can."""
        self.killer.listed = frozenset()
        self.metrics.untrusted.inc()
        self._write_status(now, problem)
        last = self.last_report
        status = Status(
            desired=last.decision.status.desired if last else NOTHING,
            reclaimed=last.reclaimed if last else NOTHING,
            in_flight=NOTHING,
            mode="untrusted",
            unmet_since_s=None,
        )
        decision = Decision(self.reclaimer.state, (), status)
        return TickReport(decision, (), last.managed if last else 0, status.reclaimed)

    def observe(self) -> NodeView:
        """What the verified NodeManager runs, and where (nothing if not verified)."""
        nodemanager = self.nodemanager.observe()
        if not nodemanager.trusted or nodemanager.process is None:
            return NodeView(nodemanager)
        return NodeView(nodemanager, tuple(self._locate(nodemanager, nodemanager.process)))

    def discover(self) -> list[FoundContainer]:
        return list(self.observe().containers)

    def _locate(
        self, nodemanager: NodeManagerView, process: VerifiedNodeManager
    ) -> list[FoundContainer]:
        d = self.settings.discovery
        procfs = self.parts.procfs
        listed = frozenset(nodemanager.running)
        if d.source in ("auto", "cgroup"):
            found = containers_in_hierarchy(
                self.backend, d.yarn_hierarchy, procfs, listed,
                lambda group: self._owned_by(group, process.uid),
            )  # fmt: skip
            if found or d.source == "cgroup":
                return found
        return containers_in_tree(process.pid, procfs, listed)

    def _owned_by(self, group: Cgroup, nodemanager_uid: int) -> bool:
        """Root or the NodeManager's user made this cgroup (no tenant could have)."""
        if not isinstance(self.backend, OwnerAware):
            return False
        return self.backend.owner_uid(group) in (0, nodemanager_uid)

    def _managed(self, now: float, view: NodeView) -> list[ManagedContainer]:
        """The batch containers the agent manages; on the way, the latency-critical
        ones (:attr:`latency_critical`; a batch application's master is not one)."""
        managed = []
        protected = set()
        for container in view.containers:
            try:
                ref = ContainerRef.parse(container.container_id)
            except ValueError:
                continue
            if self.kind_of(ref) is not TaskKind.BATCH:
                if self._kinds.get(ref.application_id) is not TaskKind.BATCH:
                    protected.add(container.container_id)
                continue
            group = container.cgroup or self._adopt(container)
            if group is None:
                continue
            listed = view.nodemanager.running.get(container.container_id)
            managed.append(
                ManagedContainer(
                    container_id=container.container_id,
                    application_id=ref.application_id,
                    group=group,
                    started_at_s=container.started_at_s,
                    allocation=listed.allocation if listed is not None else None,
                    locality=self._locality(container.container_id),
                    alive=container.running,
                    exiting=container.exiting,
                    progress=self._task_progress(now, ref),
                )
            )
        self.latency_critical = frozenset(protected)
        return managed

    def kind_of(self, ref: ContainerRef) -> TaskKind:
        """The container's kind; an RM outage keeps the last kind known for its app."""
        facts = None
        if self.parts.yarn is not None:
            try:
                facts = self.parts.yarn.app_facts(ref.application_id)
            except YarnError as error:
                self.metrics.yarn_errors.inc()
                log.warning("RM: %s (keeping the last known kind)", error.one_line())
                if ref.application_id in self._kinds:
                    return classify_am(ref, self._kinds[ref.application_id], self.settings)
        kind = classify(ref, facts, self.settings.classify_settings())
        if facts is not None and not ref.is_application_master:
            self._kinds[ref.application_id] = kind
        return kind

    def _adopt(self, container: FoundContainer) -> Cgroup | None:
        try:
            return self.adopter.adopt(container.container_id, container.processes)
        except CgroupError as error:
            self._record(Event("error", container.container_id, error.one_line()))
            log.warning("cannot give %s its own cgroup: %s", container.container_id, error)
            return None

    def _squeezed(self, container_id: str) -> bool:
        tracked = self.reclaimer.tracked.get(container_id)
        return (
            tracked is not None
            and tracked.baseline is not None
            and (tracked.limit != tracked.baseline)
        )

    def _task_progress(self, now: float, ref: ContainerRef) -> float | None:
        if self.parts.yarn is None or not self.settings.yarn.task_progress:
            return None
        if not self._squeezed(ref.container_id):
            return None
        polled_at, value = self._progress.get(ref.container_id, (-1e18, None))
        if now - polled_at >= 5.0:
            value = self.parts.yarn.task_progress(ref.application_id, ref.container_id)
            self._progress[ref.container_id] = (now, value)
        return value

    def _locality(self, container_id: str) -> Locality:
        if self.parts.yarn is None:
            return Locality.UNKNOWN
        return self.parts.yarn.locality(container_id)

    def _release_finished(self, active: set[str]) -> None:
        for problem in self.adopter.release_finished(active):
            self._record(Event("error", "", problem))
            log.warning("agent cgroup not removed: %s", problem)
        for container_id in [c for c in self._progress if c not in active]:
            del self._progress[container_id]

    # ----------------------------------------------------------------- QoS model

    def _infer(self, fetched: Fetched, managed: list[ManagedContainer]) -> Amount | None:
        if self._qos is None or self.last_report is None:
            return None
        qos = fetched.target.qos
        if qos.load is None or qos.target_ms is None or not self._qos.model.fitted:
            return None
        now_sample = self._qos_features(qos.load, 0.0)
        if now_sample is None:
            return None
        from preemption.qos import infer_preempted_resource

        step = self.settings.reclaim.step_cpu_millicores
        inference = infer_preempted_resource(
            self._qos.model, now_sample, qos.target_ms, step_millicores=step,
            epsilon=self.settings.qos.epsilon,
        )  # fmt: skip
        already = self.last_report.reclaimed
        return Amount(already.cpu_millicores + inference.reclaim.cpu_millicores, 0)

    def _qos_features(self, load: float, latency_ms: float) -> QosSample | None:
        """The model's inputs now; None while a batch container's baseline is not yet
        known (one interval after it appears): what batch holds cannot be told then."""
        from preemption.qos import QosSample

        batch_cpu = 0.0
        batch_limits = 0
        batch_memory = 0.0
        for container_id, tracked in self.reclaimer.tracked.items():
            if tracked.baseline is None:
                return None
            batch_cpu += tracked.rate_millicores
            batch_memory += tracked.usage.memory_bytes / MIB
            # What batch may use: its squeeze, or the suppress loop's share if stricter.
            batch_limits += self.reclaimer.effective_cpu_millicores(container_id)
        node = node_cpu_millicores(self.settings)
        return QosSample(load, max(0, node - batch_limits), batch_cpu, batch_memory, latency_ms)

    def _sample_qos(self, fetched: Fetched, report: TickReport) -> None:
        qos = fetched.target.qos
        if self._qos is None or qos.load is None or qos.latency_ms is None:
            return
        sample = self._qos_features(qos.load, qos.latency_ms)
        if sample is not None:
            self._qos.add(sample)

    # ----------------------------------------------------------------- records

    def _remember_eviction(self, now: float, event: Event) -> None:
        if event.kind == "killed":
            self.evictions.append(Eviction(now, event.container_id, event.cause, event.detail))

    def _write_status(self, now: float, problem: str | None) -> None:
        """The status file (:mod:`preemption.status`); a failure to write it is logged,
        never fatal."""
        squeezed = [
            SqueezedContainer(cid, t.baseline, t.limit, cid in self.reclaimer.state.blacklist)
            for cid, t in sorted(self.reclaimer.tracked.items())
            if t.baseline is not None and t.limit != t.baseline
        ]
        document = status_document(
            node=self.settings.node_id, at_s=now, problem=problem,
            isolation=self.last_isolation, squeeze=squeeze_json(self.last_report, squeezed),
            evictions=list(self.evictions),
        )  # fmt: skip
        self.parts.target.report(status_lines(document))
        path = self.parts.status_file
        if path is None:
            return
        try:
            write_status(path, document)
        except OSError as error:
            log.warning("status file %s not written: %s", path, error)

    def _record(self, event: Event) -> None:
        self.metrics.record_event(event)
        self._log(event)

    def _log(self, event: Event) -> None:
        quiet = event.kind in ("step", "released", "vanished")
        log.log(
            logging.INFO if quiet else logging.WARNING,
            "%s %s: %s",
            event.kind,
            event.container_id,
            event.detail,
        )


def classify_am(ref: ContainerRef, app_kind: TaskKind, settings: AgentSettings) -> TaskKind:
    if ref.is_application_master and not settings.classify.squeeze_application_masters:
        return TaskKind.APPLICATION_MASTER
    return app_kind


class QosTraining:
    """The QoS model and its sample log (JSON lines), retrained as samples arrive."""

    def __init__(self, settings: AgentSettings) -> None:
        # numpy and scikit-learn are loaded only when a model is configured.
        from preemption.qos import QosModel, load_samples

        self.settings = settings.qos
        self.path = Path(settings.qos.samples_file)
        self.model = QosModel(settings.qos.model, seed=settings.reclaim.seed)
        self.samples = load_samples(self.path) if self.path.exists() else []
        self._since_fit = 0
        self._fit_if_ready()

    def add(self, sample: QosSample) -> None:
        from preemption.qos import sample_line

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as stream:
            stream.write(sample_line(sample) + "\n")
        self.samples.append(sample)
        self._since_fit += 1
        if self._since_fit >= self.settings.retrain_every or not self.model.fitted:
            self._fit_if_ready()

    def _fit_if_ready(self) -> None:
        if len(self.samples) >= self.settings.min_samples:
            self.model.fit(self.samples)
            self._since_fit = 0


# ----------------------------------------------------------------- construction


def _checked_isolation(
    settings: AgentSettings, version: str, batch_cpus: str | None
) -> tuple[str, ...]:
    """The files the caps write beyond the backend's own; ``SettingsError`` for what
    this host's cgroups cannot do."""
    where = settings.source
    if version == "v1" and settings.priority.service_cpus:
        raise SettingsError(
            f"{where}: [priority] service_cpus needs cgroup v2 (v1's cpuset is a hierarchy "
            "of its own, which the agent does not manage)"
        )
    if version == "v1" and settings.memory.service_cgroups:
        raise SettingsError(f"{where}: [memory] service_cgroups needs cgroup v2 (memory.low)")
    if batch_cpus is None:
        return ()
    if not batch_cpus:
        raise SettingsError(f"{where}: [priority] service_cpus leaves batch no CPU")
    return ("cpuset.cpus",)


def node_cpu_millicores(settings: AgentSettings) -> int:
    configured = settings.discovery.node_cpu_millicores
    return configured if configured > 0 else (os.cpu_count() or 1) * 1000


def yarn_http(settings: AgentSettings) -> HttpSettings:
    return HttpSettings(
        read_timeout_s=settings.yarn.timeout_s,
        retries=settings.yarn.retries,
        auth="kerberos" if settings.yarn.kerberos else "simple",
        user=settings.yarn.user or None,
    )


def host_nodemanager(settings: AgentSettings, procfs: ProcFs) -> NodeManagerSource:
    """The NodeManager named by the settings, verified every interval."""
    client = NodeManagerClient(
        settings.yarn.nodemanager_url, yarn_http(settings),
        millicores_per_vcore=settings.yarn.millicores_per_vcore,
    )  # fmt: skip
    return NodeManagerWatch(settings.nodemanager_identity(), client, procfs)


def host_backend(settings: AgentSettings) -> CgroupBackend:
    """The v1 or v2 backend the settings ask for, or the one this host has."""
    d = settings.discovery
    root = Path(d.cgroup_root)
    files = CgroupFiles()
    memory = settings.memory_policy()
    if d.cgroup_version == "v2":
        return V2Backend(root, files=files, memory=memory)
    mounts = v1_mounts(Path("/proc/mounts").read_text())
    if root != Path("/sys/fs/cgroup"):
        mounts = {c: root / c for c in ("cpu", "cpuacct", "memory") if (root / c).is_dir()}
    if d.cgroup_version == "v1" or {"cpu", "cpuacct", "memory"} <= set(mounts):
        return V1Backend(mounts, files=files, memory=memory)
    controllers = root / "cgroup.controllers"
    if controllers.exists() and {"cpu", "memory"} <= set(controllers.read_text().split()):
        return V2Backend(root, files=files, memory=memory)
    raise CgroupUnsupported(
        str(root), "neither cgroup v1 (cpu, cpuacct, memory) nor v2 with cpu and memory"
    )


def target_source(settings: AgentSettings) -> TargetSource:
    if settings.agent.mode == "service":
        s = settings.service
        return ServiceTarget(
            s.url, settings.node_id, settings.token(),
            poll_interval_s=s.poll_interval_s, ttl_s=s.ttl_s, timeout_s=s.timeout_s,
        )  # fmt: skip
    standalone = settings.standalone
    reclaim = Amount(standalone.reclaim_cpu_millicores, standalone.reclaim_memory_mb)
    return StandaloneTarget(reclaim, standalone.qos_probe_url or None)
