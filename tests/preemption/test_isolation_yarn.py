"""The agent's isolation against the real mini YARN: a latency-critical service keeps its
P95 within its target while batch burns beside it, and no node total is lowered.

The ``colocation_cluster``: two NodeManagers of 4 vcores / 4 GB, each pinned to one
CPU by a cpuset, as two machines. Beside each NodeManager, in its cpuset, runs a
replica of the testbed's traced ``pricing`` service (spans to a Redis; ``WORK``, about
10 ms of CPU a request) under its own open-loop load generator (the testbed's, pinned
there too). One distributed-shell application puts a CPU burner into every container
both nodes fit, in queue ``default``; nobody calls updateNodeResource.

Each replica's target is ``TARGET_FACTOR`` x its P95 alone: the median of three
windows with the burners idle, before, between and after the two measured windows.
A P95 over one 6 s window (about six slowest requests) moves with the host's load:
the same replica alone measured 39, 63 and 76 ms in one CI run, so a target from the
quietest window was missed by a replica the agent protected (131 ms beside 1,089 ms
without it, CI of stop 40). That batch hurts the service is asserted within each
measured window, where both replicas share the host's load: the one without an agent
is ``HARM_FACTOR`` x slower than the one with it (CI r31: two of node 0's three alone
windows near 740 ms made its target 1.8 s, above what batch did to it; against the
other replica in the same window the harm stood out).
Twice, one node
runs the real agent (``python -m preemption run`` as operators run it, with its
shipped isolation defaults: the NodeManager verified by its pid, its containers read
at its web address, the batch ones moved into the agent's own hierarchy, which gets
batch's low CPU weight and the suppress loop's quota; no reclaim is asked, so
Algorithm 2 does nothing) while the other runs none; the second time the roles are
swapped. Both replicas are measured in the same window, so the host's other work
(this machine is shared) weighs on "on" and "off" alike, and the swap takes the two
CPUs' differences out. Each agent is stopped with SIGTERM and must put back all it
changed.

As in the testbed, the NodeManagers (so every container), the services and the load
generators share one cpu cgroup, so the two "machines" keep their CPUs on the shared
host; inside it batch and services start as equals (weight 8192, the testbed's: any
more and the burners would starve the rest of the host). The cluster's control plane
-- the RM, the JobHistory Server, this test, its Redis and the agents -- gets a group
of the same weight beside it: in the root group, with both CPUs saturated, they were
starved for a minute at a time (an agent acted minutes late and took longer than a
SIGKILL's 10 s wait to die).

The agents are started before the windows and trust no NodeManager until their
window begins (their ``nodemanager_pid_file`` is written then: the agent's own trust
check), so their start-up is not in the windows; the burners burn only while a file
exists, so the application master and the containers start before the first alone
window, and the others need no new containers.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from preemption.cgroups import Cgroup, V1Backend
from yarn_adapt.minicluster import MiniCluster, cpusets
from yarn_adapt.minicluster.apps import SubmittedApp
from yarn_adapt.minicluster.processes import ManagedProcess, launch, marked_env
from yarn_adapt.minicluster.redis_server import RedisServer, free_port
from yarn_adapt.testbed.cluster import nodemanager_id, nodemanager_pid

from .conftest import remove_tree

pytestmark = [pytest.mark.yarn, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
RATE_RPS = 20.0
WORK = 120_000  # the service's CPU per request (about 10 ms): long enough to queue
WINDOW_S = 8.0  # a measured window (batch burning)
ALONE_S = 6.0  # a window with the burners idle
TARGET_FACTOR = 2.5  # a replica's target: x its P95 alone (a loaded, shared host)
HARM_FACTOR = 1.5  # in one window: the replica without an agent x the one with it
WEIGHT = 8192  # the testbed's cpu cgroup against the rest of the host
BURNER = """
import sys, time
from pathlib import Path
go = Path(sys.argv[1])
while True:  # burn while the file exists, idle while it does not
    if not go.exists():
        time.sleep(0.1)
        continue
    for value in range(20_000):
        value * value % 7
"""


@dataclass
class Side:
    """One node: its index, its service replica's latency log, its agent's files."""

    index: int
    latency_log: Path
    directory: Path
    hierarchy: str  # the agent's hierarchy (below the weight group)

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    @property
    def status_file(self) -> Path:
        return self.directory / "status.json"

    @property
    def pid_file(self) -> Path:
        """The agent's ``nodemanager_pid_file``: written when its window begins."""
        return self.directory / "nodemanager.pid"


