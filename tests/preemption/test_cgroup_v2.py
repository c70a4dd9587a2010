"""The v2 backend on a directory laid out like a cgroup v2 hierarchy (controllers are
not delegated on this host, so the kernel's files are stood in for by plain files;
the processes are real)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from preemption.agent import Agent, AgentParts, target_source
from preemption.cgroups import Cgroup, Usage, V2Backend
from preemption.errors import CgroupUnsupported
from preemption.metrics import AgentMetrics
from preemption.model import Amount, ReclaimTarget
from preemption.settings import agent_settings_from_mapping
from preemption.statefile import RestoreReport, StateJournal, dissolve
from preemption.targets import Fetched

from .factories import ISOLATION_OFF, ListedBy

CID = "container_1700000000000_0007_01_000002"
MIB = 1 << 20


@pytest.fixture
def sleeper() -> Iterator[int]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield child.pid
    child.kill()
    child.wait()


def lay_out(root: Path, pid: int, *, controllers: bool = True) -> Path:
    group = root / "hadoop-yarn" / CID
    group.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "hadoop-yarn" / "cgroup.subtree_control").write_text("cpu memory\n")
    files = {
        "cgroup.procs": f"{pid}\n",
        "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
        "memory.current": str(300 * MIB),
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
    }
    if controllers:
        files |= {"cpu.max": "max 100000", "cpu.weight": "100", "memory.high": "max",
                  "memory.max": "max"}  # fmt: skip
    for name, text in files.items():
        (group / name).write_text(text)
    return group


def burn(group: Path, usec: int) -> None:
    """What the kernel would report after the container used ``usec`` more CPU."""
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    (group / "cpu.stat").write_text(f"usage_usec {int(stat['usage_usec']) + usec}\n")


def agent_on(root: Path, tmp_path: Path, *, cpu: int, memory: int) -> Agent:
    discovery = {
        "source": "cgroup",
        "cgroup_version": "v2",
        "cgroup_root": str(root),
        "node_cpu_millicores": 4000,
    }
    reclaim = {
        "per_task_cpu_millicores": 1000,
        "step_cpu_millicores": 500,
        "per_task_memory_mb": 512,
        "step_memory_mb": 128,
        "floor_memory_mb": 16,
        "memory_hard_headroom_mb": 32,
        "settle_s": 0.0,
    }
    settings = agent_settings_from_mapping(
        {
            "agent": {"state_file": str(tmp_path / "state.json")},
            "standalone": {"reclaim_cpu_millicores": cpu, "reclaim_memory_mb": memory},
            "discovery": discovery,
            "classify": {"unknown": "batch"},
            "reclaim": reclaim,
            **ISOLATION_OFF,
        },
        "test",
    )
    backend = V2Backend(root, memory=settings.memory_policy())
    journal = StateJournal.open(tmp_path / "state.json", backend.describe())
    parts = AgentParts(backend=backend, journal=journal, target=target_source(settings),
                       nodemanager=ListedBy(os.getpid(), [CID]), metrics=AgentMetrics(),
                       clock=Clock())  # fmt: skip
    return Agent(settings, parts)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_v2_limits_go_to_cpu_max_weight_and_memory_high_and_come_back(
    tmp_path: Path, sleeper: int
) -> None:
    root = tmp_path / "cgroup"
    group = lay_out(root, sleeper)
    (group / "memory.current").write_text(str(40 * MIB))
    agent = agent_on(root, tmp_path, cpu=1000, memory=256)
    agent.tick()
    burn(group, 1_000_000)  # one full core over the 1 s interval
    agent.tick()  # baseline 1000m / 256 MiB (the NM's allocation); first mini-step
    assert (group / "cpu.max").read_text() == "50000 100000"
    assert (group / "cpu.weight").read_text() == "50"
    assert (group / "memory.high").read_text() == str(128 * MIB)
    burn(group, 500_000)
    agent.tick()
    assert (group / "cpu.max").read_text() == str(10000) + " 100000"  # at the 100m floor
    # The limit is 16 MiB (the floor) but memory.high stays at usage + headroom.
    assert (group / "memory.high").read_text() == str((40 + 32) * MIB)
    assert (group / "memory.max").read_text() == "max"  # never written on v2
    agent.shutdown()
    assert [(group / f).read_text() for f in ("cpu.max", "cpu.weight", "memory.high")] == [
        "max 100000", "100", "max",
    ]  # fmt: skip
    assert not (tmp_path / "state.json").exists()


def test_missing_controller_files_are_unsupported_not_a_vanished_container(
    tmp_path: Path, sleeper: int
) -> None:
    root = tmp_path / "cgroup"
    lay_out(root, sleeper, controllers=False)
    backend = V2Backend(root)
    with pytest.raises(CgroupUnsupported, match="subtree_control"):
        backend.read(Cgroup(f"hadoop-yarn/{CID}"), "cpu.max")
    agent = agent_on(root, tmp_path, cpu=1000, memory=0)
    report = agent.tick()
    assert [e.kind for e in report.events] == ["error"]
    assert agent.metrics.value("yarn_adapt_agent_events_total", kind="error") == 1
    agent.shutdown()


def test_v2_membership_and_move_use_the_unified_line(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text("0::/system.slice/hadoop-nodemanager.service\n")
    root = tmp_path / "cgroup"
    (root / "yarn-adapt" / CID).mkdir(parents=True)
    (root / "yarn-adapt" / CID / "cgroup.procs").write_text("")
    backend = V2Backend(root, proc=proc)
    assert backend.membership(4242) == {"": "system.slice/hadoop-nodemanager.service"}
    backend.move(4242, Cgroup(f"yarn-adapt/{CID}"))
    assert (root / "yarn-adapt" / CID / "cgroup.procs").read_text() == "4242"
    assert (root / "yarn-adapt").is_dir()


class Explodes:
    """A target source with a bug: the agent must not leave limits behind."""

    def __init__(self) -> None:
        self.calls = 0

    def report(self, lines: Sequence[str]) -> None:
        pass

    def current(self) -> Fetched:
        self.calls += 1
        if self.calls > 2:
            raise RuntimeError("a bug")
        return Fetched(ReclaimTarget(reclaim=Amount(1000, 0)))


def test_an_unexpected_failure_restores_every_limit_before_it_propagates(
    tmp_path: Path, sleeper: int
) -> None:
    root = tmp_path / "cgroup"
    group = lay_out(root, sleeper)
    agent = agent_on(root, tmp_path, cpu=0, memory=0)
    agent.parts.target = Explodes()
    agent.tick()
    burn(group, 1_000_000)
    agent.tick()
    assert (group / "cpu.max").read_text() == "50000 100000"
    with pytest.raises(RuntimeError, match="a bug"):
        agent.tick()
    assert (group / "cpu.max").read_text() == "max 100000"
    assert (group / "cpu.weight").read_text() == "100"
    assert not (tmp_path / "state.json").exists()


def test_a_process_with_no_recorded_origin_stays_rather_than_going_to_the_root(
    tmp_path: Path,
) -> None:
    # An agent-made group holding a process the journal knows nothing of: moving it to
    # the root would free it from the NodeManager's limits, so it stays, named.
    root = tmp_path / "cgroup"
    directory = root / "yarn-adapt" / CID
    directory.mkdir(parents=True)
    (directory / "cgroup.procs").write_text("4242\n")
    (root / "cgroup.procs").write_text("")
    backend = V2Backend(root, proc=tmp_path / "proc")
    journal = StateJournal.open(tmp_path / "state.json", backend.describe())
    group = Cgroup(f"yarn-adapt/{CID}")
    journal.remember_created(group)
    report = RestoreReport()
    dissolve(journal, backend, group, report)
    assert (root / "cgroup.procs").read_text() == ""
    assert f"yarn-adapt/{CID}: process 4242 has no recorded origin" in report.failures
    assert group.relpath in journal.content.created  # still journalled: tried again later


@pytest.mark.parametrize(
    ("limit_mb", "usage_mb", "original", "high"),
    [
        (64, 300, "max", str((300 + 128) * MIB)),  # never below usage + headroom
        (400, 10, "max", str(400 * MIB)),  # above the floor: the limit itself
        (64, 300, str(400 * MIB), str(400 * MIB)),  # never above the original
        (64, 10, str(100 * MIB), str(100 * MIB)),
        (512, 10, "max", "max"),  # back at the baseline: the original
    ],
)
def test_v2_memory_high_is_never_set_below_usage_plus_headroom(
    limit_mb: int, usage_mb: int, original: str, high: str, tmp_path: Path
) -> None:
    # As v1's memory.limit_in_bytes: memory.high throttles and reclaims hard, so the
    # agent never puts it under what the container holds now plus the headroom.
    backend = V2Backend(tmp_path)  # default policy: 128 MiB headroom
    originals = {"cpu.max": "max 100000", "cpu.weight": "100", "memory.high": original,
                 "memory.max": "max"}  # fmt: skip
    values = backend.desired_values(
        Amount(1000, limit_mb), Amount(1000, 512), originals, Usage(0, usage_mb * MIB)
    )
    assert values["memory.high"] == high
