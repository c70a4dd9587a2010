"""The live co-location testbed: a latency-critical application beside batch work on
a real two-node YARN, with the co-location guard off, on alone, and on with the node
agents.

Set-up (:class:`Testbed`): the mini cluster of :data:`~yarn_adapt.testbed.cluster.COLOCATION_SPEC`
(two NodeManagers, each pinned to one CPU by a cpuset and seeing that machine in
/proc, so they behave and report as two machines); a redis-server; the application
of :mod:`~yarn_adapt.testbed.services`, each service pinned into its node's cpuset;
an open-loop load generator (:mod:`~yarn_adapt.testbed.loadgen`); and the product as
an operator runs it (:mod:`~yarn_adapt.testbed.product`): ``yarn-adapt serve`` from
``conf/testbed/yarn-adapt.toml`` (the guard, with its ingest worker, reading risk
from the traces and each node's demand from its NodeManager, acting on the RM every
period; its mode switched over the API), and one ``yarn-adapt agent run`` per
NodeManager from ``conf/testbed/yarn-adapt-agent.toml`` with its own agent token
(:mod:`~yarn_adapt.testbed.agents`), started for the phases that use it. The testbed
itself only drives load and measures.

Measurement (:meth:`Testbed.measure`):

1. *alone*: the application without batch work: its run-alone P95 (measured at the
   start, after a warm-up, and again at the end of the phases; ``p95_alone_ms`` is
   their mean). The application's QoS target is ``qos_target_factor`` x the P95 of
   its traced requests in the first alone window (the guard's own measure: the entry
   service's spans); it goes into the service's ``[colocation] qos_targets``, and the
   service is restarted on it.
2. *phases*: one batch application streams distributed-shell containers
   (:mod:`~yarn_adapt.testbed.burner`: CPU burners, and with ``batch_mix`` = mix
   memory-bandwidth hogs in half of them) for the rest of the run, while the load
   follows ``load_profile`` (steps: low, high, low and a burst over each
   ``phase_s``), through the phases ``off`` (no guard, no agent: YARN with its CPU
   weights), ``guard`` (the guard alone; no agent
   runs) and ``on`` (the guard and the node agents: yarn-adapt), and with
   ``baselines`` ``static`` (no guard; the testbed closes the risky node to batch
   through the RM, as an operator would), ``slack-only`` and ``toposch-paper`` (the
   guard's other policies, ``serve`` restarted under each, with the agents), in
   counterbalanced order (:attr:`~yarn_adapt.testbed.options.TestbedOptions.order`).
   After each switch the testbed waits until placement has followed (the risky node
   down to the floor, with no batch above it, or batch back on it; for ``off`` also
   every agent limit given back; for the other policies, their totals steady),
   then measures the requests that arrived during ``phase_s``. Repeats give the
   run-to-run spread; ``policies`` in the JSON sets the phases side by side
   (:meth:`~yarn_adapt.testbed.results.TestbedResult.side_by_side`). Before a ``guard``
   phase and after the last phase the agents are stopped (SIGTERM) and their restore
   is checked: state file gone, no agent cgroup left, every process they had moved
   back where it came from. The last stop has batch of its own that outlives it: the
   stream is killed, long burners run with the risky node open, then the guard and
   the agents come on, and the agents are stopped while they squeeze them.
3. *makespan* (optional): a fixed batch job (``job_containers`` x ``job_burn_s`` of
   CPU) in every phase: its makespan, and the P95 while it ran.

Every latency is relative to the same run's own run-alone figure; the host is
shared, so absolute numbers move with its load.

For a look inside them every window also carries, per node, the share of its CPU
batch used and the share the services used
(:class:`~yarn_adapt.testbed.usage.NodeCpuMeter`: a cpuacct group holding both
NodeManagers, hence every container, and the services), and per service its request
rate, CPU time per request and the P50/P95 of its own work's wall time (each
service's ``--stats``); ``result_json`` lists them under ``windows``.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from preemption.cgroups.v1 import v1_mounts
from tracing.redisconn import RedisConfig, make_client
from tracing.risk import RiskSettings
from tracing.store import TraceStore
from yarn_adapt.colocation.model import DEFAULT_MIN_VISIBLE_FRACTION, GuardMode
from yarn_adapt.colocation.observe import TraceStoreRisk
from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.minicluster import cpusets
from yarn_adapt.minicluster.apps import SubmittedApp
from yarn_adapt.minicluster.cluster import MiniCluster
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.processes import ManagedProcess, launch, marked_env
from yarn_adapt.minicluster.redis_server import RedisServer, free_port
from yarn_adapt.model import Resources
from yarn_adapt.progress import report
from yarn_adapt.testbed import burner, services
from yarn_adapt.testbed.agents import (
    AgentCounts,
    AgentPlan,
    NodeAgent,
    RestoreCheck,
    SqueezeProgress,
    Steady,
    remove_hierarchy,
    squeezed_now,
    stop_agents,
    wait_until,
)
from yarn_adapt.testbed.cluster import (
    COLOCATION_SPEC,
    NODE_MEMORY_MB,
    NODE_VCORES,
    await_answer,
    nodemanager_id,
    nodemanager_pid,
    preempted,
)
from yarn_adapt.testbed.options import (
    AGENT_PHASES,
    GUARD,
    OFF,
    ON,
    PHASE_POLICIES,
    STATIC,
    TestbedOptions,
)
from yarn_adapt.testbed.product import (
    AGENT_EXAMPLE,
    SERVICE_EXAMPLE,
    ServiceProcess,
    Tables,
    load_example,
    merged,
    write_settings,
)
from yarn_adapt.testbed.results import (
    LearnedProgress,
    TestbedResult,
    Window,
    figures_in,
    latency_records,
    service_figures,
    stats_records,
)
from yarn_adapt.testbed.usage import CpuSample, NodeCpuMeter, cpu_shares
from yarn_adapt.testbed.yarncgroups import YarnCpuWeights
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

log = logging.getLogger(__name__)

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
PREFIX = "testbed"
# The final stop's own batch: long burners (CPU seconds each), enough to fill both nodes,
# so the agents are stopped while they squeeze processes that cannot end meanwhile.
STOP_BURN_S = 600.0
STOP_CONTAINERS = 2 * NODE_VCORES
ENTRY_SERVICE = "frontend"
BATCH_QUEUE = "default"


# --------------------------------------------------------------------------- testbed


class Testbed:
    """Everything beside the cluster; use as a context manager (it cleans up)."""

    def __init__(self, cluster: MiniCluster, options: TestbedOptions, work_dir: Path) -> None:
        if not cluster.spec.nm_cpusets or cluster.spec.nodemanagers != 2:
            raise MiniClusterError("the testbed needs two NodeManagers pinned by cpusets")
        self.cluster = cluster
        self.options = options
        self.work_dir = work_dir
        self.rm = ResourceManagerClient([cluster.rm_url], HttpSettings(read_timeout_s=15.0))
        self.node_ids = [nodemanager_id(cluster, index) for index in range(2)]
        self._stack = ExitStack()
        self._processes: list[ManagedProcess] = []
        self._service_pids: dict[str, list[int]] = {node: [] for node in self.node_ids}
        self._stop = threading.Event()
        # (t, node0 vcores, node1 vcores, node0 reclaimed mc, node1 reclaimed mc)
        self._samples: list[tuple[float, int, int, float, float]] = []
        self._cpu_samples: list[CpuSample] = []
        self.meter: NodeCpuMeter | None = None
        self.accounting_group: Path | None = None
        self._nm_pids: dict[str, list[int]] = {node: [] for node in self.node_ids}
        self._lock = threading.Lock()
        self.service: ServiceProcess | None = None
        self.weights: YarnCpuWeights | None = None
        self.service_config = work_dir / "yarn-adapt.toml"
        self.service_settings: Tables = {}  # what service_config holds
        self.guard_cycles = 0  # the running serve's, as GET /api/guard says
        self.guard_cycles_before = 0  # the serves stopped before it (a policy change)
        self.guard_problems: set[str] = set()
        self.learned = LearnedProgress()
        self.policy = options.policy  # the guard's policy the running serve has
        self.qos_target_ms: float | None = None
        self.static_closed: Resources | None = None  # the risky node's total before STATIC
        self.loadgen_out = work_dir / "latency.jsonl"
        self.frontends: list[str] = []
        self.agents: list[NodeAgent] = []
        self.mounts = v1_mounts(Path("/proc/mounts").read_text())
        self.restores: list[RestoreCheck] = []
        self.agent_counts = AgentCounts()
        self.agent_starts = 0

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Testbed:
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            self._weigh()
            self._start_redis()
            self._start_service()
            self._start_services()
            self._weigh_containers()
            self._make_agents()
            self._thread(self._sample_nodes, "testbed-sampler")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        with _logged("stopping the node agents"):
            self.stop_agents()
        if self.weights is not None:
            with _logged("removing the containers' YARN cgroups"):
                self.weights.close()
        if self.service is not None:
            with _logged("stopping yarn-adapt serve (it gives the nodes back)"):
                self.service.close()
        for process in reversed(self._processes):
            process.kill_group()
        self._stack.close()
        self.rm.close()
        if self.agents:
            remove_hierarchy(self.mounts, self.agents[0].plan.hierarchy, self.weight_group)
        cpusets.release_weight_group(self.cluster.root)
        if self.accounting_group is not None and self.accounting_group != self.weight_group:
            _release_group(self.accounting_group, self.mounts["cpuacct"])

    def _weigh(self) -> None:
        """The NodeManagers (and so every container they start from now on) and the
        services into one cpu cgroup of weight ``cpu_shares``: on a host shared with
        other work, the testbed's two "machines" then keep about the same share of
        their CPUs from run to run; inside, batch and services compete as equals. The
        control plane (the RM, the JobHistory Server, this process with the guard, and
        the agents and the Redis it starts) gets a group of the same weight beside it,
        or the saturated "machines" starve it."""
        self.weight_group = cpusets.create_weight_group(self.cluster.root, self.options.cpu_shares)
        control = [os.getpid(), *self.cluster.control_pids()]
        self._stack.enter_context(
            cpusets.control_plane(self.cluster.root, self.options.cpu_shares, control)
        )
        self.accounting_group = self._accounting_group()
        for index in range(2):
            group = self.cluster.nm_cpuset(index)
            assert group is not None
            for pid in cpusets.tasks(group):
                self._nm_pids[self.node_ids[index]].append(pid)
                for target in {self.weight_group, self.accounting_group}:
                    with _logged(f"moving pid {pid} into {target}"):
                        cpusets.join(pid, target)
        cpus = [int(c) for c in self.cluster.spec.nm_cpusets]
        self.meter = NodeCpuMeter(
            self.accounting_group, cpus, self.node_ids, lambda: self._service_pids,
            self._nm_pids, time.time,
        )  # fmt: skip

    def _accounting_group(self) -> Path:
        """A cpuacct group named as the weight group (the agents' cgroups nest in it,
        as in the cpu hierarchy); the weight group itself when cpu and cpuacct are
        mounted together."""
        group = self.mounts["cpuacct"] / self.weight_group.name
        if group == self.weight_group:
            return group
        try:
            group.mkdir(exist_ok=True)
        except OSError as exc:
            raise MiniClusterError(f"cannot create the cpuacct cgroup {group}: {exc}") from exc
        return group

    def _thread(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._stack.callback(thread.join, 10)

    # ------------------------------------------------------------------ pieces

    def _start_redis(self) -> None:
        self.redis = RedisServer(self.work_dir / "redis").start()
        self._stack.callback(self.redis.kill)
        self.redis_config = RedisConfig(url=self.redis.url, prefix=PREFIX)

    def _start_services(self) -> None:
        ports = {index: free_port() for index in range(len(services.LAYOUT))}
        by_name = {spec.name: index for index, spec in enumerate(services.LAYOUT)}
        for index, spec in enumerate(services.LAYOUT):
            downstream = [f"http://127.0.0.1:{ports[by_name[n]]}/{n}" for n in spec.downstream]
            process = self._launch_service(spec, ports[index], downstream)
            self._service_pids[self.node_ids[spec.node]].append(process.pid)
            if spec.name == "frontend":
                self.frontends.append(f"http://127.0.0.1:{ports[index]}/frontend")
        for url in self.frontends:
            await_answer(url, 60.0)

    def _launch_service(
        self, spec: services.ServiceSpec, port: int, downstream: list[str]
    ) -> ManagedProcess:
        group = self.cluster.nm_cpuset(spec.node)
        assert group is not None
        command = [
            sys.executable, "-m", "yarn_adapt.testbed.services", spec.name,
            "--port", str(port), "--host", self.node_ids[spec.node],
            "--redis", self.redis.url, "--prefix", PREFIX, "--work", str(spec.work),
            "--stats", str(self._stats_path(spec)),
            *[arg for url in downstream for arg in ("--downstream", url)],
        ]  # fmt: skip
        env = marked_env(self.cluster.root, {"PYTHONPATH": PACKAGE_PARENT})
        name = f"{spec.name}-{spec.node}"
        extra = {g for g in (self.weight_group, self.accounting_group) if g is not None}
        groups = [group, *sorted(extra)]
        process = launch(name, cpusets.wrap_many(command, groups), self.work_dir / f"{name}.log",
                         env, cwd=self.work_dir)  # fmt: skip
        self._processes.append(process)
        return process

    def _stats_path(self, spec: services.ServiceSpec) -> Path:
        return self.work_dir / f"stats-{spec.name}-{spec.node}.jsonl"

    def _start_service(self) -> None:
        """``yarn-adapt serve`` from the testbed's example settings (the guard off, no
        QoS target yet: :meth:`_set_qos_target` restarts it with the one it measures)."""
        self.service = ServiceProcess(self.service_config, free_port(), self.cluster.root,
                                      self.work_dir)  # fmt: skip
        self._write_service_config(qos_target_ms=None)
        self.service.start()

    def _write_service_config(self, qos_target_ms: float | None) -> None:
        assert self.service is not None
        self.qos_target_ms = qos_target_ms
        targets = [] if qos_target_ms is None else [f"{ENTRY_SERVICE}={qos_target_ms:.3f}"]
        overrides: dict[str, dict[str, Any]] = {
            "yarn": {"rm": [self.cluster.rm_url]},
            "state": {"dir": str(self.work_dir / "service-state")},
            "http": {"port": self.service.port},
            "tracing": {"redis_url": self.redis.url},
            "colocation": {"policy": self.policy, "qos_targets": targets},
        }
        if self.options.demand != "settings":
            overrides["colocation"]["demand"] = self.options.demand
        self.service_settings = merged(load_example(SERVICE_EXAMPLE), overrides)
        write_settings(self.service_settings, self.service_config)

    def service_pids(self) -> dict[str, list[int]]:
        """Node id -> the pids of the application's services on it."""
        return {node: list(pids) for node, pids in self._service_pids.items()}

    def _open_trace_store(self) -> TraceStore:
        return TraceStore(make_client(self.redis_config), self.redis_config)

    @property
    def floor_vcores(self) -> int:
        """What batch always keeps of a node (the service's ``min_visible_fraction``)."""
        section = self.service_settings.get("colocation", {})
        fraction = float(section.get("min_visible_fraction", DEFAULT_MIN_VISIBLE_FRACTION))
        return math.ceil(fraction * NODE_VCORES)

    def _weigh_containers(self) -> None:
        """YARN's CPU weights for every container from now on (``yarn_cgroups``)."""
        if not self.options.yarn_cgroups:
            return
        assert self.weight_group is not None
        pids = [nodemanager_pid(self.cluster, index) for index in range(2)]
        self.weights = YarnCpuWeights(self.weight_group, pids, mounts=self.mounts).start()

    def _make_agents(self) -> None:
        """One agent per NodeManager (started when a phase needs them)."""
        assert self.service is not None and self.weight_group is not None
        relative = str(self.weight_group.relative_to(cpusets.cpu_root()))
        yarn = None if self.weights is None else relative  # hadoop-yarn-<index> below it
        plan = AgentPlan(example=AGENT_EXAMPLE, hierarchy=relative, yarn_hierarchy=yarn)
        web = {node.id: node.http_address for node in self.rm.nodes()}
        for index, node_id in enumerate(self.node_ids):
            agent = NodeAgent(
                index=index, node_id=node_id,
                nodemanager_pid=nodemanager_pid(self.cluster, index),
                nodemanager_url=f"http://{web[node_id]}",
                rm_url=self.cluster.rm_url, service_url=self.service.url,
                token=self.service.agent_token(node_id),
                plan=plan, work_dir=self.work_dir, cluster_root=self.cluster.root,
                package_parent=PACKAGE_PARENT,
            )  # fmt: skip
            self.agents.append(agent)

    def _sample_nodes(self) -> None:
        while not self._stop.wait(0.5):
            with _logged("sampling nodes"):
                used = {n.id: n.used.vcores for n in self.rm.nodes()}
                held = [self._reclaimed(agent) for agent in self.agents[:2]]
                sample = (time.time(), used.get(self.node_ids[0], 0),
                          used.get(self.node_ids[1], 0), *held)  # fmt: skip
                cpu = self.meter.sample() if self.meter is not None else None
                self._note_guard()
                with self._lock:
                    self._samples.append(sample)  # type: ignore[arg-type]
                    if cpu is not None:
                        self._cpu_samples.append(cpu)

    def _note_guard(self) -> None:
        """The service's guard as ``GET /api/guard`` shows it: its cycles, and any
        problem reading risk its last round had."""
        status = self.service.status() if self.service is not None else None
        if status is None:
            return
        health = status.get("health") or {}
        last = status.get("last_round") or {}
        learned = status.get("learned_demand") or []
        with self._lock:
            self.guard_cycles = max(self.guard_cycles, int(health.get("cycles") or 0))
            if last.get("risk_problem"):
                self.guard_problems.add(str(last["risk_problem"]))
            if learned:
                self.learned.note(learned)

    @staticmethod
    def _reclaimed(agent: NodeAgent) -> float:
        counts = agent.counts() if agent.running else None
        return counts.reclaimed_millicores if counts is not None else 0.0

    def start_load(self) -> None:
        command = [
            sys.executable, "-m", "yarn_adapt.testbed.loadgen",
            "--rate", str(self.options.rate_rps), "--out", str(self.loadgen_out),
            "--seed", str(self.options.seed),
            "--profile", self.options.load_profile, "--cycle", str(self.options.phase_s),
            *[arg for url in self.frontends for arg in ("--target", url)],
        ]  # fmt: skip
        env = marked_env(self.cluster.root, {"PYTHONPATH": PACKAGE_PARENT})
        self._processes.append(launch("loadgen", command, self.work_dir / "loadgen.log", env,
                                      cwd=self.work_dir))  # fmt: skip

    # ------------------------------------------------------------------ control

    def set_guard(self, mode: GuardMode) -> None:
        """The guard's mode, set over the service's API as an operator does."""
        assert self.service is not None
        self.service.set_mode(str(mode))

    def enter(self, phase: str) -> None:
        """Switch to ``phase`` and wait until it has taken effect: off and static with
        the guard off and no agent (static closes the risky node itself), the others
        with the guard on under the phase's policy (``serve`` restarted with it when
        it changes, as an operator would), the agents running in
        :data:`AGENT_PHASES`."""
        if phase in (OFF, STATIC):
            self.set_guard(GuardMode.OFF)
            self.stop_agents()  # their isolation would protect the services
            if phase == STATIC:
                self._close_risky_node()
            else:
                self._open_risky_node()
        else:
            self._open_risky_node()
            self._use_policy(PHASE_POLICIES.get(phase, self.options.policy))
            if phase not in AGENT_PHASES:
                self.stop_agents()
            self.set_guard(GuardMode.AUTO)
            if phase in AGENT_PHASES:
                self.start_agents()
        self.settle(phase)

    def _use_policy(self, policy: str) -> None:
        """Restart ``serve`` under the guard's ``policy`` if it runs another (stopped
        with SIGTERM, it gives every node back)."""
        if policy == self.policy:
            return
        assert self.service is not None
        self._note_guard()
        self.service.stop()
        with self._lock:
            self.guard_cycles_before += self.guard_cycles
            self.guard_cycles = 0
        self.policy = policy
        self._write_service_config(self.qos_target_ms)
        self.service.start()

    def _close_risky_node(self) -> None:
        """The static answer: the risky node's total at the guard's floor, set once
        through the RM (after the guard, off, has given it back: its whole machine,
        what it registered with, is what :meth:`_open_risky_node` puts back)."""
        if self.static_closed is not None:
            return
        risky, whole = self.node_ids[0], Resources(NODE_MEMORY_MB, NODE_VCORES)
        if not wait_until(lambda: self.rm.node(risky).total == whole, self.options.settle_max_s):
            log.warning("testbed: the guard had not given %s back before static", risky)
        floor = self.floor_vcores
        closed = Resources(max(1024, NODE_MEMORY_MB * floor // NODE_VCORES), floor)
        self.rm.update_node_resource(risky, closed)
        self.static_closed = whole

    def _open_risky_node(self) -> None:
        """The risky node back to the total it had before :meth:`_close_risky_node`."""
        if self.static_closed is None:
            return
        risky, whole = self.node_ids[0], self.static_closed
        self.rm.update_node_resource(risky, whole)
        wait_until(lambda: self.rm.node(risky).total == whole, self.options.settle_max_s)
        self.static_closed = None

    def settle(self, phase: str) -> None:
        """Wait until placement follows the guard: the risky node hidden from batch and
        without batch (guard, static), or hidden and its batch gone or squeezed by its
        agent as far as it will go (on: the agents up; a squeezed container runs on,
        slowly, instead of finishing), or batch back on it and every agent limit given
        back (off), or, for the other policies, the agents up and every node's total
        steady for two agent steps; at most ``settle_max_s``. A window measures the
        phase, not the way into it: the agent squeezes in mini-steps, so "on" waits for
        its last step (what it reclaimed reaches what its target asks, or stops
        growing), not its first."""
        risky = self.node_ids[0]
        squeeze = SqueezeProgress(still_s=2 * self.agents[0].plan.settle_s)
        floor = self.floor_vcores
        steady = Steady(still_s=2 * self.agents[0].plan.settle_s)

        def settled() -> bool:
            node = self.rm.node(risky)
            if phase == OFF:
                return node.used.vcores >= 1 and not any(map(self._reclaimed, self.agents))
            hidden = node.total.vcores <= floor
            if phase in (GUARD, STATIC):
                return hidden and node.used.vcores <= node.total.vcores
            if phase != ON:  # another policy: its own decisions, whatever they are
                totals = tuple(n.total for n in self.rm.nodes())
                return all(agent.ready() for agent in self.agents) and steady.done(totals)
            if not all(agent.ready() for agent in self.agents):
                return False
            if not hidden:
                return False
            return node.used.vcores <= node.total.vcores or squeeze.done(self.agents[0].counts())

        wait_until(settled, self.options.settle_max_s)

    def start_agents(self) -> None:
        for agent in self.agents:
            if not agent.running:
                agent.start()
                self.agent_starts += 1

    def stop_agents(self) -> None:
        """SIGTERM the running agents; record their figures and the restore check."""
        running = [agent for agent in self.agents if agent.running]
        if not running:
            return
        check = stop_agents(running, self.mounts)
        for agent in running:
            self.agent_counts = self.agent_counts.plus(agent.last_counts)
        self.restores.append(check)

    def drained(self) -> None:
        """Wait until no batch runs on either node (at most ``settle_max_s``)."""
        deadline = time.monotonic() + self.options.settle_max_s
        while time.monotonic() < deadline:
            if all(node.used.vcores == 0 for node in self.rm.nodes()):
                return
            time.sleep(0.25)

    def window(self, name: str, seconds: float) -> Window:
        began = time.time()
        time.sleep(seconds)
        return self._window(name, began, time.time())

    def _window(self, name: str, began: float, ended: float) -> Window:
        with self._lock:
            inside = [s for s in self._samples if began <= s[0] <= ended]
            counters = [s for s in self._cpu_samples if began <= s.at_s <= ended]
        shares = cpu_shares(counters[0], counters[-1]) if len(counters) >= 2 else None
        batch, lc = (shares.batch, shares.lc) if shares is not None else ((), ())
        if not inside:
            return Window(name, began, ended, batch_cpu_share=batch, lc_cpu_share=lc)
        means = [statistics.fmean(s[i] for s in inside) for i in range(1, 5)]
        return Window(name, began, ended, means[0], means[1], (means[2], means[3]), batch, lc)

    # ------------------------------------------------------------------ the run

    def measure(self) -> TestbedResult:
        options = self.options
        result = TestbedResult(options)
        windows = []
        burner_path = self.work_dir / "burner.py"
        shutil.copy(burner.__file__, burner_path)
        self.start_load()
        time.sleep(options.warmup_s)  # client threads and connections up, traces flowing
        windows.append(self.window("alone", options.alone_window_s))
        self._set_qos_target(result)
        self.set_guard(GuardMode.AUTO)  # the AM lands on the other node
        stream = self._submit_stream(burner_path)
        stream.wait_running(300.0)
        for done, phase in enumerate(options.order, start=1):
            self.enter(phase)
            windows.append(self.window(phase, options.phase_s))
            report("testbed phase", done, len(options.order), phase)
        result.preempted_containers += preempted(self.cluster, stream.application_id())
        stream.kill()
        self._final_stop(burner_path, result)  # while batch runs (and is squeezed)
        self.set_guard(GuardMode.OFF)
        self.drained()
        windows.append(self.window("alone", options.alone_window_s))  # alone again, at the end
        if options.makespan:
            for phase in options.jobs:
                windows.append(self._job(phase, burner_path, result))
            self.stop_agents()
            self._open_risky_node()
        self._finish(result, windows)
        return result

    def _final_stop(self, burner_path: Path, result: TestbedResult) -> None:
        """Stop the agents while they squeeze running containers: the restore check is
        only worth something on live processes. The stream's containers are short (a
        squeezed one may end while the agents stop, and leave nothing to check), so the
        stop has batch of its own: long burners (``STOP_BURN_S`` of CPU each, killed
        after the stop) started with the risky node open to batch, then the guard and
        the agents on; the agents are stopped once one holds a process in its cgroups,
        then the burners' application is killed."""
        self.set_guard(GuardMode.OFF)  # batch may use the risky node again
        self._open_risky_node()
        long_burners = self.cluster.submit_shell_app(
            BATCH_QUEUE, STOP_CONTAINERS, sys.executable, [str(burner_path), str(STOP_BURN_S)],
            container_mb=self.options.container_mb, vcores=1, name="batch-stop",
        )  # fmt: skip
        try:
            long_burners.wait_running(300.0)
            self.settle(OFF)  # its containers run on the risky node too
            self.enter(ON)
            if not wait_until(self._squeezing, 2 * self.options.settle_max_s):
                log.warning("testbed: no agent squeezed a container before the stop")
            self.stop_agents()
            app_id = long_burners.application_id()
            result.preempted_containers += preempted(self.cluster, app_id)
        finally:
            long_burners.kill()

    def _squeezing(self) -> bool:
        return any(squeezed_now(agent, self.mounts) for agent in self.agents)

    def _set_qos_target(self, result: TestbedResult) -> None:
        """The application's target: ``qos_target_factor`` x its traced P95 alone (the
        guard's own measure: the entry service's spans), written into the service's
        settings; the service is restarted on them, as an operator would."""
        assert self.service is not None
        alone = TraceStoreRisk(
            self._open_trace_store, window_s=self.options.alone_window_s,
            risk_settings=RiskSettings(alpha=0.5),
        )  # fmt: skip
        try:
            readings = alone.read(time.time()).qos
        finally:
            alone.close()
        entry = next((r for r in readings if r.application == ENTRY_SERVICE), None)
        if entry is None:
            raise MiniClusterError(f"no traced {ENTRY_SERVICE} requests in the alone window")
        result.alone_traced_p95_ms = entry.latency_ms
        result.qos_target_ms = self.options.qos_target_factor * entry.latency_ms
        self.service.stop()
        self._write_service_config(result.qos_target_ms)
        self.service.start()

    def _submit_stream(self, burner_path: Path) -> SubmittedApp:
        containers = 2000  # more than any run needs: the app is killed at the end
        return self.cluster.submit_shell_app(
            "default", containers, sys.executable,
            [str(burner_path), str(self.options.burn_s), self.options.batch_mix],
            container_mb=self.options.container_mb, vcores=1, name="batch-stream",
        )  # fmt: skip

    def _job(self, label: str, burner_path: Path, result: TestbedResult) -> Window:
        self.enter(label)
        app = self.cluster.submit_shell_app(
            "default", self.options.job_containers, sys.executable,
            [str(burner_path), str(self.options.job_burn_s), self.options.batch_mix],
            container_mb=self.options.container_mb, vcores=1, name=f"batch-job-{label}",
        )  # fmt: skip
        began = time.time()
        report = app.wait(1800.0)
        ended = time.time()
        result.makespans_s[label] = (report["finishedTime"] - report["startedTime"]) / 1000.0
        result.job_states[label] = f"{report['state']}/{report['finalStatus']}"
        result.preempted_containers += preempted(self.cluster, app.application_id())
        return self._window(f"job-{label}", began, ended)

    def _finish(self, result: TestbedResult, windows: list[Window]) -> None:
        for process in self._processes:
            if process.name == "loadgen":
                process.popen.terminate()
                process.popen.wait(timeout=30)
        records = latency_records(self.loadgen_out)
        stats = {(spec.name, spec.node): stats_records(self._stats_path(spec))
                 for spec in services.LAYOUT}  # fmt: skip
        for window in windows:
            figures = tuple(service_figures(name, node, rows, window)
                            for (name, node), rows in stats.items())  # fmt: skip
            window = replace(window, services=figures)
            result.windows.append((window, figures_in(records, window)))
        self._note_guard()
        result.guard_rounds = self.guard_cycles_before + self.guard_cycles
        result.serve_starts = self.service.starts if self.service is not None else 0
        result.learned = self.learned
        result.guard_problems = sorted(self.guard_problems)
        result.agent_counts = self.agent_counts
        result.restores = list(self.restores)
        result.agent_starts = self.agent_starts
        result.demand = str(self.service_settings.get("colocation", {}).get("demand", "learned"))
        if self.weights is not None:
            result.cgroup_weights = self.weights.to_json()


# --------------------------------------------------------------------------- helpers


def _release_group(group: Path, root: Path) -> None:
    """Move what still runs in ``group`` to ``root``; delete it (when it empties)."""
    if not group.is_dir():
        return
    for pid in cpusets.tasks(group):
        with _logged(f"moving pid {pid} out of {group}"):
            cpusets.join(pid, root)
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    log.warning("testbed: could not remove %s", group)


@contextmanager
def _logged(what: str) -> Iterator[None]:
    try:
        yield
    except (YarnAdaptError, OSError) as exc:
        log.warning("testbed: %s failed: %s", what, exc)


def run_testbed(cluster: MiniCluster, options: TestbedOptions, work_dir: Path) -> TestbedResult:
    with Testbed(cluster, options, work_dir) as testbed:
        return testbed.measure()


def run_on_new_cluster(options: TestbedOptions, *, keep: bool = False) -> TestbedResult:
    """Start the testbed's cluster, run, stop it (``keep``: leave its directory)."""
    with MiniCluster(COLOCATION_SPEC, keep_dir=keep) as cluster:
        return run_testbed(cluster, options, cluster.root / "testbed")
