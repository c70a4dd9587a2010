"""Aliveness's OOM signal read for real: v1's ``memory.oom_control`` (``oom_kill``)
after the kernel OOM-kills a process of a squeezed container, and v2's
``memory.events`` on a laid-out hierarchy. Either makes the agent blacklist the task."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from preemption.cgroups import Cgroup, V1Backend

from .conftest import HOLDER, container_id, place
from .test_cgroup_v1 import agent_for, settings_for, started
from .test_cgroup_v2 import CID, agent_on, burn, lay_out

MIB = 1 << 20
SLEEPER = "import time; print('ready', flush=True); time.sleep(600)"


@pytest.mark.slow
def test_a_v1_oom_kill_in_a_squeezed_container_blacklists_it(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    group = Cgroup(f"{hierarchy}/{container_id(21)}")
    sleeper = started(processes(SLEEPER))
    hog = processes(HOLDER, "64")  # waits for a line on stdin, then touches 64 MiB
    place(v1, group, sleeper.pid)
    # The container's memory limit, as the NodeManager would set it: 48 MiB holds
    # two idle interpreters but not the 64 MiB the hog is about to touch.
    v1.write(group, "memory.limit_in_bytes", str(48 * MIB))
    place(v1, group, hog.pid)
    agent = agent_for(settings_for(f"{hierarchy}", tmp_path / "state.json", cpu=200), v1)
    agent.tick()
    time.sleep(0.3)
    squeezed = agent.tick()
    assert [e.kind for e in squeezed.events] == ["step"]
    assert v1.usage(group).oom_kills == 0
    assert hog.stdin is not None
    hog.stdin.write("go\n")
    hog.stdin.flush()
    assert hog.wait(timeout=30) == -9  # the kernel's OOM killer
    assert v1.usage(group).oom_kills == 1  # memory.oom_control: oom_kill 1
    assert sleeper.poll() is None  # the container itself lives on
    judged = agent.tick()
    blacklisted = [e for e in judged.events if e.kind == "blacklisted"]
    assert [e.container_id for e in blacklisted] == [container_id(21)]
    assert "OOM kill in the cgroup (1)" in blacklisted[0].detail
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="blacklisted") == 1
    assert v1.read(group, "cpu.cfs_quota_us") == "-1"  # the faltering step undone
    agent.shutdown()


def test_a_v2_oom_kill_event_in_a_squeezed_container_blacklists_it(
    processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    root = tmp_path / "cgroup"
    group = lay_out(root, started(processes(SLEEPER)).pid)
    agent = agent_on(root, tmp_path, cpu=500, memory=0)
    agent.tick()
    burn(group, 1_000_000)
    squeezed = agent.tick()
    assert [e.kind for e in squeezed.events] == ["step"]
    assert (group / "cpu.max").read_text() == "50000 100000"
    burn(group, 500_000)  # kept busy at its new limit: CPU progress is fine
    (group / "memory.events").write_text("low 0\nhigh 3\nmax 1\noom 1\noom_kill 1\n")
    judged = agent.tick()
    blacklisted = [e for e in judged.events if e.kind == "blacklisted"]
    assert [e.container_id for e in blacklisted] == [CID]
    assert "OOM kill in the cgroup (1)" in blacklisted[0].detail
    assert (group / "cpu.max").read_text() == "max 100000"  # the step undone
    burn(group, 1_000_000)
    again = agent.tick()  # blacklisted: never squeezed again
    assert all(e.container_id != CID or e.kind != "step" for e in again.events)
    agent.shutdown()
    assert not (tmp_path / "state.json").exists()
