"""The isolation loop on real cgroup v1 hierarchies (root): the agent's hierarchy gets
batch's weight and the suppress quota, which really holds the container's processes
to it; LinuxContainerExecutor cgroups get them one by one; everything is journalled
first and put back on SIGTERM, and by the next start after a SIGKILL.

This test process stands for the NodeManager: a launch process, its child, names its
container in its command line (as the DefaultContainerExecutor's launch script
does), and the burner below it belongs to that container. The burners are pinned to
the last CPU, which is the node's CPU for the suppress loop (``[suppress] cpus``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from preemption.cgroups import Cgroup, V1Backend
from preemption.cli import main as agent_main
from preemption.isolator import IsolationSettings
from preemption.settings import AgentSettings, agent_settings_from_mapping

from .conftest import BURNER, LAST_CPU, container_id, cpu_share, place
from .test_cgroup_v1 import (
    LAUNCHER,
    ROOT,
    agent_for,
    launch_script,
    run_agent,
    started,
    wait_for,
)

pytestmark = pytest.mark.slow


def settings_for(hierarchy: str, state: Path, **tables: dict[str, object]) -> AgentSettings:
    raw: dict[str, dict[str, object]] = {
        "agent": {"state_file": str(state), "interval_s": 0.3},
        "discovery": {"source": "process-tree", "yarn_hierarchy": hierarchy,
                      "agent_hierarchy": f"{hierarchy}/batch", "node_cpu_millicores": 1000,
                      "nodemanager_pid": os.getpid()},
        "classify": {"unknown": "batch"},
        "suppress": {"cpus": str(LAST_CPU)},
    }  # fmt: skip
    for table, values in tables.items():
        raw[table] = {**raw.get(table, {}), **values}
    return agent_settings_from_mapping(raw, "test")


def test_the_agents_hierarchy_gets_batchs_weight_and_a_quota_that_holds_its_processes(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    # The test's parent outweighs everything else on the CPU (see conftest), so what
    # holds the burner back is the quota, not the neighbours on this shared machine.
    (v1.mounts["cpu"] / hierarchy / "cpu.shares").write_text("262144")
    started(processes(LAUNCHER, launch_script(container_id(21))))
    state = tmp_path / "state.json"
    agent = agent_for(settings_for(hierarchy, state), v1)
    wait_for(lambda: agent.discover(), 10)
    parent = Cgroup(f"{hierarchy}/batch")
    agent.tick()  # adopted; batch's weight at once, the quota needs two readings
    assert v1.read(parent, "cpu.shares") == "2"
    time.sleep(0.5)
    agent.tick()
    quota = agent.isolator.quota
    assert quota is not None and 200 <= quota <= 650
    assert v1.read(parent, "cpu.cfs_quota_us") == str(quota * 100)
    group = agent.adopter.group_for(container_id(21))
    assert v1.read(group, "cpu.cfs_quota_us") == str(quota * 100)  # the same ceiling
    recorded = json.loads(state.read_text())
    originals = {(e["group"], e["key"]): e["value"] for e in recorded["originals"]}
    assert originals[(parent.relpath, "cpu.shares")] == "1024"
    assert originals[(parent.relpath, "cpu.cfs_quota_us")] == "-1"
    # The burner wants a whole CPU; it gets no more than its quota (other work on the
    # CPU may leave it less, so only the ceiling is checked).
    assert cpu_share(v1, parent, 1.5) <= quota / 1000 * 1.10 + 0.02
    agent.shutdown()
    assert (v1.read(parent, "cpu.shares"), v1.read(parent, "cpu.cfs_quota_us")) == ("1024", "-1")
    assert not state.exists()


def test_a_quota_below_a_squeezed_containers_is_written_children_first(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    # cgroup v1 refuses a parent quota below a child's (EINVAL): the squeezed child
    # must come down to the parent's new quota first, and when the quota rises again
    # the parent goes first.
    started(processes(LAUNCHER, launch_script(container_id(22))))
    state = tmp_path / "state.json"
    settings = settings_for(
        hierarchy, state, standalone={"reclaim_cpu_millicores": 200},
        reclaim={"per_task_cpu_millicores": 200, "step_cpu_millicores": 200, "settle_s": 0.0},
    )  # fmt: skip
    agent = agent_for(settings, v1)
    wait_for(lambda: agent.discover(), 10)
    parent = Cgroup(f"{hierarchy}/batch")
    group = agent.adopter.group_for(container_id(22))
    for budget in (900, 300, 900, 250):
        agent.isolator.quota = None  # the next quota is the budget itself
        agent.isolator.settings = with_budget(agent.isolator.settings, budget)
        time.sleep(0.35)
        report = agent.tick()
        assert [e.kind for e in report.events if e.kind in ("error", "denied")] == []
        assert agent.last_isolation is not None
        assert [e for e in agent.last_isolation.events if e.kind == "error"] == []
    assert v1.read(parent, "cpu.cfs_quota_us") == "25000"
    assert int(v1.read(group, "cpu.cfs_quota_us")) <= 25000
    agent.shutdown()
    assert v1.read(parent, "cpu.cfs_quota_us") == "-1"
    assert not state.exists()


def with_budget(settings: IsolationSettings, budget: int) -> IsolationSettings:
    """Settings under which the suppress budget is ``budget`` whatever the node uses."""
    suppress = replace(settings.suppress, floor_millicores=budget, target_utilisation=0.01)
    return replace(settings, suppress=suppress)


def test_per_container_weight_and_quota_on_linux_container_executor_cgroups(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    burner = started(processes(BURNER))
    group = Cgroup(f"{hierarchy}/{container_id(23)}")
    place(v1, group, burner.pid)
    (v1.mounts["cpu"] / group.relpath / "cpu.shares").write_text("2048")  # YARN: 2 vcores
    state = tmp_path / "state.json"
    settings = settings_for(hierarchy, state, discovery={"source": "cgroup"})
    agent = agent_for(settings, v1)
    agent.tick()
    assert v1.read(group, "cpu.shares") == "4"  # 2 per vcore, YARN's opportunistic weight
    time.sleep(0.5)
    agent.tick()
    quota = agent.isolator.quota
    assert quota is not None
    assert v1.read(group, "cpu.cfs_quota_us") == str(quota * 100)  # its whole share: alone
    assert not v1.exists(Cgroup(f"{hierarchy}/batch"))  # no agent hierarchy with LCE
    agent.shutdown()
    assert (v1.read(group, "cpu.shares"), v1.read(group, "cpu.cfs_quota_us")) == ("2048", "-1")
    assert not state.exists()


def test_sigterm_restores_the_batch_hierarchy_and_after_sigkill_the_next_start_does(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    started(processes(LAUNCHER, launch_script(container_id(24))))
    state = tmp_path / "state.json"
    config = tmp_path / "agent.toml"
    config.write_text(
        f"""