@pytest.fixture
def sides(colocation_cluster: MiniCluster, tmp_path: Path) -> Iterator[list[Side]]:
    """Both nodes' service replicas and load generators, in the testbed's weight group."""
    cluster = colocation_cluster
    weight = cpusets.create_weight_group(cluster.root, WEIGHT)
    control = cpusets.control_plane(cluster.root, WEIGHT, [os.getpid(), *cluster.control_pids()])
    processes: list[ManagedProcess] = []
    with control:  # the RM, this test, its Redis and the agents it starts
        redis = RedisServer(tmp_path / "redis").start()
        try:
            found = [start_side(cluster, index, weight, redis.url, tmp_path, processes)
                     for index in range(2)]  # fmt: skip
            yield found
        finally:
            for process in reversed(processes):
                process.kill_group()
            redis.kill()
            cpusets.release_weight_group(cluster.root)
        for controller in ("cpuacct", "memory"):  # the agents' hierarchies made it there
            with contextlib.suppress(OSError):
                (Path("/sys/fs/cgroup") / controller / weight.name).rmdir()


def start_side(
    cluster: MiniCluster, index: int, weight: Path, redis_url: str, tmp_path: Path,
    processes: list[ManagedProcess],
) -> Side:  # fmt: skip
    cpuset = cluster.nm_cpuset(index)
    assert cpuset is not None
    for pid in cpusets.tasks(cpuset):  # the NodeManager: its containers follow it
        cpusets.join(pid, weight)
    directory = tmp_path / f"node-{index}"
    directory.mkdir()
    env = marked_env(cluster.root, {"PYTHONPATH": str(ROOT)})
    port = free_port()
    service = [
        sys.executable, "-m", "yarn_adapt.testbed.services", "pricing", "--port", str(port),
        "--host", nodemanager_id(cluster, index), "--redis", redis_url, "--prefix", "iso",
        "--work", str(WORK),
    ]  # fmt: skip
    processes.append(launch(f"pricing-{index}", cpusets.wrap_many(service, [cpuset, weight]),
                            directory / "pricing.log", env, cwd=directory))  # fmt: skip
    url = f"http://127.0.0.1:{port}/pricing"
    wait_answering(url)
    latency_log = directory / "latency.jsonl"
    load = [
        sys.executable, "-m", "yarn_adapt.testbed.loadgen", "--target", url,
        "--rate", str(RATE_RPS), "--out", str(latency_log), "--duration", "600",
        "--seed", str(index),
    ]  # fmt: skip
    processes.append(launch(f"loadgen-{index}", cpusets.wrap_many(load, [cpuset, weight]),
                            directory / "loadgen.log", env, cwd=directory))  # fmt: skip
    hierarchy = f"{weight.relative_to(cpusets.cpu_root())}/iso-batch-{index}"
    return Side(index, latency_log, directory, hierarchy)


def wait_answering(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(requests.RequestException):
            if requests.get(url, timeout=5).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer")


def p95(side: Side, start: float, end: float) -> float:
    """The P95 (ms) of the requests to ``side``'s replica that arrived in [start, end)."""
    latencies = []
    for line in side.latency_log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            arrival, latency, _ = json.loads(line)
            if start <= arrival < end:
                latencies.append(latency)
    assert len(latencies) >= 0.5 * RATE_RPS * (end - start), (side.index, len(latencies))
    latencies.sort()
    return float(latencies[round(0.95 * (len(latencies) - 1))])


def agent_config(cluster: MiniCluster, side: Side) -> Path:
    """The shipped defaults, but for what this node is: its NodeManager, its CPU."""
    node_id = nodemanager_id(cluster, side.index)
    node = next(n for n in cluster.rm_get("nodes")["nodes"]["node"] if n["id"] == node_id)
    config = side.directory / "agent.toml"
    config.write_text(
        f"""
[agent]
node_id = "{node_id}"
state_file = "{side.state_file}"
interval_s = 0.5

[yarn]
rm = ["{cluster.rm_url}"]
nodemanager_url = "http://{node["nodeHTTPAddress"]}"
millicores_per_vcore = 250

[discovery]
source = "process-tree"
nodemanager_pid_file = "{side.pid_file}"
nodemanager_user = "{pwd.getpwuid(os.geteuid()).pw_name}"
agent_hierarchy = "{side.hierarchy}"
node_cpu_millicores = 1000

[classify]
batch_queues = ["default"]

[suppress]
cpus = "{cluster.spec.nm_cpusets[side.index]}"
"""
    )
    return config


def status(side: Side) -> dict[str, Any]:
    try:
        return dict(json.loads(side.status_file.read_text()))
    except (OSError, ValueError):
        return {}


def suppressing(side: Side) -> bool:
    """The agent has batch in its hierarchy under a quota below one CPU."""
    isolation = status(side).get("isolation") or {}
    suppress = isolation.get("suppress")
    return (
        isolation.get("mode") == "agent-hierarchy"
        and bool(suppress)
        and (suppress["quota_millicores"] < 1000)
    )


@dataclass
class Window:
    on: float  # the P95 of the replica beside the agent
    off: float  # the other replica's, in the same window
    samples: list[dict[str, Any]]  # the agent's status, twice a second
    exit_code: int | None
    after: tuple[str, str, bool]  # its hierarchy's quota, shares, state file left


def start_agent(cluster: MiniCluster, side: Side) -> subprocess.Popen[bytes]:
    """The agent of ``side``'s node; it acts on nothing until its pid file exists."""
    config = agent_config(cluster, side)
    with (side.directory / "agent.log").open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "preemption", "run", "--config", str(config)],
            stdout=log, stderr=log, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip


def measured_with_agent(
    cluster: MiniCluster, v1: V1Backend, agent: subprocess.Popen[bytes], on: Side, off: Side
) -> Window:
    """One window with ``agent`` acting on ``on``'s node only; then SIGTERM, and what
    it left behind."""
    on.pid_file.write_text(f"{nodemanager_pid(cluster, on.index)}\n")
    samples: list[dict[str, Any]] = []
    try:
        wait_for_agent(lambda: suppressing(on), 30, agent, on)
        began = time.time()
        while time.time() < began + WINDOW_S:
            samples.append(status(on))
            time.sleep(0.5)
        ended = time.time()
    finally:
        agent.send_signal(signal.SIGTERM)
        # (not root-caused, docs/flakes.md: twice the agent logged its full restore
        # within a second of SIGTERM and then had not exited 30 s later)
        code = agent.wait(90)
    group = Cgroup(on.hierarchy)
    after = (v1.read(group, "cpu.cfs_quota_us"), v1.read(group, "cpu.shares"),
             on.state_file.exists())  # fmt: skip
    return Window(p95(on, began, ended), p95(off, began, ended), samples, code, after)


def wait_for_agent(
    probe: Callable[[], bool], timeout_s: float, agent: subprocess.Popen[bytes], side: Side
) -> None:
    """:func:`wait_until`; on a timeout the agent writes its threads' stacks to its log
    (SIGUSR1) and the failure shows the log's end and the last status (docs/flakes.md:
    once, in a run with CPU burners beside it, the first trusted tick took 45 s)."""
    try:
        wait_until(probe, timeout_s)
    except AssertionError as exc:
        kernel = kernel_waits(agent.pid)
        agent.send_signal(signal.SIGUSR1)
        time.sleep(2.0)
        log = (side.directory / "agent.log").read_text(errors="replace")[-6000:]
        shown = (f"{exc}; status {status(side)}; in the kernel:\n{kernel}\n"
                 f"the agent's log ends:\n{log}")  # fmt: skip
        raise AssertionError(shown) from None


def kernel_waits(agent_pid: int) -> str:
    """Where the agent's threads, and every process in uninterruptible sleep, wait in
    the kernel (their state, wchan and kernel stack): what a stuck cgroup write waits on."""
    shown = [_thread_waits(Path(f"/proc/{agent_pid}/task/{tid}"))
             for tid in _listed(Path(f"/proc/{agent_pid}/task"))]  # fmt: skip
    for pid in _listed(Path("/proc")):
        if pid != str(agent_pid) and _state(Path(f"/proc/{pid}")) == "D":
            shown.append(_thread_waits(Path(f"/proc/{pid}")))
    return "\n".join(shown)


def _listed(directory: Path) -> list[str]:
    with contextlib.suppress(OSError):
        return sorted(entry.name for entry in directory.iterdir() if entry.name.isdigit())
    return []


def _state(proc: Path) -> str:
    with contextlib.suppress(OSError, IndexError):
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
    return "?"


def _thread_waits(proc: Path) -> str:
    parts = []
    for name in ("comm", "wchan", "stack"):
        try:
            parts.append((proc / name).read_text(errors="replace").strip())
        except OSError as exc:
            parts.append(f"({name}: {exc.strerror})")
    return f"{proc} state {_state(proc)} " + " | ".join(parts)


