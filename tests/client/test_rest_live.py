"""Every client method against the real mini cluster (RM + NM + JobHistory JVMs)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from yarn_adapt.errors import YarnHTTPError
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import (
    AppState,
    FinalStatus,
    HAState,
    JobState,
    NodeState,
    Resources,
    SchedulerKind,
    TaskType,
)
from yarn_adapt.yarn.history import JobHistoryClient
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.observe import observe_cluster
from yarn_adapt.yarn.rm import ResourceManagerClient

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

T = TypeVar("T")
SETTINGS = HttpSettings(user="yarn-adapt-test", read_timeout_s=30.0)
NODE = Resources(8192, 8)
LEAVES = ("root.default", "root.a", "root.b")


def wait_for(probe: Callable[[], T | None], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def new_app_id(rm: ResourceManagerClient, known: set[str]) -> str:
    """The id of the app submitted after ``known`` was taken, read from the RM itself."""
    return wait_for(
        lambda: next((app.id for app in rm.apps() if app.id not in known), None), 90, "a new app"
    )


def wait_finished(rm: ResourceManagerClient, app_id: str, timeout_s: float = 300) -> None:
    wait_for(lambda: True if rm.app(app_id).is_finished else None, timeout_s, f"{app_id} to end")


def job_id_of(app_id: str) -> str:
    return app_id.replace("application_", "job_", 1)


@pytest.fixture
def rm(request: pytest.FixtureRequest) -> Iterator[ResourceManagerClient]:
    cluster: MiniCluster = request.getfixturevalue(_cluster_fixture(request))
    with ResourceManagerClient(cluster.rm_url, SETTINGS) as client:
        yield client


def _cluster_fixture(request: pytest.FixtureRequest) -> str:
    names = ("capacity_cluster", "capacity_memory_cluster", "fair_cluster")
    return next(name for name in names if name in request.fixturenames)


# --------------------------------------------------------------------------- capacity


def test_cluster_info_metrics_and_nodes(capacity_cluster: MiniCluster, rm: ResourceManagerClient):
    info = rm.cluster_info()
    assert (info.ha_state, info.state) == (HAState.ACTIVE, "STARTED")
    assert info.hadoop_version.startswith("3.4.")
    metrics = rm.cluster_metrics()
    assert (metrics.total, metrics.active_nodes, metrics.total_nodes) == (NODE, 1, 1)
    [node] = rm.nodes()
    assert (node.state, node.total) == (NodeState.RUNNING, NODE)
    assert node.id.startswith(node.host + ":") and node.http_address
    assert (rm.node(node.id).id, rm.node(node.id).total) == (node.id, NODE)
    assert rm.nodes(states=[NodeState.LOST]) == ()


def test_capacity_scheduler_queues(capacity_cluster: MiniCluster, rm: ResourceManagerClient):
    status = rm.scheduler()
    assert status.kind is SchedulerKind.CAPACITY
    assert [q.path for q in status.queues()] == ["root", *LEAVES]
    capacities = {q.path: round(q.capacity or 0, 3) for q in status.root.children}
    assert capacities == {"root.default": 40.0, "root.a": 30.0, "root.b": 30.0}
    queue_a = status.find("root.a")
    assert queue_a is not None
    assert (queue_a.maximum_capacity, queue_a.state, queue_a.ordering_policy) == (
        100.0, "RUNNING", "fifo",
    )  # fmt: skip
    assert (queue_a.user_limit_factor, queue_a.minimum_user_limit_percent) == (1.0, 100.0)
    assert queue_a.maximum_am_resource_percent == pytest.approx(0.5)
    assert queue_a.absolute_capacity == pytest.approx(30.0, abs=0.01)
    assert queue_a.used.is_zero and queue_a.is_leaf


def test_an_app_seen_running_then_finished(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient
):
    known = {app.id for app in rm.apps()}
    capacity_cluster.submit_sleep_app("a", containers=2, sleep_s=4, name="client-ds")
    app_id = new_app_id(rm, known)

    def queue_a_busy() -> int | None:
        queue = rm.scheduler().find("root.a")
        return queue.num_containers if queue and queue.num_containers >= 3 else None

    assert wait_for(queue_a_busy, 60, "3 containers in root.a") == 3
    running = rm.app(app_id)
    assert (running.state, running.queue, running.name) == (AppState.RUNNING, "root.a", "client-ds")
    assert running.launched_ms is not None and running.finished_ms is None
    assert running.allocated.memory_mb >= 3 * 256 and running.running_containers >= 3
    assert app_id in {app.id for app in rm.apps(states=[AppState.RUNNING], queue="root.a")}
    [attempt] = rm.app_attempts(app_id)
    assert (attempt.attempt_id, attempt.container_id.startswith("container_")) == (1, True)
    wait_finished(rm, app_id)
    finished = rm.app(app_id)
    assert (finished.state, finished.final_status) == (AppState.FINISHED, FinalStatus.SUCCEEDED)
    assert finished.latency_ms is not None and finished.latency_ms >= 4000
    recent = rm.apps(states=[AppState.FINISHED], finished_after_ms=finished.submitted_ms)
    assert app_id in {app.id for app in recent}


@pytest.mark.parametrize(
    ("app_id", "status", "words"),
    [
        ("application_1_0001", 404, "not found"),
        ("not-an-app", 400, "Invalid ApplicationId"),
    ],
)
def test_unknown_or_invalid_app_ids(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, app_id: str, status: int, words: str
):
    with pytest.raises(YarnHTTPError) as caught:
        rm.app(app_id)
    assert caught.value.status == status
    assert words.lower() in caught.value.message.lower()
    assert "\n" not in str(caught.value)


def test_update_node_resource_changes_the_node_total(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient
):
    [node] = rm.nodes()
    smaller = Resources(6144, 6)
    rm.update_node_resource(node.id, smaller)
    assert wait_for(lambda: rm.node(node.id).total == smaller or None, 30, "new total")
    assert rm.cluster_metrics().total == smaller


def test_mapreduce_job_with_tasks_from_job_history(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient
):
    known = {app.id for app in rm.apps()}
    capacity_cluster.submit_mr_sleep_job("b", maps=2, reduces=1, map_ms=500, reduce_ms=500)
    app_id = new_app_id(rm, known)
    wait_finished(rm, app_id)
    job_id = job_id_of(app_id)
    capacity_cluster.wait_for_history_job(job_id, 60)
    with JobHistoryClient(capacity_cluster.jhs_url, SETTINGS) as history:
        assert history.info().hadoop_version.startswith("3.4.")
        listed = history.jobs(queue="root.b", state=JobState.SUCCEEDED, limit=10)
        job = history.job_with_tasks(job_id)
        maps_only = history.tasks(job_id, TaskType.MAP)
    assert job_id in {j.id for j in listed}
    assert (job.state, job.queue, job.maps_total, job.reduces_total) == (
        JobState.SUCCEEDED, "root.b", 2, 1,
    )  # fmt: skip
    assert job.application_id == app_id
    assert job.avg_map_time_ms is not None and job.avg_map_time_ms >= 500
    assert sorted(t.task_type for t in job.tasks) == [TaskType.MAP, TaskType.MAP, TaskType.REDUCE]
    assert {t.id for t in maps_only} == {t.id for t in job.tasks if t.task_type is TaskType.MAP}
    for task in job.tasks:
        assert task.successful_attempt in {a.id for a in task.attempts}
        assert all(a.state == "SUCCEEDED" and a.finish_ms for a in task.attempts)


def test_observe_cluster_builds_a_snapshot(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient
):
    known = {app.id for app in rm.apps()}
    capacity_cluster.submit_mr_sleep_job("a", maps=1, reduces=0, map_ms=200)
    app_id = new_app_id(rm, known)
    wait_finished(rm, app_id)
    capacity_cluster.wait_for_history_job(job_id_of(app_id), 60)
    with JobHistoryClient(capacity_cluster.jhs_url, SETTINGS) as history:
        observation = observe_cluster(rm, history)
    snapshot = observation.snapshot
    assert observation.problems == ()
    assert snapshot.schedulable_resources == NODE
    assert app_id in {app.id for app in snapshot.apps}
    [job] = [j for j in snapshot.jobs if j.id == job_id_of(app_id)]
    assert len(job.tasks) == 1


def test_observe_cluster_reports_an_unreachable_job_history(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient, closed_port_url: str
):
    with JobHistoryClient(closed_port_url, HttpSettings(retries=0)) as history:
        observation = observe_cluster(rm, history)
    assert observation.snapshot.jobs == ()
    assert observation.snapshot.scheduler.kind is SchedulerKind.CAPACITY
    [problem] = observation.problems
    assert "Connection refused" in str(problem)


# --------------------------------------------------------------------------- memory store

RAISE_A = """<sched-conf><update-queue><queue-name>root.a</queue-name><params>
<entry><key>capacity</key><value>50</value></entry></params></update-queue>
<update-queue><queue-name>root.b</queue-name><params>
<entry><key>capacity</key><value>10</value></entry></params></update-queue></sched-conf>"""
BREAK_SUM = """<sched-conf><update-queue><queue-name>root.a</queue-name><params>
<entry><key>capacity</key><value>80</value></entry></params></update-queue></sched-conf>"""


def test_scheduler_conf_read_and_update(
    capacity_memory_cluster: MiniCluster, rm: ResourceManagerClient
):
    before = dict(rm.scheduler_conf())
    assert before["yarn.scheduler.capacity.root.queues"] == "default,a,b"
    assert rm.update_scheduler_conf(RAISE_A) == "Configuration change successfully applied."
    after = dict(rm.scheduler_conf())
    assert after["yarn.scheduler.capacity.root.a.capacity"] == "50"
    capacities = {q.path: round(q.capacity or 0, 3) for q in rm.scheduler().root.children}
    assert capacities == {"root.default": 40.0, "root.a": 50.0, "root.b": 10.0}


def test_a_refused_update_is_a_one_line_http_error(
    capacity_memory_cluster: MiniCluster, rm: ResourceManagerClient
):
    with pytest.raises(YarnHTTPError) as caught:
        rm.update_scheduler_conf(BREAK_SUM)
    assert caught.value.status == 400
    assert "Illegal capacity sum" in caught.value.message
    assert "\n" not in str(caught.value)
    assert dict(rm.scheduler_conf())["yarn.scheduler.capacity.root.a.capacity"] == "30"


def test_validate_scheduler_conf(capacity_memory_cluster: MiniCluster, rm: ResourceManagerClient):
    would_be = dict(rm.validate_scheduler_conf(RAISE_A))
    assert would_be["yarn.scheduler.capacity.root.a.capacity"] == "50"
    assert dict(rm.scheduler_conf())["yarn.scheduler.capacity.root.a.capacity"] == "30"
    with pytest.raises(YarnHTTPError) as caught:
        rm.validate_scheduler_conf(BREAK_SUM)
    assert caught.value.status == 400


def test_scheduler_conf_on_a_file_store_is_refused(
    capacity_cluster: MiniCluster, rm: ResourceManagerClient
):
    with pytest.raises(YarnHTTPError) as caught:
        rm.scheduler_conf()
    assert caught.value.status == 400
    assert "MutableConfScheduler" in caught.value.message


# --------------------------------------------------------------------------- fair


def test_fair_scheduler_queues(fair_cluster: MiniCluster, rm: ResourceManagerClient):
    status = rm.scheduler()
    assert status.kind is SchedulerKind.FAIR
    assert [q.path for q in status.queues()] == ["root", *LEAVES]
    for leaf in status.root.children:
        assert leaf.scheduling_policy == "fair"
        assert leaf.steady_fair_share is not None
        assert leaf.steady_fair_share.memory_mb == pytest.approx(NODE.memory_mb / 3, abs=2)
        assert leaf.max_apps is not None and leaf.max_apps > 0
        assert leaf.used.is_zero
