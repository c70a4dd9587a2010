"""The isolation loop inside the agent, on a directory laid out like a cgroup v2
hierarchy (as test_cgroup_v2.py) and a /proc of the test's own (``stat`` and
``meminfo``, so the node's use is what each case says). Containers are classified
through the RM's recorded answers (served over HTTP to the real YarnEdge): one batch
application in queue ``a``, one latency-critical in ``b``.

With LinuxContainerExecutor cgroups every listed batch container gets batch's weight
and its share of the suppress quota, never a latency-critical one; the quota composes
with Algorithm 2's squeeze (the stricter is written, aliveness is judged against it);
under memory pressure batch is capped and the configured service cgroups protected;
eviction happens only with kills allowed; the status file and ``agent status`` say
what was done; every change is journalled and restored."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from preemption.agent import Agent, AgentParts, target_source
from preemption.cgroups import Cgroup, V1Backend, V2Backend
from preemption.cgroups.base import MIB
from preemption.cli import main as agent_main
from preemption.errors import KillFailed
from preemption.isolator import IsolationPlan, NodeIsolator
from preemption.metrics import AgentMetrics
from preemption.model import NO_TARGET, Amount
from preemption.node import ManagedContainer, NodeReclaimer, NodeSettings
from preemption.nodestat import NodeStat
from preemption.reclaim import ReclaimSettings
from preemption.settings import agent_settings_from_mapping
from preemption.statefile import StateJournal, restore
from preemption.yarnedge import YarnEdge
from yarn_adapt.errors import SettingsError

from .conftest import Replay
from .factories import ListedBy
from .test_cgroup_v1 import agent_for

ROOT = Path(__file__).resolve().parents[2]
RECORDED_APP = ROOT / "tests" / "fixtures" / "rm" / "capacity-app-running.json"
RECORDED_INFO = ROOT / "tests" / "fixtures" / "rm" / "capacity-info.json"
BATCH_APP = "application_1700000000000_0007"
LC_APP = "application_1700000000000_0008"
BATCH = "container_1700000000000_0007_01_000002"
LC = "container_1700000000000_0008_01_000002"
SERVICE = "system.slice/shop.service"


class Clock:
    """The agent's and the isolation loop's clocks: one second per interval."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Node:
    """The laid-out cgroup tree and /proc, advanced one interval at a time."""

    def __init__(self, root: Path, proc: Path, pid: int) -> None:
        self.root, self.proc, self.pid = root, proc, pid
        self.ticks = {"busy": 0, "idle": 0}
        self.groups = {cid: self._group(f"hadoop-yarn/{cid}") for cid in (BATCH, LC)}
        self._group(SERVICE, extra={"memory.low": "0"})
        self.meminfo(total_mb=16000, available_mb=8000)
        self.advance(node_millicores=0, batch_millicores=0)

    def _group(self, relpath: str, extra: dict[str, str] | None = None) -> Path:
        group = self.root / relpath
        group.mkdir(parents=True)
        files = {"cgroup.procs": f"{self.pid}\n", "cpu.stat": "usage_usec 0\n",
                 "memory.current": str(300 * MIB), "memory.events": "oom_kill 0\n",
                 "cpu.max": "max 100000", "cpu.weight": "100", "memory.high": "max",
                 "memory.max": "max", **(extra or {})}  # fmt: skip
        for name, text in files.items():
            (group / name).write_text(text)
        return group

    def meminfo(self, *, total_mb: int, available_mb: int) -> None:
        self.proc.mkdir(exist_ok=True)
        (self.proc / "meminfo").write_text(
            f"MemTotal: {total_mb * 1024} kB\nMemAvailable: {available_mb * 1024} kB\n"
        )

    def advance(self, *, node_millicores: int, batch_millicores: int) -> None:
        """One second passes: CPU 0 was this busy, the batch container used this."""
        self.ticks["busy"] += node_millicores // 10  # 100 ticks a second
        self.ticks["idle"] += 100 - node_millicores // 10
        busy, idle = self.ticks["busy"], self.ticks["idle"]
        idle_cpus = "".join(f"cpu{n} 0 0 0 {idle + busy} 0 0 0 0 0 0\n" for n in (1, 2, 3))
        (self.proc / "stat").write_text(
            f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n" + idle_cpus
        )
        stat = self.groups[BATCH] / "cpu.stat"
        used = int(stat.read_text().split()[1]) + batch_millicores * 1000
        stat.write_text(f"usage_usec {used}\n")

    def read(self, container: str, name: str) -> str:
        return (self.groups[container] / name).read_text()


