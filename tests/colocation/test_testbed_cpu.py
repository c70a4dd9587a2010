"""The testbed's CPU measurements without a cluster: per-request CPU and wall time of a
service's own work, and per node the batch and services' CPU shares from a real
cpuacct cgroup (a process that ended before the window closed is counted whole)."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.colocation.conftest import unavailable
from yarn_adapt.testbed import results as tb_results
from yarn_adapt.testbed.services import RequestStats
from yarn_adapt.testbed.usage import CpuSample, NodeCpuMeter, cpu_shares

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_shares_are_what_batch_and_the_services_used_of_each_nodes_cpu() -> None:
    first = CpuSample(100.0, (10.0, 20.0), (1.0, 2.0), (0.5, 0.5))
    last = CpuSample(104.0, (13.0, 22.0), (2.0, 3.0), (0.7, 0.6))
    shares = cpu_shares(first, last)
    assert shares is not None
    # node 0: 3 s in the group, 1 s services, 0.2 s NodeManager, over 4 s of one CPU
    assert shares.batch == pytest.approx((0.45, 0.225))
    assert shares.lc == pytest.approx((0.25, 0.25))
    assert cpu_shares(last, last) is None


def test_shares_stay_within_the_cpu_when_counters_are_read_a_little_apart() -> None:
    # the services' /proc counter read after the group's: more than the group grew
    first = CpuSample(0.0, (0.0,), (0.0,), (0.0,))
    last = CpuSample(1.0, (0.5,), (0.7,), (0.0,))
    shares = cpu_shares(first, last)
    assert shares is not None and shares.batch == (0.0,) and shares.lc == (0.7,)


def test_each_request_records_its_cpu_and_wall_time() -> None:
    stream = io.StringIO()
    stats = RequestStats(stream)
    for _ in range(3):
        stats.measured(20_000)
    rows = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(rows) == 3
    for started, cpu_ms, wall_ms in rows:
        assert abs(started - time.time()) < 60
        assert 0 < cpu_ms <= wall_ms + 0.5  # thread CPU time never exceeds the wall time


def test_service_figures_take_the_requests_that_began_in_the_window() -> None:
    window = tb_results.Window("on", 10.0, 12.0)
    records = [(9.9, 1.0, 50.0)] + [(10.0 + i / 10, 2.0 + i % 2, 5.0 + i) for i in range(20)]
    figures = tb_results.service_figures("pricing", 0, records, window)
    assert figures.requests == 20 and figures.rate_rps == pytest.approx(10.0)
    assert figures.cpu_ms_median == pytest.approx(2.5)
    assert figures.self_p95_ms == pytest.approx(5.0 + 0.95 * 19)
    empty = tb_results.service_figures("pricing", 0, records, tb_results.Window("x", 50.0, 60.0))
    assert empty.requests == 0


@pytest.fixture
def cpuacct_group() -> Iterator[Path]:
    if not os.access(CPUACCT, os.W_OK):
        unavailable(f"no writable cgroup v1 cpuacct hierarchy at {CPUACCT}")
    group = CPUACCT / f"yarn-adapt-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    yield group
    for pid in (group / "cgroup.procs").read_text().split():
        (CPUACCT / "cgroup.procs").write_text(pid)
    group.rmdir()


def _burner(seconds: float, cpu: int, group: Path) -> subprocess.Popen[bytes]:
    def pin() -> None:
        os.sched_setaffinity(0, {cpu})
        (group / "cgroup.procs").write_text(str(os.getpid()))

    return subprocess.Popen([sys.executable, "-c", BURN.format(s=seconds)], preexec_fn=pin)


def test_the_meter_counts_batch_that_ended_and_leaves_the_services_out(
    cpuacct_group: Path,
) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        unavailable("the meter's test needs two CPUs")
    service = _burner(30.0, 1, cpuacct_group)  # a long-lived "service" on node 1
    nodes = ("node-0", "node-1")
    meter = NodeCpuMeter(
        cpuacct_group, [0, 1], nodes, lambda: {"node-1": [service.pid]}, {}, time.time
    )
    try:
        first = meter.sample()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        batch = _burner(0.25, 0, cpuacct_group)  # batch on node 0: ends before the window
        batch.wait(60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        time.sleep(0.2)
        last = meter.sample()
    finally:
        service.kill()
        service.wait(10)
    shares = cpu_shares(first, last)
    assert shares is not None
    elapsed = last.at_s - first.at_s
    batch_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert batch_cpu > 0.2
    assert shares.batch[0] == pytest.approx(batch_cpu / elapsed, abs=0.05)
    assert shares.batch[1] < 0.05  # the service's CPU is its own, not batch's
    assert shares.lc[1] > 0.0 and shares.lc[0] == 0.0  # how much depends on the host's load
