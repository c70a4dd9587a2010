"""``restore`` with a state file a run left behind, and dry runs that would squeeze a
container, on real cgroup v1 hierarchies (root) with real short-lived processes; a
state file whose cgroup paths would reach outside the hierarchy is refused."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from preemption.agent import Agent
from preemption.cgroups import Cgroup, V1Backend, V2Backend
from preemption.cgroups.dryrun import DryRunBackend
from preemption.cgroups.procfile import cgroup_membership
from preemption.errors import CgroupError, StateFileCorrupt
from preemption.statefile import StateJournal, restore

from .conftest import BURNER, HOLDER, container_id, place
from .factories import ListedBy
from .test_cgroup_v1 import (
    LAUNCHER,
    LISTED,
    ROOT,
    UNLIMITED,
    agent_for,
    launch_script,
    settings_for,
    started,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.slow
YARN_ADAPT = "import sys; from yarn_adapt.cli import main; sys.exit(main(sys.argv[1:]))"


def _hold(child: subprocess.Popen[str]) -> subprocess.Popen[str]:
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    return started(child)


def test_restore_puts_back_every_limit_a_run_left_and_empties_the_state_file(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    burner = started(processes(BURNER))
    holder = processes(HOLDER, "64")
    cpu_group = Cgroup(f"{hierarchy}/{container_id(11)}")
    memory_group = Cgroup(f"{hierarchy}/{container_id(12)}")
    place(v1, cpu_group, burner.pid)
    place(v1, memory_group, holder.pid)
    _hold(holder)
    state = tmp_path / "state.json"
    agent = agent_for(settings_for(hierarchy, state, cpu=1200, memory=48), v1)
    for _ in range(3):  # observe, then two steps
        agent.tick()
        time.sleep(0.3)
    groups = (cpu_group, memory_group)
    keys = ("cpu.cfs_quota_us", "cpu.shares", "memory.soft_limit_in_bytes")
    originals = {(g.relpath, k): "-1" if k == "cpu.cfs_quota_us" else "1024" for g in groups
                 for k in keys[:2]}  # fmt: skip
    originals |= {(g.relpath, keys[2]): UNLIMITED for g in groups}
    changed = {key for key, value in originals.items() if v1.read(Cgroup(key[0]), key[1]) != value}
    assert {key for _, key in changed} == set(keys)  # K = 2 tasks: both squeezed
    assert {relpath for relpath, _ in changed} == {g.relpath for g in groups}
    assert not StateJournal.open(state, v1.describe()).empty  # the run "died" here
    config = write_config(tmp_path / "agent.toml", hierarchy, state, cpu=0, memory=0)
    restore = subprocess.run(  # yarn-adapt's console script: yarn_adapt.cli:main
        [sys.executable, "-c", YARN_ADAPT, "agent", "restore", "--config", str(config)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert restore.returncode == 0, restore.stderr
    [line] = restore.stdout.splitlines()
    assert line.startswith("restored "), line
    for (relpath, key), value in originals.items():
        assert v1.read(Cgroup(relpath), key) == value, (relpath, key)
    assert v1.read(memory_group, "memory.limit_in_bytes") == UNLIMITED
    assert not state.exists()
    again = subprocess.run(  # the agent's own entry point
        [sys.executable, "-m", "preemption", "restore", "--config", str(config)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert (again.returncode, again.stdout) == (0, "nothing to restore\n"), again.stderr
    assert burner.poll() is None and holder.poll() is None


def _dry_agent(hierarchy: str, state: Path, **changes: object) -> Agent:
    settings = settings_for(hierarchy, state, cpu=600, **changes)
    agent = Agent.build(settings, dry_run=True)
    assert isinstance(agent.backend, DryRunBackend)
    agent.nodemanager = ListedBy(os.getpid(), LISTED)  # this test process stands for it
    return agent


def test_a_dry_run_decides_the_squeeze_of_a_cgroup_container_and_changes_nothing(
    v1: V1Backend,
    hierarchy: str,
    processes: Callable[..., subprocess.Popen[str]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    burner = started(processes(BURNER))
    group = Cgroup(f"{hierarchy}/{container_id(13)}")
    place(v1, group, burner.pid)
    watched = ("cpu.cfs_quota_us", "cpu.shares", "memory.soft_limit_in_bytes",
               "memory.limit_in_bytes")  # fmt: skip
    before = {key: v1.read(group, key) for key in watched}
    state = tmp_path / "state.json"
    agent = _dry_agent(hierarchy, state)
    caplog.set_level(logging.INFO, logger="preemption")
    reports = []
    for _ in range(4):
        reports.append(agent.tick())
        time.sleep(0.3)
    steps = [e for r in reports for e in r.events if e.kind == "step"]
    assert steps and all(e.container_id == container_id(13) for e in steps)
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="step") == len(steps)
    assert agent.metrics.value("yarn_adapt_agent_tasks_squeezed_total") == 1
    backend = agent.backend
    assert isinstance(backend, DryRunBackend)
    quota = f"to {group.relpath}/cpu.cfs_quota_us"
    assert any(quota in would for would in backend.would)
    assert any("dry run: would write" in r.getMessage() for r in caplog.records)
    assert backend.read(group, "cpu.cfs_quota_us") != before["cpu.cfs_quota_us"]  # overlay
    assert {key: v1.read(group, key) for key in watched} == before  # the node: untouched
    assert v1.pids(group) == (burner.pid,)
    assert not state.exists()
    agent.shutdown()
    assert {key: v1.read(group, key) for key in watched} == before
    assert not state.exists()


def test_a_dry_run_would_adopt_a_container_without_a_cgroup_but_moves_nothing(
    v1: V1Backend, hierarchy: str, processes: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    launcher = processes(LAUNCHER, launch_script(container_id(14)))
    started(launcher)
    state = tmp_path / "state.json"
    agent = _dry_agent(hierarchy, state, source="process-tree", nodemanager_pid=os.getpid())
    found = wait_for(
        lambda: [c for c in agent.discover() if c.container_id == container_id(14)], 10
    )
    pids = found[0].pids
    before = {pid: cgroup_membership(Path("/proc"), pid, ("cpu", "memory")) for pid in pids}
    for _ in range(3):
        agent.tick()
        time.sleep(0.3)
    backend = agent.backend
    assert isinstance(backend, DryRunBackend)
    owned = agent.adopter.group_for(container_id(14))
    assert sorted(backend.pids(owned)) == sorted(pids)  # in the overlay only
    assert any(f"move pid {pids[0]} to {owned.relpath}" in w for w in backend.would)
    assert any(f"to {owned.relpath}/cpu.cfs_quota_us" in w for w in backend.would)
    for pid in pids:
        assert cgroup_membership(Path("/proc"), pid, ("cpu", "memory")) == before[pid]
    assert not v1.exists(owned)
    assert not (v1.mounts["cpu"] / hierarchy / "agent-owned").exists()
    assert not state.exists()
    agent.shutdown()
    assert not state.exists()


@pytest.mark.parametrize(
    ("field", "entry", "named"),
    [
        ("originals", {"group": "/escape", "key": "cpu.max", "value": "max 100000"},
         "originals[0].group '/escape': an absolute path"),
        ("originals", {"group": "hadoop-yarn/../../escape", "key": "cpu.max",
                       "value": "max 100000"},
         "originals[0].group 'hadoop-yarn/../../escape': a '..'"),
        ("created", "yarn-adapt/../..", "created[0] 'yarn-adapt/../..': a '..'"),
        ("adopted", "./x", "adopted[0] './x': a '..', '.' or empty component"),
        ("moved", {"pid": 1, "group": "yarn-adapt/c", "from": {"": "../escape"}},
         "moved[0].from[''] '../escape': a '..'"),
    ],
)  # fmt: skip
def test_a_state_file_path_outside_the_cgroup_root_is_refused_naming_the_entry(
    field: str, entry: object, named: str, tmp_path: Path
) -> None:
    root = tmp_path / "cgroup"
    root.mkdir()
    outside = tmp_path / "escape" / "cpu.max"  # what a joined path would overwrite
    outside.parent.mkdir()
    outside.write_text("untouched")
    content = {"format": 1, "backend": {"version": "v2", "root": str(root)},
               "originals": [], "created": [], "moved": [], field: [entry]}  # fmt: skip
    state = tmp_path / "state.json"
    state.write_text(json.dumps(content))
    with pytest.raises(StateFileCorrupt) as caught:
        journal = StateJournal.open(state, {"version": "v2", "root": str(root)})
        restore(journal, V2Backend(root))
    line = caught.value.one_line()
    assert line.startswith(f"{state}: ") and named in line and "\n" not in line
    assert outside.read_text() == "untouched"


def test_a_cgroup_path_that_resolves_outside_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "cpu.max").write_text("max 100000")
    (root / "link").symlink_to(tmp_path / "elsewhere")
    backend = V2Backend(root)
    for relpath in ("link", "../elsewhere", "/elsewhere"):
        with pytest.raises(CgroupError, match="refused cgroup path"):
            backend.write(Cgroup(relpath), "cpu.max", "1000 100000")
    assert (tmp_path / "elsewhere" / "cpu.max").read_text() == "max 100000"


def test_sigusr1_makes_a_running_agent_write_its_stacks_and_it_still_stops_cleanly(
    hierarchy: str, tmp_path: Path
) -> None:
    """How a stuck agent says where it is (docs/flakes.md): SIGUSR1 writes every
    thread's stack to stderr, and the agent runs on and stops on SIGTERM as before."""
    config = write_config(tmp_path / "agent.toml", hierarchy, tmp_path / "s.json", cpu=0, memory=0)
    log = tmp_path / "agent.log"
    with log.open("wb") as stream:
        agent = subprocess.Popen(
            [sys.executable, "-m", "preemption", "run", "--config", str(config)],
            stdout=stream, stderr=stream, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    try:
        wait_for(lambda: "yarn-adapt agent on" in log.read_text(), 30)
        agent.send_signal(signal.SIGUSR1)
        wait_for(lambda: "most recent call first" in log.read_text(), 10)
        assert agent.poll() is None  # still running
        text = log.read_text()
        assert "Current thread" in text and "preemption/agent.py" in text, text
    finally:
        agent.send_signal(signal.SIGTERM)
        code = agent.wait(60)
    assert code == 0, log.read_text()
    assert "stopped: " in log.read_text()