@pytest.fixture
def sleeper() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield child.pid
    child.kill()
    child.wait()


@pytest.fixture
def rm(serve: Callable[[dict[str, str]], tuple[str, Replay]]) -> str:
    """The RM's recorded answer for each application, in its queue."""
    recorded = json.loads(RECORDED_APP.read_text())
    routes = {"/ws/v1/cluster/info": RECORDED_INFO.read_text()}  # the active RM
    for app, queue in ((BATCH_APP, "root.a"), (LC_APP, "root.b")):
        body = {"app": {**recorded["app"], "id": app, "queue": queue}}
        routes[f"/ws/v1/cluster/apps/{app}"] = json.dumps(body)
    url, _ = serve(routes)
    return url


class RecordingKiller:
    def __init__(self) -> None:
        self.killed: list[tuple[str, str]] = []

    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        self.killed.append((container_id, reason))


def agent_on(node: Node, tmp_path: Path, rm: str, **tables: dict[str, object]) -> Agent:
    raw: dict[str, dict[str, object]] = {
        "agent": {"state_file": str(tmp_path / "state.json")},
        "yarn": {"rm": [rm], "task_progress": False},
        "discovery": {"source": "cgroup", "cgroup_version": "v2",
                      "cgroup_root": str(node.root), "node_cpu_millicores": 1000},
        "classify": {"batch_queues": ["a"], "latency_critical_queues": ["b"]},
        "reclaim": {"per_task_cpu_millicores": 1000, "step_cpu_millicores": 500,
                    "settle_s": 0.0, "floor_memory_mb": 16},
        "suppress": {"cpus": "0"},
    }  # fmt: skip
    for table, values in tables.items():
        raw[table] = {**raw.get(table, {}), **values}
    settings = agent_settings_from_mapping(raw, "test")
    backend = V2Backend(node.root, memory=settings.memory_policy())
    clock = Clock()
    parts = AgentParts(
        backend=backend, journal=StateJournal.open(tmp_path / "state.json", backend.describe()),
        target=target_source(settings), yarn=YarnEdge([rm]), killer=RecordingKiller(),
        nodemanager=ListedBy(os.getpid(), [BATCH, LC]), metrics=AgentMetrics(), clock=clock,
        nodestat=NodeStat(node.proc), status_file=tmp_path / "status.json",
    )  # fmt: skip
    agent = Agent(settings, parts)
    agent.isolator.clock = clock
    return agent


def tick(agent: Agent, node: Node, *, node_mc: int, batch_mc: int) -> None:
    """One interval: a second of use on the node, then the agent's tick."""
    clock = agent.parts.clock
    assert isinstance(clock, Clock)
    clock.now += 1.0
    node.advance(node_millicores=node_mc, batch_millicores=batch_mc)
    agent.tick()


@pytest.fixture
def node(tmp_path: Path, sleeper: int) -> Node:
    return Node(tmp_path / "cgroup", tmp_path / "proc", sleeper)


