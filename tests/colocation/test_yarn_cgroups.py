"""YARN's CPU weights as the testbed places them, on a real cgroup v1 ``cpu`` hierarchy:
each container below a "NodeManager" gets hadoop-yarn-<index>/<container id> with cpu.shares
1024 x its vcores and its processes moved there; a process already in another group
(an agent's) is left alone; closing puts what still runs back and removes the groups."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.colocation.conftest import unavailable
from yarn_adapt.minicluster import cpusets
from yarn_adapt.testbed.yarncgroups import YarnCpuWeights, hierarchy_of

CPU = Path("/sys/fs/cgroup/cpu")
FIRST = "container_1700000000000_0001_01_000002"
SECOND = "container_1700000000000_0001_01_000003"
# A "NodeManager" whose children are launch processes naming their containers, as
# the DefaultContainerExecutor's default_container_executor.sh does.
NODEMANAGER = """
import subprocess, sys, time
for name in sys.argv[1:]:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                      f"/tmp/{name}/default_container_executor.sh"])
time.sleep(60)
"""


@pytest.fixture
def weight_group() -> Iterator[Path]:
    if os.geteuid() != 0 or not os.access(CPU, os.W_OK):
        unavailable(f"no writable cgroup v1 cpu hierarchy at {CPU}")
    group = CPU / f"yarn-adapt-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        yield group
    finally:
        groups = [group, *(p for p in group.rglob("*") if p.is_dir())]
        for pid in [pid for g in groups for pid in cpusets.tasks(g)]:
            cpusets.join(pid, CPU)
        for child in sorted(groups, key=lambda p: len(p.parts), reverse=True):
            child.rmdir()


def children_of(pid: int) -> list[int]:
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(found) == 2:
            return [int(child) for child in found]
        time.sleep(0.05)
    raise AssertionError("the launch processes did not start")


def test_each_container_gets_its_yarn_weight_and_an_agents_process_is_left_alone(
    weight_group: Path,
) -> None:
    script = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
    nodemanager = subprocess.Popen(["/bin/sh", "-c", script, str(weight_group), sys.executable,
                                    "-c", NODEMANAGER, FIRST, SECOND])  # fmt: skip
    launched: list[int] = []
    try:
        first, second = launched = sorted(children_of(nodemanager.pid))
        agents = weight_group / "yarn-adapt" / SECOND  # an agent took this one already
        agents.mkdir(parents=True)
        cpusets.join(second, agents)
        weights = YarnCpuWeights(weight_group, [nodemanager.pid],
                                 vcores_of=lambda cid: 2 if cid == FIRST else 1)  # fmt: skip
        weights.step()
        home = weight_group / hierarchy_of(0) / FIRST  # its NodeManager's own
        assert cpusets.cpu_group_of(first) == home
        assert (home / "cpu.shares").read_text().strip() == "2048"
        assert cpusets.cpu_group_of(second) == agents  # left to the agent
        assert cpusets.cpu_group_of(nodemanager.pid) == weight_group  # not a container
        assert weights.to_json() == {"cgroup_weights": "testbed-placed",
                                     "containers_weighted": 1, "processes_moved": 1}  # fmt: skip
        weights.step()  # nothing moves twice
        assert weights.moved == 1
        weights.close()
        assert cpusets.cpu_group_of(first) == weight_group
        assert not (weight_group / hierarchy_of(0)).exists()
    finally:
        for pid in [nodemanager.pid, *launched]:
            os.kill(pid, 9)
        nodemanager.wait()