[agent]
state_file = "{state}"
interval_s = 0.3

[discovery]
source = "process-tree"
agent_hierarchy = "{hierarchy}/batch"
node_cpu_millicores = 1000
nodemanager_pid = {os.getpid()}

[classify]
unknown = "batch"

[suppress]
cpus = "{LAST_CPU}"
"""
    )
    parent = Cgroup(f"{hierarchy}/batch")

    def isolated() -> bool:
        return v1.exists(parent) and v1.read(parent, "cpu.cfs_quota_us") != "-1"

    def suppress_reported() -> dict[str, object] | None:
        """The suppress loop's figures in the agent's status file, once a tick that
        isolated has ended (the file is written at a tick's end, after its cgroup
        writes: CI r33, with burners, read the tick before)."""
        path = tmp_path / "status.json"
        if not path.exists():
            return None
        isolation = json.loads(path.read_text()).get("isolation") or {}
        return isolation.get("suppress")

    agent = run_agent(config)
    try:
        wait_for(lambda: isolated() and suppress_reported() is not None, 30)
        assert v1.read(parent, "cpu.shares") == "2"
        quota = suppress_reported()["quota_millicores"]  # type: ignore[index]
        assert 200 <= quota <= 650
    finally:
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0, stderr
    assert (v1.read(parent, "cpu.shares"), v1.read(parent, "cpu.cfs_quota_us")) == ("1024", "-1")
    assert not state.exists(), stderr
    agent = run_agent(config)
    try:
        wait_for(isolated, 30)
    finally:
        agent.send_signal(signal.SIGKILL)
        _, stderr = agent.communicate(timeout=10)
    assert isolated() and v1.read(parent, "cpu.shares") == "2"  # left by the kill
    recorded = json.loads(state.read_text())
    keys = {(e["group"], e["key"]) for e in recorded["originals"]}
    assert {(parent.relpath, "cpu.shares"), (parent.relpath, "cpu.cfs_quota_us")} <= keys
    restored = subprocess.run(
        [sys.executable, "-m", "preemption", "restore", "--config", str(config)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert restored.returncode == 0, restored.stderr
    assert (v1.read(parent, "cpu.shares"), v1.read(parent, "cpu.cfs_quota_us")) == ("1024", "-1")
    assert not state.exists(), restored.stdout


def test_on_a_laid_out_v2_tree_sigterm_restores_and_after_sigkill_agent_restore_does(
    tmp_path: Path, processes: Callable[..., subprocess.Popen[str]]
) -> None:
    # cgroup v2 (its controllers are not delegated here: a directory laid out like a v2
    # hierarchy, as in test_cgroup_v2.py), LinuxContainerExecutor cgroups: the batch
    # container's cpu.weight and cpu.max, journalled, put back by SIGTERM and, after a
    # SIGKILL, by `agent restore`.
    sleeper = processes("import sys, time; print('ready', flush=True); time.sleep(600)")
    started(sleeper)
    root = tmp_path / "cgroup"
    group = root / "hadoop-yarn" / container_id(25)
    group.mkdir(parents=True)
    files = {"cgroup.procs": f"{sleeper.pid}\n", "cpu.stat": "usage_usec 0\n",
             "memory.current": str(64 << 20), "memory.events": "oom_kill 0\n",
             "cpu.max": "max 100000", "cpu.weight": "100", "memory.high": "max",
             "memory.max": "max"}  # fmt: skip
    for name, text in files.items():
        (group / name).write_text(text)
    state = tmp_path / "state.json"
    config = tmp_path / "agent.toml"
    config.write_text(
        f"""