def test_each_listed_batch_container_gets_batchs_weight_and_quota_never_a_latency_critical_one(
    node: Node, tmp_path: Path, rm: str
) -> None:
    agent = agent_on(node, tmp_path, rm)
    agent.tick()  # the first reading: the weight at once, no quota yet
    assert (node.read(BATCH, "cpu.weight"), node.read(BATCH, "cpu.max")) == ("1", "max 100000")
    tick(agent, node, node_mc=900, batch_mc=600)
    # 1000 x 0.65 - (900 - 600, what is not batch) = 350 millicores, all of it the
    # one batch container's.
    assert node.read(BATCH, "cpu.max") == "35000 100000"
    assert agent.metrics.value("yarn_adapt_agent_suppress_quota_millicores") == 350
    assert agent.metrics.value("yarn_adapt_agent_batch_cpu_used_millicores") == 600
    # The latency-critical container is never touched.
    assert [node.read(LC, f) for f in ("cpu.max", "cpu.weight", "memory.high")] == [
        "max 100000", "100", "max",
    ]  # fmt: skip
    # Journalled before the change; the status file says what was done.
    journal = json.loads((tmp_path / "state.json").read_text())
    recorded = {(e["group"], e["key"]): e["value"] for e in journal["originals"]}
    assert recorded == {(f"hadoop-yarn/{BATCH}", "cpu.max"): "max 100000",
                        (f"hadoop-yarn/{BATCH}", "cpu.weight"): "100"}  # fmt: skip
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["isolation"]["mode"] == "per-container"
    assert status["isolation"]["suppress"]["quota_millicores"] == 350
    assert status["isolation"]["suppress"]["node_used_millicores"] == 900
    tick(agent, node, node_mc=1000, batch_mc=100)  # the rest wants it all: the floor
    assert node.read(BATCH, "cpu.max") == "20000 100000"
    tick(agent, node, node_mc=100, batch_mc=100)  # all free again: up by 100 at most
    assert node.read(BATCH, "cpu.max") == "30000 100000"
    agent.shutdown()
    assert (node.read(BATCH, "cpu.max"), node.read(BATCH, "cpu.weight")) == ("max 100000", "100")
    assert not (tmp_path / "state.json").exists()


def test_the_suppress_share_and_the_squeeze_compose_and_aliveness_is_judged_by_the_stricter(
    node: Node, tmp_path: Path, rm: str
) -> None:
    # Algorithm 2 takes 500 of the container's 1000; the suppress loop leaves it 350.
    # A task getting 300 of its 350 is working; judged against the squeeze's 500 with
    # a strict ratio (0.8), it would be called hung and blacklisted.
    agent = agent_on(node, tmp_path, rm, standalone={"reclaim_cpu_millicores": 500},
                     reclaim={"cpu_progress_ratio": 0.8}, priority={"enabled": False})  # fmt: skip
    agent.tick()
    tick(agent, node, node_mc=1000, batch_mc=1000)  # baseline 1000; first step to 500
    assert agent.reclaimer.tracked[BATCH].limit.cpu_millicores == 500
    tick(agent, node, node_mc=900, batch_mc=300)  # suppress: 650 - 600 = 50 -> the floor, 200
    assert node.read(BATCH, "cpu.max") == "20000 100000"  # the stricter of 500 and 200
    assert agent.reclaimer.effective_cpu_millicores(BATCH) == 200
    # That interval's check (the first after the step) found it alive: 300 >= 0.8 x 200.
    assert agent.reclaimer.state.blacklist == frozenset()
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="blacklisted") == 0
    tick(agent, node, node_mc=500, batch_mc=190)  # budget 650 - 310 = 340: up to 300
    assert node.read(BATCH, "cpu.max") == "30000 100000"
    for _ in range(3):  # 400, 500, 600: the squeeze's 500 is the stricter from then on
        tick(agent, node, node_mc=200, batch_mc=190)
    assert node.read(BATCH, "cpu.max") == "50000 100000"
    assert agent.reclaimer.effective_cpu_millicores(BATCH) == 500
    agent.shutdown()
    assert node.read(BATCH, "cpu.max") == "max 100000"
    assert not (tmp_path / "state.json").exists()


