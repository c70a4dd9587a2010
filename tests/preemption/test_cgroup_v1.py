"""The agent on real cgroup v1 hierarchies (root): CPU throttled in steps, memory soft
and hard limits, restore after SIGKILL, adoption, and faults mid-step."""

from __future__ import annotations

import errno
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from preemption.agent import Agent, AgentParts, target_source
from preemption.cgroups import Cgroup, CgroupFiles, V1Backend
from preemption.cgroups.procfile import cgroup_membership
from preemption.metrics import AgentMetrics
from preemption.settings import AgentSettings, agent_settings_from_mapping
from preemption.statefile import StateJournal

from .conftest import BURNER, CONTROLLERS, HOLDER, container_id, cpu_share, place
from .factories import ISOLATION_OFF, ISOLATION_OFF_TOML, ListedBy

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
UNLIMITED = "9223372036854771712"
MIB = 1 << 20
# The containers these tests make, as the NodeManager would list them (this test
# process stands for the NodeManager: the process-tree tests' launchers are its children).
LISTED = [container_id(n) for n in range(1, 40)]


def settings_for(hierarchy: str, state_file: Path, **reclaim: object) -> AgentSettings:
    standalone = {
        "reclaim_cpu_millicores": reclaim.pop("cpu", 0),
        "reclaim_memory_mb": reclaim.pop("memory", 0),
    }
    return agent_settings_from_mapping(
        {
            "agent": {"state_file": str(state_file), "interval_s": 0.3},
            "standalone": standalone,
            "discovery": {
                "source": reclaim.pop("source", "cgroup"),
                "yarn_hierarchy": hierarchy,
                "agent_hierarchy": f"{hierarchy}/agent-owned",
                "node_cpu_millicores": 2000,
                "nodemanager_pid": reclaim.pop("nodemanager_pid", 0),
            },
            "classify": {"unknown": "batch"},
            "reclaim": {
                "per_task_cpu_millicores": 800,
                "step_cpu_millicores": 200,
                "per_task_memory_mb": 64,
                "step_memory_mb": 16,
                "floor_memory_mb": 16,
                "settle_s": 0.0,
                **reclaim,
            },
            **ISOLATION_OFF,
        },
        "test",
    )


def agent_for(settings: AgentSettings, v1: V1Backend, files: CgroupFiles | None = None) -> Agent:
    backend = V1Backend(v1.mounts, files=files, memory=settings.memory_policy())
    journal = StateJournal.open(Path(settings.agent.state_file), backend.describe())
    parts = AgentParts(
        backend=backend, journal=journal, target=target_source(settings),
        nodemanager=ListedBy(os.getpid(), LISTED), metrics=AgentMetrics(),
    )  # fmt: skip
    return Agent(settings, parts)


def started(child: subprocess.Popen[str]) -> subprocess.Popen[str]:
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


