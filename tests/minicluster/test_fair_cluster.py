"""The Fair Scheduler cluster: apps in a queue, allocation-file reload with and without rmadmin."""

from __future__ import annotations

import time

import pytest

from yarn_adapt.minicluster import DEFAULT_FAIR_XML, MiniCluster

from .support import as_list, fair_queues

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

# FairScheduler.md: the file is re-read 10-15 s after it changes
# (ALLOC_RELOAD_INTERVAL_MS = 10 s, ALLOC_RELOAD_WAIT_MS = 5 s).
RELOAD_BOUND_S = 20.0

WITH_QUEUE_C = """\
<?xml version="1.0"?>
<allocations>
  <queue name="default"><weight>1.0</weight></queue>
  <queue name="a"><weight>3.0</weight></queue>
  <queue name="b"><weight>1.0</weight></queue>
  <queue name="c"><weight>1.0</weight><maxRunningApps>7</maxRunningApps></queue>
  <queuePlacementPolicy>
    <rule name="specified" create="false"/>
    <rule name="default" queue="default"/>
  </queuePlacementPolicy>
</allocations>
"""


def test_fair_cluster_reports_the_allocation_file_queues(fair_cluster: MiniCluster) -> None:
    info = fair_cluster.rm_get("scheduler")["scheduler"]["schedulerInfo"]
    assert info["type"] == "fairScheduler"
    assert set(fair_queues(fair_cluster)) == {"root.default", "root.a", "root.b"}


def test_distributed_shell_app_runs_in_fair_queue_a(fair_cluster: MiniCluster) -> None:
    submitted = fair_cluster.submit_sleep_app("a", containers=2, sleep_s=2)
    finished = submitted.wait(180)
    assert (finished["state"], finished["finalStatus"], finished["queue"]) == (
        "FINISHED", "SUCCEEDED", "root.a",
    )  # fmt: skip
    apps = as_list(fair_cluster.rm_get("apps?queue=root.a")["apps"]["app"])
    assert submitted.application_id() in {app["id"] for app in apps}


def test_edited_allocation_file_is_reloaded_without_rmadmin(fair_cluster: MiniCluster) -> None:
    fair_cluster.write_scheduler_xml(WITH_QUEUE_C)
    written = time.monotonic()
    while "root.c" not in fair_queues(fair_cluster):
        assert time.monotonic() - written < RELOAD_BOUND_S, "allocation file not reloaded"
        time.sleep(0.5)
    queue_c = fair_queues(fair_cluster)["root.c"]
    assert queue_c["maxApps"] == 7


def test_refresh_queues_reloads_the_allocation_file_at_once(fair_cluster: MiniCluster) -> None:
    limited = DEFAULT_FAIR_XML.replace(
        '<queue name="a"><weight>1.0</weight></queue>',
        '<queue name="a"><weight>1.0</weight><maxRunningApps>3</maxRunningApps></queue>',
    )
    assert limited != DEFAULT_FAIR_XML
    fair_cluster.write_scheduler_xml(limited)
    done = fair_cluster.refresh_queues()
    assert done.returncode == 0, done.stderr
    assert fair_queues(fair_cluster)["root.a"]["maxApps"] == 3
    fair_cluster.restore_initial_scheduler_config()
    assert fair_queues(fair_cluster)["root.a"]["maxApps"] != 3