def test_under_memory_pressure_batch_is_capped_services_protected_and_released_after(
    node: Node, tmp_path: Path, rm: str
) -> None:
    agent = agent_on(node, tmp_path, rm, memory={"service_cgroups": [SERVICE]})
    (node.root / SERVICE / "memory.current").write_text(str(700 * MIB))
    agent.tick()
    assert node.read(BATCH, "memory.high") == "max"
    node.meminfo(total_mb=16000, available_mb=1000)  # under 10 % available
    tick(agent, node, node_mc=500, batch_mc=100)
    # At what it holds (300 MiB), never below usage + headroom (128 MiB).
    assert node.read(BATCH, "memory.high") == str((300 + 128) * MIB)
    assert node.read(LC, "memory.high") == "max"
    assert (node.root / SERVICE / "memory.low").read_text() == str(700 * MIB)
    assert agent.metrics.value("yarn_adapt_agent_memory_pressure") == 1
    assert agent.metrics.value("yarn_adapt_agent_services_memory_protected") == 1
    node.meminfo(total_mb=16000, available_mb=1800)  # above 10 %, under 12 %: still on
    tick(agent, node, node_mc=500, batch_mc=100)
    assert node.read(BATCH, "memory.high") == str((300 + 128) * MIB)
    node.meminfo(total_mb=16000, available_mb=2000)  # released
    tick(agent, node, node_mc=500, batch_mc=100)
    assert node.read(BATCH, "memory.high") == "max"
    assert (node.root / SERVICE / "memory.low").read_text() == "0"
    assert agent.killer.killer.killed == []  # type: ignore[attr-defined]
    node.meminfo(total_mb=16000, available_mb=1000)  # pressure again, then a stop
    tick(agent, node, node_mc=500, batch_mc=100)
    assert (node.root / SERVICE / "memory.low").read_text() == str(700 * MIB)
    agent.shutdown()
    assert node.read(BATCH, "memory.high") == "max"
    assert (node.root / SERVICE / "memory.low").read_text() == "0"
    assert not (tmp_path / "state.json").exists()


@pytest.mark.parametrize(("kill", "evicted"), [("never", []), ("container", [BATCH])])
def test_a_batch_container_is_evicted_only_where_kills_are_allowed_after_the_grace_period(
    node: Node, tmp_path: Path, rm: str, kill: str, evicted: list[str]
) -> None:
    agent = agent_on(node, tmp_path, rm, yarn={"kill": kill},
                     reclaim={"grace_period_s": 3.0, "kill_cooldown_s": 60.0})  # fmt: skip
    agent.tick()
    node.meminfo(total_mb=16000, available_mb=500)
    for _ in range(3):  # capped, but the pressure lasts: not yet the grace period
        tick(agent, node, node_mc=500, batch_mc=100)
    assert agent.killer.killer.killed == []  # type: ignore[attr-defined]
    for _ in range(3):
        tick(agent, node, node_mc=500, batch_mc=100)
    killed = agent.killer.killer.killed  # type: ignore[attr-defined]
    assert [cid for cid, _ in killed] == evicted  # once: then the cool-down
    if evicted:
        assert "memory under pressure" in killed[0][1]
        assert agent.metrics.value("yarn_adapt_agent_evictions_total", cause="memory-pressure") == 1
        status = json.loads((tmp_path / "status.json").read_text())
        assert [e["container"] for e in status["evictions"]] == [BATCH]
        assert status["evictions"][0]["cause"] == "memory-pressure"
    agent.shutdown()


def test_a_refused_eviction_is_counted_and_waits_for_the_cool_down(
    node: Node, tmp_path: Path, rm: str
) -> None:
    class Refuses:
        calls = 0

        def kill(self, container_id: str, application_id: str, reason: str) -> None:
            Refuses.calls += 1
            raise KillFailed(f"{container_id}: the RM said no")

    agent = agent_on(node, tmp_path, rm, yarn={"kill": "container"},
                     reclaim={"grace_period_s": 0.0, "kill_cooldown_s": 60.0})  # fmt: skip
    agent.killer.killer = Refuses()
    node.meminfo(total_mb=16000, available_mb=500)
    for _ in range(4):
        tick(agent, node, node_mc=500, batch_mc=100)
    assert Refuses.calls == 1
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="kill-failed") == 1
    agent.shutdown()


