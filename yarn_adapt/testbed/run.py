"""The live co-location testbed: a latency-critical application beside batch work on
a real two-node YARN, with the co-location guard off and on.

Set-up (:class:`Testbed`): the mini cluster of :data:`~yarn_adapt.testbed.cluster.COLOCATION_SPEC`
(two NodeManagers, each pinned to one CPU by a cpuset, so they behave as two
machines); a redis-server and an ingest worker (the tracing package's); the
application of :mod:`~yarn_adapt.testbed.services`, each service pinned into its
node's cpuset; an open-loop load generator (:mod:`~yarn_adapt.testbed.loadgen`);
the guard -- :class:`~yarn_adapt.colocation.guard.ColocationGuard`, the class the
service runs -- reading risk from the trace store and acting on the RM every
``guard_interval_s``.

Measurement (:meth:`Testbed.measure`):

1. *alone*: the application without batch work: its run-alone P95 (measured at the
   start, after a warm-up, and again at the end of the phases; ``p95_alone_ms`` is
   their mean).
2. *phases*: one batch application streams CPU-burning distributed-shell containers
   (:mod:`~yarn_adapt.testbed.burner`) for the rest of the run; the guard alternates
   ``off`` / ``auto`` in a counterbalanced order (on, off, off, on, on, off, ...).
   After each switch the testbed waits until placement has followed (the risky
   node's batch containers drained, or batch back on it), then measures the P95 of
   the requests that arrived during ``phase_s``. Repeats give the run-to-run spread.
3. *makespan* (optional): a fixed batch job (``job_containers`` x ``burn_s`` of
   CPU) with the guard off, then on: its makespan, and the P95 while it ran.

Every latency is relative to the same run's own run-alone figure; the host is
shared, so absolute numbers move with its load.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tracing.ingest import IngestConfig, IngestWorker
from tracing.redisconn import RedisConfig, make_client
from tracing.risk import RiskSettings
from tracing.store import TraceStore
from yarn_adapt.colocation.actuate import RmNodeTotals
from yarn_adapt.colocation.guard import ColocationGuard, MemoryRecorder
from yarn_adapt.colocation.model import GuardMode, GuardSettings
from yarn_adapt.colocation.observe import GuardObserver, TraceStoreRisk
from yarn_adapt.errors import SettingsError, YarnAdaptError
from yarn_adapt.minicluster import cpusets
from yarn_adapt.minicluster.apps import SubmittedApp
from yarn_adapt.minicluster.cluster import MiniCluster
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.processes import ManagedProcess, launch, marked_env
from yarn_adapt.minicluster.redis_server import RedisServer, free_port
from yarn_adapt.testbed import burner, services
from yarn_adapt.testbed.cluster import COLOCATION_SPEC, NODE_VCORES
from yarn_adapt.testbed.usage import ProcessUsageDemand
from yarn_adapt.yarn.apply import PollSettings
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

log = logging.getLogger(__name__)

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
PREFIX = "testbed"


@dataclass(frozen=True, kw_only=True)
class TestbedOptions:
    rate_rps: float = 20.0
    warmup_s: float = 5.0
    alone_s: float = 15.0
    phase_s: float = 20.0
    repeats: int = 3
    settle_max_s: float = 15.0
    burn_s: float = 1.5  # CPU seconds per streaming batch container
    container_mb: int = 512
    makespan: bool = True
    job_containers: int = 8
    job_burn_s: float = 3.0
    guard_interval_s: float = 1.0
    risk_window_s: float = 6.0
    nu: float = 1.0
    demand_headroom: float = 0.5
    cpu_shares: int = 8192  # the testbed's cpu cgroup weight on the shared host (0: none)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.rate_rps <= 0 or self.phase_s <= 0 or self.alone_s <= 0:
            raise ValueError("repeats, rate_rps, phase_s and alone_s must be positive")

    @property
    def order(self) -> list[GuardMode]:
        """Counterbalanced: on off | off on | on off | ..."""
        pairs = [(GuardMode.AUTO, GuardMode.OFF), (GuardMode.OFF, GuardMode.AUTO)]
        return [mode for r in range(self.repeats) for mode in pairs[r % 2]]


@dataclass(frozen=True)
class Window:
    name: str  # alone, off, on, job-off, job-on
    start_s: float
    end_s: float
    risky_node_batch_vcores: float = math.nan  # mean batch vcores on node 0 meanwhile
    other_node_batch_vcores: float = math.nan


@dataclass(frozen=True)
class LatencyFigures:
    requests: int
    failed: int
    p50_ms: float
    p95_ms: float
    p99_ms: float


@dataclass
class TestbedResult:
    options: TestbedOptions
    windows: list[tuple[Window, LatencyFigures]] = field(default_factory=list)
    makespans_s: dict[str, float] = field(default_factory=dict)
    job_states: dict[str, str] = field(default_factory=dict)
    preempted_containers: int = 0
    guard_rounds: int = 0
    guard_problems: list[str] = field(default_factory=list)

    def p95s(self, name: str) -> list[float]:
        return [f.p95_ms for w, f in self.windows if w.name == name]

    def summary(self) -> dict[str, Any]:
        alone, off, on = self.p95s("alone"), self.p95s("off"), self.p95s("on")
        body: dict[str, Any] = {
            "p95_alone_ms": _round(statistics.fmean(alone)) if alone else None,
            "p95_alone_runs_ms": [_round(v) for v in alone],
            "p95_off_ms": _round(statistics.fmean(off)) if off else None,
            "p95_on_ms": _round(statistics.fmean(on)) if on else None,
            "p95_off_spread_ms": _round(_spread(off)),
            "p95_on_spread_ms": _round(_spread(on)),
            "p95_off_runs_ms": [_round(v) for v in off],
            "p95_on_runs_ms": [_round(v) for v in on],
            "p95_off_median_ms": _round(statistics.median(off)) if off else None,
            "p95_on_median_ms": _round(statistics.median(on)) if on else None,
            "p95_off_worst_ms": _round(max(off)) if off else None,
            "p95_on_worst_ms": _round(max(on)) if on else None,
            "batch_makespan_off_s": _round(self.makespans_s.get("off")),
            "batch_makespan_on_s": _round(self.makespans_s.get("on")),
            "batch_jobs": self.job_states,
            "preempted_containers": self.preempted_containers,
            "guard_rounds": self.guard_rounds,
        }
        if alone and on:
            body["p95_on_vs_alone"] = _round(statistics.fmean(on) / statistics.fmean(alone), 3)
        if alone and off:
            body["p95_off_vs_alone"] = _round(statistics.fmean(off) / statistics.fmean(alone), 3)
        return body

    def table(self) -> list[str]:
        lines = [f"{'window':<8} {'requests':>8} {'failed':>6} {'p50 ms':>9} {'p95 ms':>9} "
                 f"{'p99 ms':>9} {'batch vcores node0/node1':>26}"]  # fmt: skip
        for window, figures in self.windows:
            placed = (f"{window.risky_node_batch_vcores:.1f} / {window.other_node_batch_vcores:.1f}"
                      if not math.isnan(window.risky_node_batch_vcores) else "-")  # fmt: skip
            lines.append(
                f"{window.name:<8} {figures.requests:>8} {figures.failed:>6} "
                f"{figures.p50_ms:>9.1f} {figures.p95_ms:>9.1f} {figures.p99_ms:>9.1f} "
                f"{placed:>26}"
            )
        for mode, seconds in self.makespans_s.items():
            lines.append(f"batch job with the guard {mode}: makespan {seconds:.1f} s "
                         f"({self.job_states.get(mode, '?')})")  # fmt: skip
        return lines


def _spread(values: Sequence[float]) -> float | None:
    return max(values) - min(values) if values else None


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


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
        self._samples: list[tuple[float, int, int]] = []  # (t, node0 vcores, node1 vcores)
        self._lock = threading.Lock()
        self.guard: ColocationGuard | None = None
        self.recorder = MemoryRecorder()
        self.loadgen_out = work_dir / "latency.jsonl"
        self.frontends: list[str] = []

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Testbed:
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            self._weigh()
            self._start_redis()
            self._start_services()
            self._start_guard()
            self._thread(self._sample_nodes, "testbed-sampler")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self.guard is not None:
            with _logged("giving the nodes back"):
                self.guard.stop()
            self.guard.close()
        for process in reversed(self._processes):
            process.kill_group()
        self._stack.close()
        self.rm.close()
        if self.options.cpu_shares:
            cpusets.release_weight_group(self.cluster.root)

    def _weigh(self) -> None:
        """The NodeManagers (and so every container they start from now on) and the
        services into one cpu cgroup of weight ``cpu_shares``: on a host shared with
        other work, the testbed's two "machines" then keep about the same share of
        their CPUs from run to run; inside, batch and services compete as equals."""
        if not self.options.cpu_shares:
            self.weight_group: Path | None = None
            return
        self.weight_group = cpusets.create_weight_group(self.cluster.root, self.options.cpu_shares)
        for index in range(2):
            group = self.cluster.nm_cpuset(index)
            assert group is not None
            for pid in cpusets.tasks(group):
                with _logged(f"moving pid {pid} into {self.weight_group}"):
                    cpusets.join(pid, self.weight_group)

    def _thread(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._stack.callback(thread.join, 10)

    # ------------------------------------------------------------------ pieces

    def _start_redis(self) -> None:
        self.redis = RedisServer(self.work_dir / "redis").start()
        self._stack.callback(self.redis.kill)
        self.redis_config = RedisConfig(url=self.redis.url, prefix=PREFIX)
        store = TraceStore(make_client(self.redis_config), self.redis_config)
        worker = IngestWorker(store, IngestConfig(quiet_s=1.0, claim_idle_s=60.0))
        self._thread(lambda: worker.run(self._stop), "testbed-ingest")

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
            _await_answer(url, 60.0)

    def _launch_service(
        self, spec: services.ServiceSpec, port: int, downstream: list[str]
    ) -> ManagedProcess:
        group = self.cluster.nm_cpuset(spec.node)
        assert group is not None
        command = [
            sys.executable, "-m", "yarn_adapt.testbed.services", spec.name,
            "--port", str(port), "--host", self.node_ids[spec.node],
            "--redis", self.redis.url, "--prefix", PREFIX, "--work", str(spec.work),
            *[arg for url in downstream for arg in ("--downstream", url)],
        ]  # fmt: skip
        env = marked_env(self.cluster.root, {"PYTHONPATH": PACKAGE_PARENT})
        name = f"{spec.name}-{spec.node}"
        groups = [group, self.weight_group] if self.weight_group else [group]
        process = launch(name, cpusets.wrap_many(command, groups), self.work_dir / f"{name}.log",
                         env, cwd=self.work_dir)  # fmt: skip
        self._processes.append(process)
        return process

    def _start_guard(self) -> None:
        options = self.options
        opener = lambda: TraceStore(make_client(self.redis_config), self.redis_config)  # noqa: E731
        risk = TraceStoreRisk(opener, window_s=options.risk_window_s,
                              risk_settings=RiskSettings(alpha=0.5))  # fmt: skip
        demand = ProcessUsageDemand(
            lambda: self._service_pids, vcores_per_core=float(NODE_VCORES),
            headroom=options.demand_headroom, clock=time.monotonic,
        )  # fmt: skip
        settings = GuardSettings(
            nu=options.nu, cooldown_s=3 * options.guard_interval_s,
            stale_after_s=max(30.0, 5 * options.risk_window_s), max_step_up_fraction=0.5,
        )  # fmt: skip
        actuator = RmNodeTotals(self.rm, self.work_dir / "state",
                                verify=PollSettings(timeout_s=15.0, interval_s=0.1))  # fmt: skip
        self.guard = ColocationGuard(
            settings, GuardObserver(risk, demand), actuator, self.recorder, mode=GuardMode.OFF,
            reclaim_ttl_s=10 * options.guard_interval_s,
        )  # fmt: skip
        self._thread(self._guard_loop, "testbed-guard")

    def _guard_loop(self) -> None:
        assert self.guard is not None
        while not self._stop.wait(self.options.guard_interval_s):
            with _logged("guard round"):
                self.guard.run_round(self.rm.nodes())

    def _sample_nodes(self) -> None:
        while not self._stop.wait(0.5):
            with _logged("sampling nodes"):
                used = {n.id: n.used.vcores for n in self.rm.nodes()}
                sample = (time.time(), used.get(self.node_ids[0], 0), used.get(self.node_ids[1], 0))
                with self._lock:
                    self._samples.append(sample)

    def start_load(self) -> None:
        command = [
            sys.executable, "-m", "yarn_adapt.testbed.loadgen",
            "--rate", str(self.options.rate_rps), "--out", str(self.loadgen_out),
            "--seed", str(self.options.seed),
            *[arg for url in self.frontends for arg in ("--target", url)],
        ]  # fmt: skip
        env = marked_env(self.cluster.root, {"PYTHONPATH": PACKAGE_PARENT})
        self._processes.append(launch("loadgen", command, self.work_dir / "loadgen.log", env,
                                      cwd=self.work_dir))  # fmt: skip

    # ------------------------------------------------------------------ control

    def set_guard(self, mode: GuardMode) -> None:
        assert self.guard is not None
        self.guard.set_mode(mode, "testbed")
        if mode is GuardMode.AUTO:
            self.guard.run_round(self.rm.nodes())

    def settle(self, mode: GuardMode) -> None:
        """Wait until placement follows the guard: the risky node without batch (on),
        or batch back on it (off); at most ``settle_max_s``."""
        deadline = time.monotonic() + self.options.settle_max_s
        risky = self.node_ids[0]
        while time.monotonic() < deadline:
            node = self.rm.node(risky)
            if mode is GuardMode.AUTO and node.total.vcores == 0 and node.used.vcores == 0:
                return
            if mode is GuardMode.OFF and node.used.vcores >= 1:
                return
            time.sleep(0.25)

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
        ended = time.time()
        with self._lock:
            inside = [s for s in self._samples if began <= s[0] <= ended]
        risky = statistics.fmean(s[1] for s in inside) if inside else math.nan
        other = statistics.fmean(s[2] for s in inside) if inside else math.nan
        return Window(name, began, ended, risky, other)

    # ------------------------------------------------------------------ the run

    def measure(self) -> TestbedResult:
        options = self.options
        result = TestbedResult(options)
        windows = []
        burner_path = self.work_dir / "burner.py"
        shutil.copy(burner.__file__, burner_path)
        self.start_load()
        time.sleep(options.warmup_s)  # client threads and connections up, traces flowing
        windows.append(self.window("alone", options.alone_s))
        self.set_guard(GuardMode.AUTO)  # the AM lands on the other node
        stream = self._submit_stream(burner_path)
        stream.wait_running(300.0)
        for mode in options.order:
            self.set_guard(mode)
            self.settle(mode)
            windows.append(self.window("on" if mode is GuardMode.AUTO else "off", options.phase_s))
        result.preempted_containers += _preempted(self.cluster, stream.application_id())
        stream.kill()
        self.set_guard(GuardMode.OFF)
        self.drained()
        windows.append(self.window("alone", options.alone_s))  # alone again, at the end
        if options.makespan:
            for mode in (GuardMode.OFF, GuardMode.AUTO):
                windows.append(self._job(mode, burner_path, result))
        self._finish(result, windows)
        return result

    def _submit_stream(self, burner_path: Path) -> SubmittedApp:
        containers = 2000  # more than any run needs: the app is killed at the end
        return self.cluster.submit_shell_app(
            "default", containers, sys.executable, [str(burner_path), str(self.options.burn_s)],
            container_mb=self.options.container_mb, vcores=1, name="batch-stream",
        )  # fmt: skip

    def _job(self, mode: GuardMode, burner_path: Path, result: TestbedResult) -> Window:
        label = "on" if mode is GuardMode.AUTO else "off"
        self.set_guard(mode)
        app = self.cluster.submit_shell_app(
            "default", self.options.job_containers, sys.executable,
            [str(burner_path), str(self.options.job_burn_s)],
            container_mb=self.options.container_mb, vcores=1, name=f"batch-job-{label}",
        )  # fmt: skip
        began = time.time()
        report = app.wait(1800.0)
        ended = time.time()
        result.makespans_s[label] = (report["finishedTime"] - report["startedTime"]) / 1000.0
        result.job_states[label] = f"{report['state']}/{report['finalStatus']}"
        result.preempted_containers += _preempted(self.cluster, app.application_id())
        with self._lock:
            inside = [s for s in self._samples if began <= s[0] <= ended]
        risky = statistics.fmean(s[1] for s in inside) if inside else math.nan
        other = statistics.fmean(s[2] for s in inside) if inside else math.nan
        return Window(f"job-{label}", began, ended, risky, other)

    def _finish(self, result: TestbedResult, windows: list[Window]) -> None:
        for process in self._processes:
            if process.name == "loadgen":
                process.popen.terminate()
                process.popen.wait(timeout=30)
        records = _latency_records(self.loadgen_out)
        for window in windows:
            result.windows.append((window, figures_in(records, window)))
        result.guard_rounds = len(self.recorder.reports)
        problems = {r.problem for r in self.recorder.reports if r.problem}
        result.guard_problems = sorted(problems)


# --------------------------------------------------------------------------- helpers


def nodemanager_id(cluster: MiniCluster, index: int, timeout_s: float = 30.0) -> str:
    """The node id NodeManager ``index`` registered as (from its log)."""
    log_path = cluster.layout.logs_dir / f"nodemanager-{index}.log"
    deadline = time.monotonic() + timeout_s
    marker = "Registered with ResourceManager as "
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            if marker in line:
                return line.split(marker, 1)[1].split()[0]
        time.sleep(0.2)
    raise MiniClusterError(f"nodemanager-{index} did not log its node id ({log_path})")


def _await_answer(url: str, timeout_s: float) -> None:
    import requests

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise MiniClusterError(f"{url} did not answer within {timeout_s:.0f} s")


def _preempted(cluster: MiniCluster, app_id: str) -> int:
    app = cluster.app(app_id)
    return int(app.get("numNonAMContainerPreempted", 0)) + int(
        app.get("numAMContainerPreempted", 0)
    )


def _latency_records(path: Path) -> list[tuple[float, float, bool]]:
    records = []
    for line in path.read_text().splitlines():
        try:
            arrival, latency, ok = json.loads(line)
        except ValueError:
            continue  # a line cut by the stop
        records.append((float(arrival), float(latency), bool(ok)))
    return records


def figures_in(records: Sequence[tuple[float, float, bool]], window: Window) -> LatencyFigures:
    inside = [(latency, ok) for arrival, latency, ok in records
              if window.start_s <= arrival <= window.end_s]  # fmt: skip
    latencies = sorted(latency for latency, _ in inside)
    if not latencies:
        return LatencyFigures(0, 0, math.nan, math.nan, math.nan)
    return LatencyFigures(
        requests=len(latencies),
        failed=sum(1 for _, ok in inside if not ok),
        p50_ms=_percentile(latencies, 50),
        p95_ms=_percentile(latencies, 95),
        p99_ms=_percentile(latencies, 99),
    )


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@contextmanager
def _logged(what: str) -> Iterator[None]:
    try:
        yield
    except (YarnAdaptError, OSError) as exc:
        log.warning("testbed: %s failed: %s", what, exc)


def run_testbed(cluster: MiniCluster, options: TestbedOptions, work_dir: Path) -> TestbedResult:
    with Testbed(cluster, options, work_dir) as testbed:
        return testbed.measure()


QUICK = {"alone_s": 6.0, "phase_s": 8.0, "repeats": 3, "settle_max_s": 8.0,
         "job_containers": 4, "job_burn_s": 2.0}  # fmt: skip
FULL: dict[str, float | int] = {}


def options_from(quick: bool, seed: int, overrides: Mapping[str, str]) -> TestbedOptions:
    """The testbed's options: the full or quick form, then ``KEY=VALUE`` overrides
    (a field of :class:`TestbedOptions`); a bad key or value is a SettingsError."""
    values: dict[str, Any] = {**(QUICK if quick else FULL), "seed": seed}
    kinds = {f.name: f.type for f in fields(TestbedOptions)}
    for key, text in overrides.items():
        if key not in kinds:
            raise SettingsError(f"--set {key}: unknown testbed option (known: {', '.join(kinds)})")
        values[key] = _value(key, text, str(kinds[key]))
    try:
        return TestbedOptions(**values)
    except ValueError as exc:
        raise SettingsError(f"testbed options: {exc}") from exc


def _value(key: str, text: str, kind: str) -> object:
    try:
        if kind == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        return int(text) if kind == "int" else float(text)
    except ValueError as exc:
        raise SettingsError(f"--set {key}={text}: expected {kind}") from exc


def run_on_new_cluster(options: TestbedOptions, *, keep: bool = False) -> TestbedResult:
    """Start the testbed's cluster, run, stop it (``keep``: leave its directory)."""
    with MiniCluster(COLOCATION_SPEC, keep_dir=keep) as cluster:
        return run_testbed(cluster, options, cluster.root / "testbed")


def result_json(result: TestbedResult) -> dict[str, Any]:
    body = result.summary()
    body["options"] = asdict(result.options)
    return body
