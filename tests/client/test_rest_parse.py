"""The parser against answers recorded from the real mini cluster (tests/fixtures/rm,
tests/fixtures/jhs; see their MANIFEST.json for the request and the cluster state).

The degenerate shapes (null lists, single objects, numbers as strings, unknown
states, missing fields) are made by *transforming a real recording*, so every case
differs from what the RM really sent in exactly the way the test names.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from rest_faults import FIXTURES

from yarn_adapt.errors import YarnMalformedResponse
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
from yarn_adapt.yarn import parse

URL = "http://rm:8088/ws/v1/cluster/x"
Parser = Callable[[object, str], Any]


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def stringify_numbers(value: Any) -> Any:
    """Every JSON number turned into a string, as some proxies and old RMs send them."""
    if isinstance(value, dict):
        return {key: stringify_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [stringify_numbers(item) for item in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


# --------------------------------------------------------------------------- real answers


def test_cluster_info():
    info = parse.parse_cluster_info(load("rm/capacity-info.json"), URL)
    assert (info.ha_state, info.state, info.hadoop_version) == (HAState.ACTIVE, "STARTED", "3.4.3")
    assert info.is_active and info.started_ms > 0


def test_cluster_metrics_match_the_recorded_state():
    # MANIFEST: 2 apps RUNNING, 2 FINISHED, 1 KILLED on one 8192 MB / 8 vcore node.
    metrics = parse.parse_cluster_metrics(load("rm/capacity-metrics.json"), URL)
    assert (metrics.apps_submitted, metrics.apps_running, metrics.apps_completed) == (5, 2, 2)
    assert (metrics.apps_killed, metrics.active_nodes) == (1, 1)
    assert metrics.total == Resources(8192, 8)
    assert metrics.allocated + metrics.available == metrics.total
    assert metrics.containers_allocated > 0


def test_nodes_and_node():
    [node] = parse.parse_nodes(load("rm/capacity-nodes.json"), URL)
    assert (node.state, node.total, node.rack) == (
        NodeState.RUNNING,
        Resources(8192, 8),
        "/default-rack",
    )
    assert node.used.memory_mb > 0 and node.num_containers > 0
    assert node.available == node.total - node.used
    single = parse.parse_node(load("rm/capacity-node.json"), URL)
    assert (single.id, single.total) == (node.id, node.total)


def test_node_resource_update_answer_and_the_node_after_it():
    assert parse.parse_node_resource(load("rm/capacity-node-resource-post.json"), URL) == Resources(
        6144, 6
    )
    after = parse.parse_node(load("rm/capacity-node-after-resource-post.json"), URL)
    assert after.total == Resources(6144, 6)


def test_apps_finished_killed_and_running():
    apps = {app.id: app for app in parse.parse_apps(load("rm/capacity-apps.json"), URL)}
    states = sorted(app.state for app in apps.values())
    assert states == sorted([AppState.FINISHED] * 2 + [AppState.KILLED] + [AppState.RUNNING] * 2)
    for app in apps.values():
        if app.is_finished:
            # the RM reports -1 for a finished app's allocation: parsed as none
            assert app.allocated.is_zero and app.running_containers == 0
            assert app.finished_ms is not None and app.latency_ms is not None and app.latency_ms > 0
        else:
            assert app.finished_ms is None and app.latency_ms is None
            assert app.allocated.memory_mb > 0 and app.final_status is FinalStatus.UNDEFINED
        assert app.launched_ms is not None and app.wait_ms is not None and app.wait_ms >= 0
    killed = next(app for app in apps.values() if app.state is AppState.KILLED)
    assert (killed.final_status, killed.queue) == (FinalStatus.KILLED, "root.a")
    assert {app.application_type for app in apps.values()} == {"MAPREDUCE", "YARN"}


@pytest.mark.parametrize(
    ("name", "state", "final"),
    [
        ("capacity-app-running", AppState.RUNNING, FinalStatus.UNDEFINED),
        ("capacity-app-finished", AppState.FINISHED, FinalStatus.SUCCEEDED),
        ("capacity-app-killed", AppState.KILLED, FinalStatus.KILLED),
    ],
)
def test_single_app(name: str, state: AppState, final: FinalStatus):
    app = parse.parse_app(load(f"rm/{name}.json"), URL)
    assert (app.state, app.final_status) == (state, final)
    assert app.id.startswith("application_")


@pytest.mark.parametrize(
    ("name", "state"),
    [("running", "RUNNING"), ("finished", "FINISHED"), ("killed", "KILLED")],
)
def test_app_attempts(name: str, state: str):
    [attempt] = parse.parse_app_attempts(load(f"rm/capacity-appattempts-{name}.json"), URL)
    assert (attempt.attempt_id, attempt.state) == (1, state)
    assert attempt.container_id.startswith("container_") and attempt.node_id


def test_capacity_scheduler_fields():
    status = parse.parse_scheduler(load("rm/capacity-scheduler.json"), URL)
    assert status.kind is SchedulerKind.CAPACITY
    assert [q.path for q in status.queues()] == ["root", "root.default", "root.a", "root.b"]
    leaves = {q.path: q for q in status.root.children}
    assert {p: q.capacity for p, q in leaves.items()} == {
        "root.default": 40.0, "root.a": 30.0, "root.b": 30.0,
    }  # fmt: skip
    for queue in leaves.values():
        assert (queue.maximum_capacity, queue.absolute_maximum_capacity) == (100.0, 100.0)
        assert (queue.state, queue.ordering_policy, queue.mode) == ("RUNNING", "fifo", "percentage")
        assert (queue.user_limit_factor, queue.minimum_user_limit_percent) == (1.0, 100.0)
        assert queue.maximum_am_resource_percent == pytest.approx(0.5)
        assert queue.weight is None  # -1: not in weight mode
        assert queue.configured_min_resource is None  # 0/0 in percentage mode
        assert queue.is_leaf
    busy = leaves["root.a"]
    assert busy.used.memory_mb > 0 and busy.num_containers > 0 and busy.num_applications == 1
    assert busy.used_capacity is not None and busy.used_capacity > 0
    assert status.root.ordering_policy == "utilization"
    assert status.root.used == sum((q.used for q in leaves.values()), Resources(0, 0))


def test_idle_capacity_scheduler_uses_nothing():
    status = parse.parse_scheduler(load("rm/capacity-scheduler-idle.json"), URL)
    assert all(q.used.is_zero and q.num_applications == 0 for q in status.queues())


def test_capacity_scheduler_after_a_mutation():
    status = parse.parse_scheduler(load("rm/memory-scheduler-after-put.json"), URL)
    capacities = {q.path: q.capacity for q in status.root.children}
    assert capacities == {"root.default": 40.0, "root.a": 50.0, "root.b": 10.0}


def test_fair_scheduler_fields():
    status = parse.parse_scheduler(load("rm/fair-scheduler.json"), URL)
    assert status.kind is SchedulerKind.FAIR
    assert [q.path for q in status.queues()] == ["root", "root.default", "root.a", "root.b"]
    for leaf in status.root.children:
        assert leaf.scheduling_policy == "fair"
        assert leaf.steady_fair_share == Resources(2731, 0)  # 8192 / 3, memory-only policy
        assert leaf.max_resources == Resources(8192, 8)
        assert leaf.capacity is None  # a Capacity Scheduler field
    assert status.root.used == sum((q.used for q in status.root.children), Resources(0, 0))
    assert status.find("root.a").num_active_applications == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "name",
    ["rm/capacity-scheduler.json", "rm/capacity-scheduler-idle.json", "rm/fair-scheduler.json"],
)
def test_the_scheduler_reports_the_rms_minimum_allocation(name: str):
    # the recording cluster sets yarn.scheduler.minimum-allocation-mb to 128
    status = parse.parse_scheduler(load(name), URL)
    assert status.minimum_allocation == Resources(128, 1)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"a": [{"name": "memory-mb", "minimumAllocation": 0}]}, None),
        ({"name": "vcores", "minimumAllocation": 2}, None),
        (
            {
                "x": {"name": "memory-mb", "minimumAllocation": 512},
                "y": [{"name": "vcores", "minimumAllocation": 2}],
            },
            Resources(512, 2),
        ),
        ({"name": "memory-mb", "minimumAllocation": "512"}, Resources(512, 1)),
        ({"name": "memory-mb", "minimumAllocation": "lots"}, None),
        ({"name": "memory-mb", "minimumAllocation": True}, None),
        ({"name": "memory-mb", "minimumAllocation": 256}, Resources(256, 1)),
    ],
)
def test_the_minimum_allocation_is_read_only_from_positive_whole_numbers(
    document: object, expected: Resources | None
):
    assert parse.minimum_allocation(document) == expected


def test_scheduler_conf_before_and_after_a_mutation():
    before = dict(parse.parse_scheduler_conf(load("rm/memory-scheduler-conf.json"), URL))
    after = dict(parse.parse_scheduler_conf(load("rm/memory-scheduler-conf-after-put.json"), URL))
    assert before["yarn.scheduler.capacity.root.queues"] == "default,a,b"
    assert (
        before["yarn.scheduler.capacity.root.a.capacity"],
        after["yarn.scheduler.capacity.root.a.capacity"],
    ) == ("30", "50")


def test_job_history_info_jobs_and_job():
    assert parse.parse_history_info(load("jhs/info.json"), URL).hadoop_version == "3.4.3"
    [summary] = parse.parse_jobs(load("jhs/jobs.json"), URL)
    job = parse.parse_job(load("jhs/job.json"), URL)
    assert (job.id, job.state, job.queue, job.maps_total, job.reduces_total) == (
        summary.id, JobState.SUCCEEDED, "root.b", 2, 1,
    )  # fmt: skip
    assert summary.avg_map_time_ms is None  # not in the summary
    assert job.avg_map_time_ms is not None and job.avg_map_time_ms >= 500
    # the reduce attempt's time is shuffle + merge + reduce (each reported apart)
    reduce_phases = (job.avg_shuffle_time_ms, job.avg_merge_time_ms, job.avg_reduce_time_ms)
    assert None not in reduce_phases and reduce_phases[0] > reduce_phases[2]
    assert job.latency_ms is not None and job.latency_ms > 0
    assert job.application_id.startswith("application_")


def test_tasks_and_attempts():
    tasks = parse.parse_tasks(load("jhs/tasks.json"), URL)
    assert sorted(t.task_type for t in tasks) == [TaskType.MAP, TaskType.MAP, TaskType.REDUCE]
    [reduce_attempt] = parse.parse_task_attempts(load("jhs/attempts-reduce.json"), URL)
    reduce_task = next(t for t in tasks if t.task_type is TaskType.REDUCE)
    assert reduce_task.successful_attempt == reduce_attempt.id
    assert reduce_attempt.container_id.startswith("container_")
    assert reduce_attempt.elapsed_ms == reduce_task.elapsed_ms


# --------------------------------------------------------------------------- tolerated shapes

ALL_RECORDINGS: list[tuple[str, Parser]] = [
    ("rm/capacity-info.json", parse.parse_cluster_info),
    ("rm/capacity-metrics.json", parse.parse_cluster_metrics),
    ("rm/capacity-nodes.json", parse.parse_nodes),
    ("rm/capacity-node.json", parse.parse_node),
    ("rm/capacity-node-resource-post.json", parse.parse_node_resource),
    ("rm/capacity-apps.json", parse.parse_apps),
    ("rm/capacity-app-running.json", parse.parse_app),
    ("rm/capacity-appattempts-running.json", parse.parse_app_attempts),
    ("rm/capacity-scheduler.json", parse.parse_scheduler),
    ("rm/fair-scheduler.json", parse.parse_scheduler),
    ("rm/memory-scheduler-conf.json", parse.parse_scheduler_conf),
    ("jhs/info.json", parse.parse_history_info),
    ("jhs/jobs.json", parse.parse_jobs),
    ("jhs/job.json", parse.parse_job),
    ("jhs/tasks.json", parse.parse_tasks),
    ("jhs/attempts-reduce.json", parse.parse_task_attempts),
]


@pytest.mark.parametrize(("name", "parser"), ALL_RECORDINGS)
def test_numbers_sent_as_strings_parse_the_same(name: str, parser: Parser):
    document = load(name)
    assert parser(stringify_numbers(document), URL) == parser(document, URL)


LISTS: list[tuple[str, Parser, str, str]] = [
    ("rm/capacity-apps.json", parse.parse_apps, "apps", "app"),
    ("rm/capacity-nodes.json", parse.parse_nodes, "nodes", "node"),
    ("rm/capacity-appattempts-running.json", parse.parse_app_attempts, "appAttempts", "appAttempt"),
    ("jhs/jobs.json", parse.parse_jobs, "jobs", "job"),
    ("jhs/tasks.json", parse.parse_tasks, "tasks", "task"),
    ("jhs/attempts-reduce.json", parse.parse_task_attempts, "taskAttempts", "taskAttempt"),
]


@pytest.mark.parametrize(("name", "parser", "outer", "inner"), LISTS)
def test_a_single_object_instead_of_a_list(name: str, parser: Parser, outer: str, inner: str):
    document = load(name)
    first = document[outer][inner][0]
    document[outer][inner] = first
    assert parser(document, URL) == parser({outer: {inner: [first]}}, URL)
    assert len(parser(document, URL)) == 1


@pytest.mark.parametrize(("name", "parser", "outer", "inner"), LISTS)
@pytest.mark.parametrize("empty", [None, {}, [], {"x": None}, "inner-null"])
def test_empty_lists_in_every_form(name: str, parser: Parser, outer: str, inner: str, empty: Any):
    document = load(name)
    document[outer] = {inner: None} if empty == "inner-null" else empty
    assert parser(document, URL) == ()


def test_capacity_queues_without_queue_path_get_it_from_their_parents():
    """Older RMs (3.3 and before) report only ``queueName``."""
    document = load("rm/capacity-scheduler.json")

    def drop_paths(queue: dict[str, Any]) -> None:
        queue.pop("queuePath", None)
        for child in (queue.get("queues") or {}).get("queue", []):
            drop_paths(child)

    drop_paths(document["scheduler"]["schedulerInfo"])
    assert parse.parse_scheduler(document, URL) == parse.parse_scheduler(
        load("rm/capacity-scheduler.json"), URL
    )


def test_scheduler_conf_wrapped_in_configuration():
    document = load("rm/memory-scheduler-conf.json")
    wrapped = {"configuration": document}
    assert parse.parse_scheduler_conf(wrapped, URL) == parse.parse_scheduler_conf(document, URL)


@pytest.mark.parametrize("value", [0, -1, None])
def test_times_that_mean_not_yet(value: Any):
    document = load("rm/capacity-app-finished.json")
    document["app"]["finishedTime"] = value
    document["app"]["launchTime"] = value
    app = parse.parse_app(document, URL)
    assert (app.finished_ms, app.launched_ms, app.latency_ms) == (None, None, None)


# --------------------------------------------------------------------------- unknown states


def _with(name: str, where: Callable[[Any], dict[str, Any]], **changes: Any) -> Any:
    document = load(name)
    where(document).update(changes)
    return document


def test_unknown_node_state_is_not_schedulable(caplog: pytest.LogCaptureFixture):
    document = _with("rm/capacity-node.json", lambda d: d["node"], state="MAINTENANCE")
    with caplog.at_level(logging.WARNING):
        node = parse.parse_node(document, URL)
    assert node.state is NodeState.UNHEALTHY and not node.is_schedulable
    assert "unknown NodeState 'MAINTENANCE' treated as UNHEALTHY" in caplog.text


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("capacity-app-finished", AppState.FINISHED),  # has a finish time
        ("capacity-app-running", AppState.RUNNING),  # holds containers
    ],
)
def test_unknown_app_state_maps_to_a_safe_state(name: str, expected: AppState):
    document = _with(f"rm/{name}.json", lambda d: d["app"], state="PAUSED", finalStatus="LATER")
    app = parse.parse_app(document, URL)
    assert (app.state, app.final_status) == (expected, FinalStatus.UNDEFINED)


def test_unknown_app_state_without_containers_is_waiting():
    document = _with(
        "rm/capacity-app-running.json", lambda d: d["app"], state="PAUSED", runningContainers=0
    )
    assert parse.parse_app(document, URL).state is AppState.ACCEPTED


def test_unknown_ha_state_is_never_active():
    document = _with("rm/capacity-info.json", lambda d: d["clusterInfo"], haState="OBSERVER")
    assert parse.parse_cluster_info(document, URL).ha_state is HAState.INITIALIZING


def test_unknown_job_state_of_a_finished_job_is_an_error():
    document = _with("jhs/job.json", lambda d: d["job"], state="ARCHIVED")
    assert parse.parse_job(document, URL).state is JobState.ERROR


def test_lower_case_states_are_understood():
    document = _with("rm/capacity-app-running.json", lambda d: d["app"], state="running")
    assert parse.parse_app(document, URL).state is AppState.RUNNING


# --------------------------------------------------------------------------- refused shapes


def _first_app(document: Any) -> dict[str, Any]:
    app: dict[str, Any] = document["apps"]["app"][2]
    return app


BROKEN_APPS: list[tuple[Callable[[Any], object], str]] = [
    (lambda d: _first_app(d).pop("id"), "apps.app[2].id: missing"),
    (lambda d: _first_app(d).update(id=""), "apps.app[2].id: missing"),
    (
        lambda d: _first_app(d).update(allocatedMB="lots"),
        "apps.app[2].allocatedMB: expected a number, got 'lots'",
    ),
    (
        lambda d: _first_app(d).update(progress=True),
        "apps.app[2].progress: expected a number, got True",
    ),
    (
        lambda d: _first_app(d).update(startedTime="NaN"),
        "apps.app[2].startedTime: expected a number, got NaN",
    ),
    (lambda d: d["apps"].update(app=5), "apps.app: expected a list"),
    (lambda d: d["apps"]["app"].append("x"), "apps.app[5]: expected an object"),
    (lambda d: d.update(apps="none"), "apps: expected an object or a list"),
]


@pytest.mark.parametrize(("mutate", "problem"), BROKEN_APPS)
def test_broken_apps_name_the_url_and_the_field(mutate: Callable[[Any], object], problem: str):
    document = load("rm/capacity-apps.json")
    mutate(document)
    with pytest.raises(YarnMalformedResponse) as caught:
        parse.parse_apps(document, URL)
    assert str(caught.value) == f"{URL}: malformed response: {problem}"


@pytest.mark.parametrize(
    ("document", "parser", "problem"),
    [
        ([], parse.parse_apps, "expected a JSON object, got list"),
        ({}, parse.parse_cluster_info, "clusterInfo: missing"),
        ({"clusterInfo": 3}, parse.parse_cluster_info, "clusterInfo: expected an object"),
        ({"node": {"state": "RUNNING"}}, parse.parse_node, "node.id: missing"),
        (
            {"resourceInfo": {}},
            parse.parse_node_resource,
            "resourceInfo: expected memory and vCores",
        ),
    ],
)
def test_wrong_shapes(document: Any, parser: Parser, problem: str):
    with pytest.raises(YarnMalformedResponse, match=problem):
        parser(document, URL)


def test_unsupported_scheduler_type_is_named():
    document = load("rm/capacity-scheduler.json")
    document["scheduler"]["schedulerInfo"]["type"] = "fifoScheduler"
    with pytest.raises(
        YarnMalformedResponse, match=r"schedulerInfo.type: unsupported scheduler 'fifoScheduler'"
    ):
        parse.parse_scheduler(document, URL)


def test_unknown_task_type_is_refused():
    document = load("jhs/tasks.json")
    document["tasks"]["task"][1]["type"] = "SETUP"
    with pytest.raises(
        YarnMalformedResponse, match=r"tasks.task\[1\].type: unknown task type 'SETUP'"
    ):
        parse.parse_tasks(document, URL)


def test_the_recordings_are_not_changed_by_the_tests():
    """Guard for the helpers above: every test works on its own copy."""
    first = load("rm/capacity-apps.json")
    copy.deepcopy(first)["apps"]["app"].clear()
    assert load("rm/capacity-apps.json") == first
