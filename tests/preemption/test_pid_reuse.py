"""A pid reused between the agent's scan and its ``cgroup.procs`` write is never moved
(real processes, real cgroup v1, the reuse made to happen by ``ns_last_pid`` inside a
PID namespace of the test's own: see pid_reuse_helper.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from preemption.cgroups import V1Backend

from .conftest import unavailable

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run_in_new_pid_namespace(
    hierarchy: str, state_dir: Path
) -> tuple[dict[str, dict[str, object]], str]:
    """The helper's report, and what it logged."""
    if shutil.which("unshare") is None:
        unavailable("needs unshare (util-linux) for a PID namespace")
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m",
         "tests.preemption.pid_reuse_helper", hierarchy, str(state_dir)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report: dict[str, dict[str, object]] = json.loads(done.stdout.splitlines()[-1])
    return report, done.stderr


def test_a_pid_reused_before_or_during_the_move_is_never_left_in_the_containers_cgroup(
    v1: V1Backend, hierarchy: str, tmp_path: Path
) -> None:
    report, logged = run_in_new_pid_namespace(f"{hierarchy}/agent-owned", tmp_path)
    before, during = report["before_write"], report["during_write"]
    # The reuse happened for real: the newcomer has the scanned process's pid.
    assert before["newcomer_pid"] == before["pid"]
    assert during["newcomer_pid"] == during["pid"]
    # Reused before the write: refused by the check, nothing moved or journalled.
    assert before["newcomer_moved"] is False
    assert before["group_pids"] == [] and before["journalled"] is False
    # Reused during the write: the write moved the newcomer; it is moved back.
    assert f"pid {during['pid']} was reused by another process during a move" in logged
    assert during["newcomer_home"] is True
    assert during["group_pids"] == [] and during["journalled"] is False