def test_the_agents_isolation_keeps_the_services_p95_within_its_target_with_no_node_lowered(
    colocation_cluster: MiniCluster, sides: list[Side], v1: V1Backend, tmp_path: Path
) -> None:
    cluster = colocation_cluster
    totals = node_totals(cluster)
    go = tmp_path / "go"
    app = submit_burners(cluster, go)
    agents = [start_agent(cluster, side) for side in sides]
    windows: list[Window] = []
    try:
        app.wait_running(120)
        wait_until(lambda: all(len(batch_on(cluster, i)) >= 3 for i in range(2)), 60)
        alones = [alone(sides)]  # the burners wait: the services are alone
        for agent, on, off in ((agents[0], sides[0], sides[1]), (agents[1], sides[1], sides[0])):
            go.touch()
            time.sleep(1.0)  # every burner busy
            windows.append(measured_with_agent(cluster, v1, agent, on, off))
            go.unlink()
            time.sleep(1.0)  # every burner idle
            alones.append(alone(sides))
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait(10)
        app.kill()
        for side in sides:
            remove_tree(v1, side.hierarchy)
    targets = [TARGET_FACTOR * statistics.median(node) for node in zip(*alones, strict=True)]
    logs = "\n".join((s.directory / "agent.log").read_text()[-1500:] for s in sides)
    report = (
        f"alone {[[round(p, 1) for p in window] for window in alones]} ms; "
        f"targets {[round(t, 1) for t in targets]} ms; per window (on node, on, off): "
        + ", ".join(f"({n}, {w.on:.1f}, {w.off:.1f})" for n, w in enumerate(windows))
    )
    print(report)
    for n, window in enumerate(windows):
        on = n
        # Stopped with SIGTERM, the agent put back all it changed on its hierarchy.
        assert window.exit_code == 0, logs
        assert window.after == ("-1", "1024", False), logs
        # Its suppress loop held batch to a quota below the CPU the burners wanted,
        # and batch used no more than that; its hierarchy had batch's low weight.
        suppress = [s["isolation"]["suppress"] for s in window.samples]
        assert all(s["quota_millicores"] < 1000 for s in suppress), suppress
        used = statistics.fmean(s["batch_used_millicores"] for s in suppress)
        allowed = statistics.fmean(s["quota_millicores"] for s in suppress)
        # (each sample sets the CPU used over the last second beside the quota at its
        # end, and the quota moves every second: a margin, far below the 1000 wanted)
        assert used <= 1.3 * allowed + 50 and used < 700, (used, allowed)
        assert all(s["isolation"]["weighted_groups"] == 1 for s in window.samples)
        # Beside the agent the service is within its target; on the other node, in
        # the same window, batch makes it at least half again as slow (how much more
        # moves with the host: 1.9x to 11x measured; docs/flakes.md).
        assert window.on <= targets[on], report
        assert window.off > HARM_FACTOR * window.on, report
    # No node total was lowered: the agents alone protected the services.
    assert node_totals(cluster) == totals
    # The effect exceeds the spread between windows of the same kind.
    ons, offs = [w.on for w in windows], [w.off for w in windows]
    spread = max(max(ons) / min(ons), max(offs) / min(offs))
    assert statistics.fmean(offs) / statistics.fmean(ons) > spread, report


def submit_burners(cluster: MiniCluster, go: Path) -> SubmittedApp:
    """A CPU burner in every container both nodes fit; each burns while ``go`` exists
    (the testbed's burner, made to wait: the AM and the containers start first)."""
    burner_path = go.with_name("burner.py")
    burner_path.write_text(BURNER)
    return cluster.submit_shell_app(
        "default", 12, sys.executable, [str(burner_path), str(go)], container_mb=512,
        name="burners",
    )  # fmt: skip


def alone(sides: list[Side]) -> list[float]:
    """Each replica's P95 over one window with the burners idle."""
    began = time.time()
    time.sleep(ALONE_S)
    return [p95(side, began, time.time()) for side in sides]


def node_totals(cluster: MiniCluster) -> dict[str, int]:
    nodes = cluster.rm_get("nodes")["nodes"]["node"]
    return {n["id"]: n["totalResource"]["vCores"] for n in nodes}


def batch_on(cluster: MiniCluster, index: int) -> list[str]:
    """The running task containers (not the AM) NodeManager ``index`` lists."""
    node_id = nodemanager_id(cluster, index)
    node = next(n for n in cluster.rm_get("nodes")["nodes"]["node"] if n["id"] == node_id)
    answer = requests.get(f"http://{node['nodeHTTPAddress']}/ws/v1/node/containers", timeout=10)
    listed = (answer.json().get("containers") or {}).get("container", [])
    return [c["id"] for c in listed if c["state"] == "RUNNING" and not c["id"].endswith("_000001")]


def wait_until(probe: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s} s")