@pytest.mark.alone  # the burner's measured share, and the agent's first step from it
def test_a_cpu_burner_is_throttled_in_steps_and_its_share_follows_each_limit(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    # The burner's parent outweighs everything else on its CPU (see conftest), so
    # what limits it is its quota, not the neighbours on this shared machine.
    (v1.mounts["cpu"] / hierarchy / "cpu.shares").write_text("262144")
    burner = started(processes(BURNER))
    group = Cgroup(f"{hierarchy}/{container_id(2)}")
    place(v1, group, burner.pid)
    agent = agent_for(settings_for(hierarchy, tmp_path / "state.json", cpu=800), v1)
    agent.tick()  # one interval of observation first
    time.sleep(1.0)
    measured = {}
    for expected in (800, 600, 400, 200):
        agent.tick()
        assert v1.read(group, "cpu.cfs_quota_us") == str(expected * 100)  # period 100 ms
        measured[expected] = cpu_share(v1, group, 1.2)
    for limit, share in measured.items():
        assert share == pytest.approx(limit / 1000, rel=0.10), measured
    assert int(v1.read(group, "cpu.shares")) == round(1024 * 200 / 1000)
    assert agent.metrics.value("yarn_adapt_agent_reclaimed_cpu_millicores") == 800
    assert agent.metrics.value("yarn_adapt_agent_tasks_squeezed_total") == 1
    agent.shutdown()
    assert (v1.read(group, "cpu.cfs_quota_us"), v1.read(group, "cpu.shares")) == ("-1", "1024")
    assert not (tmp_path / "state.json").exists()
    assert cpu_share(v1, group, 0.5) > 0.5  # free again


def test_memory_soft_and_hard_limits_are_applied_in_steps_and_restored(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    holder = processes(HOLDER, "64")
    group = Cgroup(f"{hierarchy}/{container_id(3)}")
    place(v1, group, holder.pid)
    assert holder.stdin is not None
    holder.stdin.write("go\n")
    holder.stdin.flush()
    started(holder)
    agent = agent_for(settings_for(hierarchy, tmp_path / "state.json", memory=48), v1)
    agent.tick()
    time.sleep(0.3)
    agent.tick()
    baseline = agent.reclaimer.tracked[container_id(3)].baseline
    assert baseline is not None and baseline.memory_mb >= 64
    soft = int(v1.read(group, "memory.soft_limit_in_bytes"))
    assert soft == (baseline.memory_mb - 16) * MIB
    time.sleep(0.3)
    agent.tick()
    assert int(v1.read(group, "memory.soft_limit_in_bytes")) == (baseline.memory_mb - 32) * MIB
    usage = int(v1.read(group, "memory.usage_in_bytes"))
    hard = int(v1.read(group, "memory.limit_in_bytes"))
    assert hard >= usage + 128 * MIB - 4096  # never below usage + headroom
    assert hard < int(UNLIMITED)
    assert holder.poll() is None  # still alive: nothing was OOM-killed
    agent.shutdown()
    assert v1.read(group, "memory.soft_limit_in_bytes") == UNLIMITED
    assert v1.read(group, "memory.limit_in_bytes") == UNLIMITED
    assert not (tmp_path / "state.json").exists()


def test_sigterm_restores_and_after_sigkill_the_next_start_restores_every_limit(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    holders = [processes(HOLDER, "48"), processes(HOLDER, "16")]
    cpu_group = Cgroup(f"{hierarchy}/{container_id(4)}")
    memory_group = Cgroup(f"{hierarchy}/{container_id(5)}")
    for holder, group in zip(holders, (cpu_group, memory_group), strict=True):
        place(v1, group, holder.pid)
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.flush()
        started(holder)
    state = tmp_path / "state.json"
    first = write_config(tmp_path / "first.toml", hierarchy, state, cpu=600, memory=48)
    groups = (cpu_group, memory_group)

    def changed() -> bool:
        quotas = [v1.read(g, "cpu.cfs_quota_us") for g in groups]
        softs = [v1.read(g, "memory.soft_limit_in_bytes") for g in groups]
        return any(q != "-1" for q in quotas) and any(s != UNLIMITED for s in softs)

    # SIGTERM: the agent itself puts everything back before it exits.
    agent = run_agent(first)
    try:
        wait_for(changed, 30)
    finally:
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0, stderr
    assert not changed() and not state.exists(), stderr
    # SIGKILL: nothing runs on the way out; the limits stay until the next start.
    agent = run_agent(first)
    try:
        wait_for(changed, 30)
    finally:
        agent.send_signal(signal.SIGKILL)
        _, stderr = agent.communicate(timeout=10)
    assert changed(), stderr  # left behind by the kill
    recorded = json.loads(state.read_text())
    assert {entry["key"] for entry in recorded["originals"]} >= {
        "cpu.cfs_quota_us",
        "memory.soft_limit_in_bytes",
    }
    second = write_config(tmp_path / "second.toml", hierarchy, state, cpu=0, memory=0)
    restart = run_agent(second, "--ticks", "1")
    _, stderr = restart.communicate(timeout=60)
    assert restart.returncode == 0, stderr
    assert "restored after a previous run" in stderr
    for group in groups:
        assert v1.read(group, "cpu.cfs_quota_us") == "-1"
        assert v1.read(group, "cpu.shares") == "1024"
        assert v1.read(group, "memory.soft_limit_in_bytes") == UNLIMITED
        assert v1.read(group, "memory.limit_in_bytes") == UNLIMITED
    assert not state.exists()


def test_processes_of_a_container_without_a_cgroup_are_adopted_and_moved_back(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    # This test process stands for the NodeManager: the launcher is its child and
    # names its container in its command line, as the DefaultContainerExecutor's
    # launch script does; the burner below it belongs to that container.
    launcher = processes(LAUNCHER, launch_script(container_id(6)))
    started(launcher)
    settings = settings_for(
        hierarchy, tmp_path / "state.json", cpu=400, source="process-tree",
        nodemanager_pid=os.getpid(),
    )  # fmt: skip
    agent = agent_for(settings, v1)
    found = wait_for(lambda: [c for c in agent.discover() if c.container_id == container_id(6)], 10)
    pids = found[0].pids
    before = {pid: cgroup_membership(Path("/proc"), pid, ("cpu", "memory")) for pid in pids}
    agent.tick()
    group = agent.adopter.group_for(container_id(6))
    assert sorted(v1.pids(group)) == sorted(pids)
    recorded = json.loads((tmp_path / "state.json").read_text())
    assert recorded["created"] == [group.relpath]
    agent.shutdown()
    for pid in pids:
        assert cgroup_membership(Path("/proc"), pid, ("cpu", "memory")) == before[pid]
    assert not v1.exists(group)
    assert not (tmp_path / "state.json").exists()


def test_processes_moved_into_a_cgroup_that_already_existed_go_back_on_restore(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    started(processes(LAUNCHER, launch_script(container_id(15))))
    state = tmp_path / "state.json"
    settings = settings_for(hierarchy, state, cpu=400, source="process-tree")
    agent = agent_for(settings, v1)
    group = agent.adopter.group_for(container_id(15))
    for controller in CONTROLLERS:  # there before the agent (a lost state file, by hand)
        (v1.mounts[controller] / group.relpath).mkdir(parents=True)
    found = wait_for(lambda: [c for c in agent.discover() if c.container_id == group.name], 10)
    pids = found[0].pids
    before = {pid: cgroup_membership(Path("/proc"), pid, CONTROLLERS) for pid in pids}
    agent.tick()
    assert sorted(v1.pids(group)) == sorted(pids)
    recorded = json.loads(state.read_text())
    assert (recorded["adopted"], recorded["created"]) == ([group.relpath], [])
    agent.shutdown()
    for pid in pids:
        assert cgroup_membership(Path("/proc"), pid, CONTROLLERS) == before[pid]
    assert v1.exists(group) and v1.pids(group) == ()  # left as found: there, and empty
    assert not state.exists()


class VanishesOnQuotaWrite(CgroupFiles):
    """The container exits and its cgroup is removed right before the agent's write."""

    def __init__(self, victim: subprocess.Popen[str], v1: V1Backend, group: Cgroup) -> None:
        self.victim, self.v1, self.group = victim, v1, group

    def raw_write(self, path: Path, value: str) -> None:
        if path.name == "cpu.cfs_quota_us" and self.victim.poll() is None:
            self.victim.kill()
            self.victim.wait()
            for controller in ("cpu", "cpuacct", "memory"):
                directory = self.v1.mounts[controller] / self.group.relpath
                wait_for(functools.partial(_try_rmdir, directory), 5)
        super().raw_write(path, value)


def _try_rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except OSError:
        return False
    return True


def test_a_cgroup_that_vanishes_mid_step_is_counted_and_nothing_is_left_behind(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    burner = started(processes(BURNER))
    group = Cgroup(f"{hierarchy}/{container_id(7)}")
    place(v1, group, burner.pid)
    state = tmp_path / "state.json"
    agent = agent_for(
        settings_for(hierarchy, state, cpu=400), v1, VanishesOnQuotaWrite(burner, v1, group)
    )
    agent.tick()
    time.sleep(0.3)
    report = agent.tick()  # the step's write meets a vanished cgroup
    assert [e.kind for e in report.events] == ["vanished"]
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="vanished") == 1
    agent.tick()  # the container is gone: forgotten
    assert agent.journal.empty and not state.exists()
    agent.shutdown()


class DeniesShares(CgroupFiles):
    """EACCES on cpu.shares, as an unprivileged agent or a read-only mount would get."""

    def raw_write(self, path: Path, value: str) -> None:
        if path.name == "cpu.shares":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        super().raw_write(path, value)


def test_permission_denied_mid_step_is_rolled_back_counted_and_set_aside(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    burner = started(processes(BURNER))
    group = Cgroup(f"{hierarchy}/{container_id(8)}")
    place(v1, group, burner.pid)
    agent = agent_for(settings_for(hierarchy, tmp_path / "state.json", cpu=400), v1, DeniesShares())
    agent.tick()
    time.sleep(0.3)
    report = agent.tick()
    assert [e.kind for e in report.events] == ["denied"]
    assert "Permission denied" in report.events[0].detail
    # The quota written before the refused shares was put back: no stuck limit.
    assert v1.read(group, "cpu.cfs_quota_us") == "-1"
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="denied") == 1
    again = agent.tick()  # set aside: not chosen again at once
    assert again.events == () and again.decision.status.mode == "stuck"
    agent.shutdown()
    assert v1.read(group, "cpu.cfs_quota_us") == "-1"
    assert burner.poll() is None


# ----------------------------------------------------------------- helpers

LAUNCHER = (
    "import subprocess, sys, time\n"
    f"child = subprocess.Popen([sys.executable, '-c', {BURNER!r}])\n"
    "print('ready', flush=True)\n"
    "child.wait()\n"
)


def launch_script(container: str) -> str:
    """Where the DefaultContainerExecutor's launch script of ``container`` lives."""
    return f"/nm-local/usercache/u/appcache/application_1/{container}/default_container_executor.sh"


def write_config(path: Path, hierarchy: str, state: Path, *, cpu: int, memory: int) -> Path:
    path.write_text(
        f"""
[agent]
state_file = "{state}"
interval_s = 0.3

[standalone]
reclaim_cpu_millicores = {cpu}
reclaim_memory_mb = {memory}

[discovery]
source = "cgroup"
yarn_hierarchy = "{hierarchy}"
node_cpu_millicores = 2000

[classify]
unknown = "batch"

[reclaim]
per_task_cpu_millicores = 600
step_cpu_millicores = 300
per_task_memory_mb = 64
step_memory_mb = 48
floor_memory_mb = 16
settle_s = 0.0

"""
        + ISOLATION_OFF_TOML
    )
    return path


def run_agent(config: Path, *extra: str) -> subprocess.Popen[str]:
    # python -m preemption's main (yarn-adapt agent's commands without the rest of the
    # CLI, which loads the tuner), with the NodeManager's recorded view listing LISTED.
    return subprocess.Popen(
        [sys.executable, "-m", "tests.preemption.listed_run", ",".join(LISTED),
         "run", "--config", str(config), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


T = TypeVar("T")


def wait_for(probe: Callable[[], T], timeout_s: float) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s")
        time.sleep(0.1)