def test_agent_status_prints_what_the_running_agent_does(
    node: Node, tmp_path: Path, rm: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = agent_on(node, tmp_path, rm)
    agent.tick()
    tick(agent, node, node_mc=900, batch_mc=600)
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nstate_file = "{tmp_path / "state.json"}"\n')
    assert agent_main(["status", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "suppress: batch quota 350m (budget 350m, first)" in out
    assert "batch weight on 1 cgroup(s)" in out
    assert agent_main(["status", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["isolation"]["suppress"]["quota_millicores"] == 350
    agent.shutdown()
    (tmp_path / "status.json").unlink()
    assert agent_main(["status", "--config", str(config)]) == 6
    assert "no status file (is the agent running?)" in capsys.readouterr().err


def test_what_cgroup_v1_cannot_do_is_a_one_line_settings_error(tmp_path: Path) -> None:
    for table, values, problem in (
        ("priority", {"service_cpus": "0"}, "[priority] service_cpus needs cgroup v2"),
        ("memory", {"service_cgroups": [SERVICE]}, "[memory] service_cgroups needs cgroup v2"),
    ):
        settings = agent_settings_from_mapping(
            {"agent": {"state_file": str(tmp_path / "s.json")}, table: values}, "agent.toml"
        )
        with pytest.raises(SettingsError, match=problem.replace("[", r"\[")) as caught:
            agent_for(settings, v1_stand_in(tmp_path))
        assert str(caught.value).startswith("agent.toml: ")


def v1_stand_in(tmp_path: Path) -> V1Backend:
    """A v1 backend (the agent reads nothing of it before it refuses the settings)."""
    mounts = {c: tmp_path / "v1" / c for c in ("cpu", "cpuacct", "memory")}
    for path in mounts.values():
        path.mkdir(parents=True, exist_ok=True)
    return V1Backend(mounts)


def test_the_batch_cpuset_leaves_the_services_cpus_out(node: Node, tmp_path: Path, rm: str) -> None:
    (node.groups[BATCH] / "cpuset.cpus").write_text("")
    (node.groups[LC] / "cpuset.cpus").write_text("")
    agent = agent_on(node, tmp_path, rm, priority={"service_cpus": "0-1"},
                     suppress={"cpus": "0-3"})  # fmt: skip
    agent.tick()
    assert node.read(BATCH, "cpuset.cpus") == "2-3"
    assert node.read(LC, "cpuset.cpus") == ""
    agent.shutdown()
    assert node.read(BATCH, "cpuset.cpus") == ""
    assert not (tmp_path / "state.json").exists()


def test_a_group_in_the_agents_hierarchy_gets_batchs_caps_on_the_hierarchy(
    tmp_path: Path, sleeper: int
) -> None:
    """Agent-hierarchy mode with the real v2 backend: the hierarchy (holding only the
    agent's batch groups) gets batch's weight and quota, each group below it the quota
    as its ceiling; a process of anyone else's in it, and it is left alone."""
    root, proc = tmp_path / "cgroup", tmp_path / "proc"
    node = Node(root, proc, sleeper)
    parent = root / "yarn-adapt"
    for group in (parent, parent / BATCH):
        group.mkdir(exist_ok=True)
        for name, text in {"cgroup.procs": "", "cpu.stat": "usage_usec 0\n",
                           "memory.current": "0", "memory.events": "oom_kill 0\n",
                           "cpu.max": "max 100000", "cpu.weight": "100",
                           "memory.high": "max", "memory.max": "max"}.items():  # fmt: skip
            (group / name).write_text(text)
    settings = agent_settings_from_mapping({"suppress": {"cpus": "0"}}, "test")
    backend = V2Backend(root)
    journal = StateJournal(None, backend.describe())
    journal.remember_adopted(Cgroup(f"yarn-adapt/{BATCH}"))  # the agent's own group
    clock = Clock()
    isolator = NodeIsolator(backend, journal, RecordingKiller(), settings.isolation_settings(),
                            nodestat=NodeStat(proc), clock=clock)  # fmt: skip
    reclaimer = NodeReclaimer(backend, journal, RecordingKiller(), ReclaimSettings(),
                              NodeSettings(node_cpu_millicores=1000))  # fmt: skip
    managed = [ManagedContainer(BATCH, BATCH_APP, Cgroup(f"yarn-adapt/{BATCH}"), 0.0,
                                allocation=Amount(1000, 256))]  # fmt: skip

    def interval(node_mc: int) -> IsolationPlan:
        clock.now += 1.0
        node.advance(node_millicores=node_mc, batch_millicores=0)
        plan = isolator.plan(managed)
        isolator.before_children(plan)
        reclaimer.tick(clock.now, managed, NO_TARGET, None, plan.containers)
        isolator.after_children(clock.now, plan, managed)
        return plan

    assert interval(500).mode == "agent-hierarchy"
    assert (parent / "cpu.weight").read_text() == "1"
    interval(500)  # 650 - 500 = 150 -> the floor, 200
    assert (parent / "cpu.max").read_text() == "20000 100000"
    assert (parent / BATCH / "cpu.max").read_text() == "20000 100000"  # its ceiling
    assert (parent / BATCH / "cpu.weight").read_text() == "100"  # batch among itself
    (parent / "cgroup.procs").write_text("4242\n")  # someone else's process in it
    plan = interval(500)
    assert plan.mode == "per-container"
    assert plan.refused == "yarn-adapt holds processes of its own (pid 4242)"
    assert [(parent / f).read_text() for f in ("cpu.max", "cpu.weight")] == ["max 100000", "100"]
    # Each batch group then has its own share of the quota and batch's weight.
    assert (parent / BATCH / "cpu.weight").read_text() == "1"
    assert (parent / BATCH / "cpu.max").read_text() == "20000 100000"
    assert restore(journal, backend).complete
    assert (parent / BATCH / "cpu.max").read_text() == "max 100000"
    assert (parent / BATCH / "cpu.weight").read_text() == "100"


def test_yarns_hierarchy_gets_batchs_weight_only_while_no_latency_critical_container_runs_there(
    node: Node, tmp_path: Path, rm: str
) -> None:
    """A container's weight ranks it among YARN's containers only; the services outside
    YARN meet ``hadoop-yarn`` at its own weight, so the hierarchy gets batch's weight
    too -- but never while a latency-critical container runs in it."""
    yarn = node.root / "hadoop-yarn"
    (yarn / "cpu.weight").write_text("100")
    (yarn / "cgroup.procs").write_text("")
    agent = agent_on(node, tmp_path, rm)
    agent.tick()
    assert (yarn / "cpu.weight").read_text() == "100"  # the LC container runs there
    assert node.read(BATCH, "cpu.weight") == "1"
    # The latency-critical container ends: the hierarchy gets batch's weight,
    # journalled first.
    listed = agent.parts.nodemanager
    assert isinstance(listed, ListedBy)
    listed.container_ids.remove(LC)
    shutil.rmtree(node.groups[LC])
    tick(agent, node, node_mc=500, batch_mc=300)
    assert (yarn / "cpu.weight").read_text() == "1"
    journal = json.loads((tmp_path / "state.json").read_text())
    recorded = {(e["group"], e["key"]): e["value"] for e in journal["originals"]}
    assert recorded[("hadoop-yarn", "cpu.weight")] == "100"
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["isolation"]["weighted_groups"] == 2  # the container and the hierarchy
    # A latency-critical container starts again: its original weight back at once.
    node.groups[LC] = node._group(f"hadoop-yarn/{LC}")
    listed.container_ids.append(LC)
    tick(agent, node, node_mc=500, batch_mc=300)
    assert (yarn / "cpu.weight").read_text() == "100"
    listed.container_ids.remove(LC)
    shutil.rmtree(node.groups[LC])
    tick(agent, node, node_mc=500, batch_mc=300)
    assert (yarn / "cpu.weight").read_text() == "1"
    agent.shutdown()  # and back on shutdown
    assert (yarn / "cpu.weight").read_text() == "100"
    assert not (tmp_path / "state.json").exists()
