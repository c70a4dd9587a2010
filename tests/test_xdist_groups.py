"""``tests/run``'s real-YARN tier needs each cluster variant's tests on one pytest-xdist
worker, or every worker starts and stops every variant in turn (``conftest.py`` marks
them ``xdist_group``). The grouping has failed silently before, twice at once: the marks
were added after xdist's worker read them, and pytest 9.2's node ids drop the group
xdist appends (pytest-dev/pytest-xdist#1386). This plans two cluster files under xdist,
starting nothing (``--setup-plan``), and reads the group of every planned test."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = {
    "tests/minicluster/test_fair_cluster.py": {"fair_cluster"},
    "tests/minicluster/test_capacity_cluster.py": {"capacity_cluster-0", "capacity_cluster-1"},
}


def test_each_cluster_test_is_planned_in_its_variants_group() -> None:
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
               "--setup-plan", "-v", "-p", "no:cacheprovider", "-m", "yarn", *FILES]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 5), run.stdout[-3000:] + run.stderr[-3000:]
    planned = re.findall(r"^(tests/\S+\.py)::(\S+?)(?:@(\S+))?\s*$", run.stdout, re.MULTILINE)
    assert planned, run.stdout[-3000:]
    for path, test, group in planned:
        assert group in FILES[path], f"{path}::{test} planned in group {group or 'none'}"
    groups = {group for _, _, group in planned}
    assert groups == set().union(*FILES.values()), groups  # both shards of the large variant
