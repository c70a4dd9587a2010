"""The control plane's cpu group on real cgroup v1: its processes run there with its
weight, and go back where they came from afterwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from yarn_adapt.minicluster import cpusets

pytestmark = pytest.mark.skipif(
    not (cpusets.cpu_root() / "cpu.shares").exists(), reason="no cgroup v1 cpu hierarchy"
)


def cpu_group(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    raise AssertionError(f"pid {pid} is in no cpu group")


def test_the_control_plane_runs_in_its_group_and_goes_back(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    before = cpu_group(sleeper.pid)
    try:
        with cpusets.control_plane(root, 4096, [sleeper.pid]) as group:
            assert (group / "cpu.shares").read_text().strip() == "4096"
            assert cpu_group(sleeper.pid) == "/" + group.name
        assert cpu_group(sleeper.pid) == before
        assert not group.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_gone_before_the_group_is_made_is_no_error(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    with cpusets.control_plane(tmp_path / "cluster", 2048, [gone.pid]) as group:
        assert cpusets.tasks(group) == []
    assert not group.exists()
