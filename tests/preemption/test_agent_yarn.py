"""The agent against the real mini YARN (Capacity Scheduler, DefaultContainerExecutor).

One distributed-shell application with two containers burning CPU in queue ``a``
(batch). The agent verifies the real NodeManager (its pid file, its user, its java
main class), reads the containers it lists at its web address, finds them below it in
the process tree, gives each a cgroup of its own, and reclaims 1.2 cores in
200-millicore steps. One container
(the "falterer") stops working once squeezed to 0.6 core: its aliveness check fails
and it is blacklisted. The other keeps its work going under its quota and finishes.
The reclaim can then no longer be met by squeezing, and only after the grace period
is a container killed, through the RM (the faltering one first). Meanwhile a process
whose command line names the NodeManager's class and directory, outside its tree,
starts a child claiming one of the running containers (environment and command line)
and pointing NM_HOST at a trap: it is never moved, and the trap never asked.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from preemption.agent import Agent, AgentParts, target_source
from preemption.cgroups import Cgroup, V1Backend
from preemption.cgroups.procfile import cgroup_membership
from preemption.metrics import AgentMetrics
from preemption.model import ContainerRef
from preemption.node import Event
from preemption.nodemanager import NODEMANAGER_CLASS
from preemption.settings import agent_settings_from_mapping
from preemption.statefile import StateJournal
from preemption.yarnedge import YarnEdge
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.minicluster.confgen import NM_DIR_PROPERTY
from yarn_adapt.testbed.cluster import nodemanager_jvm

from .conftest import CONTROLLERS, Replay, remove_tree
from .factories import ISOLATION_OFF, RECORDED_NM

pytestmark = [pytest.mark.yarn, pytest.mark.slow, pytest.mark.alone]  # CPU measured
BURNER = Path(__file__).with_name("ds_burner.py")
GRACE_S = 6.0
STEADY_WORK_S = 4.0


IMPOSTOR = """
import subprocess, sys, time
claimed, trap_port = sys.argv[1], sys.argv[2]
env = {"CONTAINER_ID": claimed, "NM_HOST": "127.0.0.1", "NM_HTTP_PORT": trap_port}
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)",
     f"/nm-local/usercache/root/appcache/a/{claimed}/default_container_executor.sh"],
    env=env,
)
print(child.pid, flush=True)
child.wait()
"""


def nodemanager_pid(nm_dir: Path) -> int:
    """This cluster's NodeManager JVM (other mini clusters may run on the host). The
    test finds it by its directory property; the agent is only given its pid file."""
    pid = nodemanager_jvm(nm_dir)
    assert pid is not None, f"no NodeManager JVM with -D{NM_DIR_PROPERTY}={nm_dir}"
    return pid


def nodemanager_url(cluster: MiniCluster) -> str:
    [node] = cluster.rm_get("nodes")["nodes"]["node"]
    return f"http://{node['nodeHTTPAddress']}"


def test_a_burning_container_is_squeezed_gradually_a_faltering_one_blacklisted_and_killed_only_after_the_grace_period(  # noqa: E501
    capacity_cluster: MiniCluster,
    v1: V1Backend,
    tmp_path: Path,
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = f"yarn-adapt-test-{os.getpid()}-agent"
    nm_dir = capacity_cluster.layout.nodemanager_dir(0)
    nm_pid = nodemanager_pid(nm_dir)
    pid_file = tmp_path / "hadoop-root-nodemanager.pid"
    pid_file.write_text(f"{nm_pid}\n")
    settings = agent_settings_from_mapping(
        {
            "agent": {"state_file": str(tmp_path / "state.json"), "interval_s": 0.5},
            "standalone": {"reclaim_cpu_millicores": 1200},
            "yarn": {
                "rm": [capacity_cluster.rm_url],
                "kill": "container",
                "nodemanager_url": nodemanager_url(capacity_cluster),
            },
            "discovery": {
                "source": "process-tree",
                "nodemanager_user": pwd.getpwuid(os.geteuid()).pw_name,  # the mini NM's
                "nodemanager_pid_file": str(pid_file),
                "agent_hierarchy": own,
                "node_cpu_millicores": 2000,
            },
            "classify": {"batch_queues": ["a"]},
            "reclaim": {
                "per_task_cpu_millicores": 600,
                "step_cpu_millicores": 200,
                "floor_cpu_millicores": 300,
                "grace_period_s": GRACE_S,
                "kill_cooldown_s": 60.0,
                "settle_s": 0.0,
            },
            **ISOLATION_OFF,
        },
        "test",
    )
    yarn = YarnEdge([capacity_cluster.rm_url], kill_mode="container")
    backend = V1Backend(v1.mounts)
    parts = AgentParts(
        backend=backend,
        journal=StateJournal.open(tmp_path / "state.json", backend.describe()),
        target=target_source(settings),
        yarn=yarn,
        metrics=AgentMetrics(),
    )
    agent = Agent(settings, parts)
    roles = tmp_path / "roles"
    roles.mkdir()
    app = capacity_cluster.submit_shell_app(
        "a", 2, sys.executable, [str(BURNER), str(roles), f"{STEADY_WORK_S:g}"], name="burn"
    )
    events: list[tuple[float, Event]] = []
    unmet_since_at_kill: list[float] = []
    quotas: dict[str, list[str]] = {}
    trap_url, trap = serve({})
    impostor: subprocess.Popen[str] | None = None
    caplog.set_level(logging.INFO, logger="preemption")
    try:
        app.wait_running(120)
        claimed = wait_for_task_container(agent)
        assert_recorded_answer_matches(settings.yarn.nodemanager_url)
        # Its command line has what used to find the NodeManager (its class, this
        # NodeManager's directory property); its child claims a running container.
        impostor = subprocess.Popen(
            [sys.executable, "-c", IMPOSTOR, claimed, trap_url.rsplit(":", 1)[1],
             f"-D{NM_DIR_PROPERTY}={nm_dir}", NODEMANAGER_CLASS],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert impostor.stdout is not None
        impostor_child = int(impostor.stdout.readline())
        impostor_home = cgroup_membership(Path("/proc"), impostor_child, CONTROLLERS)
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            report = agent.tick()
            assert cgroup_membership(Path("/proc"), impostor_child, CONTROLLERS) == impostor_home
            now = time.time()
            if any(e.kind == "killed" for e in report.events):
                now = report.decision.state.last_kill_s or now  # the tick's own clock
                unmet_since_at_kill.append(report.decision.status.unmet_since_s or now)
            events += [(now, e) for e in report.events]
            record_quotas(agent, backend, quotas)
            finished = capacity_cluster.app(app.application_id())["state"] == "FINISHED"
            if finished:
                break
            time.sleep(0.5)
        final = app.wait(60)
    finally:
        agent.shutdown()
        yarn.close()
        remove_tree(v1, own)
        if impostor is not None:
            impostor.kill()
            impostor.wait()
            assert impostor.stdout is not None
            impostor.stdout.close()

    log = "\n".join(f"{at - events[0][0]:6.1f} {e.kind} {e.container_id[-2:]} {e.detail}"
                    for at, e in events) if events else "no events"  # fmt: skip
    role_of = {p.name[len("role-") :]: p.read_text() for p in roles.glob("role-*")}
    steady = next(c for c, r in role_of.items() if r == "steady")
    falterer = next(c for c, r in role_of.items() if r == "falter")

    # The real NodeManager was verified (pid file, user, main class), and trusted.
    assert any(f"NodeManager trusted: pid {nm_pid}" in r.getMessage() for r in caplog.records)
    assert agent.metrics.value("yarn_adapt_agent_untrusted_intervals_total") == 0
    # The impostor outside the NodeManager's tree was never moved (checked every
    # interval above), and its NM_HOST never asked.
    assert trap.asked == []
    # Found: both task containers (never the AM) were managed in cgroups of the agent.
    squeezed = {e.container_id for _, e in events if e.kind == "step"}
    assert squeezed == {steady, falterer}
    # Squeezed gradually: the steady one's quota came down 200 millicores at a time.
    limits = [1000] + [int(q) // 100 for q in quotas[steady] if q != "-1"]
    assert len(limits) >= 3, quotas[steady]
    assert all(0 < a - b <= 200 for a, b in itertools.pairwise(limits)), quotas[steady]
    assert min(limits) >= 300  # never below the floor
    # It stayed alive and finished its work.
    assert (roles / f"done-{steady}").exists()
    assert float((roles / f"done-{steady}").read_text()) >= STEADY_WORK_S
    # The faltering one was blacklisted on its aliveness check.
    blacklisted_events = [e for _, e in events if e.kind == "blacklisted"]
    assert len(blacklisted_events) == 1, log
    [blacklisted] = blacklisted_events
    assert blacklisted.container_id == falterer
    assert "CPU progress fell" in blacklisted.detail
    # Killed, through the RM, only after the grace period, and only the falterer.
    kills = [(at, e) for at, e in events if e.kind == "killed"]
    assert [e.container_id for _, e in kills] == [falterer]
    assert kills[0][0] - unmet_since_at_kill[0] >= GRACE_S  # unmet that long first
    assert min(at for at, e in events if e.kind == "step") < kills[0][0]  # squeezed first
    assert "nothing left to squeeze" in kills[0][1].detail
    assert "FORCEFUL_SHUTDOWN" in final["diagnostics"]
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="killed") == 1
    # Everything the agent changed is back: its cgroups are gone, no state left.
    assert not backend.exists(Cgroup(f"{own}/{steady}"))
    assert not (tmp_path / "state.json").exists()


def assert_recorded_answer_matches(nodemanager: str) -> None:
    """The recorded NM answer the fast tests give the agent (factories.ListedBy) has
    the live NodeManager's shape: every field of a running container, same types."""
    live = requests.get(f"{nodemanager}/ws/v1/node/containers", timeout=30).json()
    recorded = json.loads(RECORDED_NM.read_text())
    [template, *_] = recorded["containers"]["container"]
    running = [c for c in live["containers"]["container"] if c["state"] == "RUNNING"]
    assert running, live
    for field, value in template.items():
        assert type(running[0][field]) is type(value), field


def wait_for_task_container(agent: Agent) -> str:
    """A task container the agent sees below the NodeManager (its id to claim)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [
            c.container_id
            for c in agent.discover()
            if not ContainerRef.parse(c.container_id).is_application_master
        ]
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError("the agent never saw a task container below the NodeManager")


def record_quotas(agent: Agent, backend: V1Backend, quotas: dict[str, list[str]]) -> None:
    for container_id, tracked in agent.reclaimer.tracked.items():
        try:
            quota = backend.read(tracked.group, "cpu.cfs_quota_us")
        except Exception:
            continue
        seen = quotas.setdefault(container_id, [])
        if not seen or seen[-1] != quota:
            seen.append(quota)
