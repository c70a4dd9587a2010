"""Two small issue-14 fidelity scenarios end to end on the real RM: a Capacity user
limit with apps of two users, and a Fair/DRF queue short of vcores. The bench runs
the full scenarios (``yarn-adapt bench sim-fidelity``); these keep the mechanisms
(other users through REST, per-app vcores) honest in CI."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise

import pytest

from yarn_adapt.bench.sim_fidelity.compare import compare
from yarn_adapt.bench.sim_fidelity.real import RealRun, install_scheduler_file, run_on_cluster
from yarn_adapt.bench.sim_fidelity.scenarios import (
    AGREE_MAX_REL_ERR,
    Scenario,
    SleepApp,
    capacity_xml,
    fair_xml,
)
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.sim.calibration import RECORDED_OVERHEADS

pytestmark = pytest.mark.alone  # the RM's timings against the simulator's

# One user may hold about a tenth of the 8 GiB node (user-limit-factor 1): an AM and
# a container or two; two users each get their own share.
USER_LIMIT = Scenario(
    "ci-user-limit",
    "capacity",
    capacity_xml(
        {
            "a": {"capacity": "10", "maximum-capacity": "100", "user-limit-factor": "1"},
            "b": {"capacity": "90", "maximum-capacity": "100"},
        }
    ),
    (
        SleepApp(0.0, "a", 3, 4.0, 512, user="alice"),
        SleepApp(1.0, "a", 3, 4.0, 512, user="bob"),
    ),
)

# Containers of 4 vcores on the 8-vcore node: beside the AM only one fits, although
# memory has room for all three.
DRF_VCORES = Scenario(
    "ci-drf-vcores",
    "fair",
    fair_xml(
        '  <queue name="a"><weight>1</weight></queue>\n'
        '  <queue name="b"><weight>1</weight></queue>\n',
        "  <defaultQueueSchedulingPolicy>drf</defaultQueueSchedulingPolicy>\n",
    ),
    (SleepApp(0.0, "a", 3, 4.0, 512, vcores=4),),
)


@contextmanager
def on_scenario(cluster: MiniCluster, scenario: Scenario) -> Iterator[RealRun]:
    """The scenario's run; the shared cluster's own scheduler file back afterwards
    (other tests read its queues)."""
    original = cluster.read_scheduler_xml()
    try:
        yield run_on_cluster(cluster, scenario)
    finally:
        install_scheduler_file(cluster, original)


def test_apps_of_two_users_under_a_user_limit(capacity_cluster: MiniCluster) -> None:
    with on_scenario(capacity_cluster, USER_LIMIT) as run:
        pass

    assert [real.app.user for real in run.apps] == ["alice", "bob"]
    for real in run.apps:
        assert real.app.queue == "root.a"
        # the user limit holds each user's three containers to a few at a time
        assert real.latency_s > 2 * real.spec.sleep_s
    for comparison in compare(run, RECORDED_OVERHEADS, seed=1):
        assert comparison.rel_err <= AGREE_MAX_REL_ERR, comparison


def test_drf_queue_runs_short_of_vcores(fair_cluster: MiniCluster) -> None:
    with on_scenario(fair_cluster, DRF_VCORES) as run:
        pass

    (real,) = run.apps
    assert real.timeline is not None
    tasks = sorted(real.timeline.tasks, key=lambda t: t.started_s)
    assert len(tasks) == 3
    # one 4-vcore container at a time beside the AM: each starts after the last ended
    for earlier, later in pairwise(tasks):
        assert later.granted_s >= earlier.exited_s - 1.0
    (comparison,) = compare(run, RECORDED_OVERHEADS, seed=1)
    assert comparison.rel_err <= AGREE_MAX_REL_ERR, comparison