[agent]
state_file = "{state}"
interval_s = 0.2

[discovery]
source = "cgroup"
cgroup_version = "v2"
cgroup_root = "{root}"
node_cpu_millicores = 1000

[classify]
unknown = "batch"

[suppress]
cpus = "{LAST_CPU}"
"""
    )

    def isolated() -> bool:
        return (group / "cpu.weight").read_text() == "1" and (
            (group / "cpu.max").read_text() != "max 100000"
        )

    def original() -> list[str]:
        return [(group / name).read_text() for name in ("cpu.weight", "cpu.max")]

    agent = run_agent(config)
    try:
        wait_for(isolated, 30)
    finally:
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0, stderr
    assert original() == ["100", "max 100000"] and not state.exists(), stderr
    agent = run_agent(config)
    try:
        wait_for(isolated, 30)
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.communicate(timeout=10)
    assert isolated()  # left by the kill, and journalled
    recorded = json.loads(state.read_text())
    assert {(e["key"], e["value"]) for e in recorded["originals"]} >= {
        ("cpu.weight", "100"), ("cpu.max", "max 100000"),
    }  # fmt: skip
    restored = subprocess.run(
        [sys.executable, "-m", "preemption", "restore", "--config", str(config)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert restored.returncode == 0, restored.stderr
    assert original() == ["100", "max 100000"] and not state.exists()


def test_agent_restore_is_never_stopped_by_what_this_hosts_cgroups_cannot_isolate(
    v1: V1Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A cpuset for the services needs cgroup v2; this host has v1. `agent run` refuses
    # to start (one line, exit 2); `agent restore`, which puts limits back, still works.
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nstate_file = "{tmp_path / "state.json"}"\n'
        '[discovery]\ncgroup_version = "v1"\n[priority]\nservice_cpus = "0"\n'
    )
    assert agent_main(["restore", "--config", str(config)]) == 0
    assert "nothing to restore" in capsys.readouterr().out
    assert agent_main(["run", "--config", str(config), "--ticks", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("[priority] service_cpus needs cgroup v2 (v1's cpuset is a hierarchy "
                        "of its own, which the agent does not manage)")  # fmt: skip
    assert len(err.splitlines()) == 1
