"""MapReduce task progress over HTTP: :class:`~preemption.yarnedge.YarnEdge` asks the AM
through the RM's web proxy and, where the AM has no running attempt for the container
(gone, or the attempt ended), JobHistory. A local HTTP server (conftest's ``serve``)
replays answers recorded from Hadoop 3.4.3 (tests/fixtures/rm, tests/fixtures/jhs: one
finished SleepJob); the only hand-made answers are the faults (a 404 from a proxy
whose AM is gone, a closed port)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from preemption.model import Locality
from preemption.yarnedge import YarnEdge
from yarn_adapt.yarn.http import HttpSettings

from .conftest import Replay

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
APP = "application_1795312196869_0001"
JOB = "job_1795312196869_0001"
MAP_0 = "container_1795312196869_0001_01_000002"
REDUCE = "container_1795312196869_0001_01_000004"
UNKNOWN = "container_1795312196869_0001_01_000009"
FAST = HttpSettings(connect_timeout_s=2.0, read_timeout_s=5.0, retries=0)


def _recorded_jhs() -> dict[str, str]:
    """Request path → recorded body, as the manifest lists them."""
    manifest = json.loads((FIXTURES / "jhs" / "MANIFEST.json").read_text())
    routes = {}
    for name, entry in manifest["files"].items():
        _, path = entry["request"].split(" ", 1)
        routes[path] = (FIXTURES / "jhs" / name).read_text()
    return routes


def _rm_info() -> dict[str, str]:
    return {"/ws/v1/cluster/info": (FIXTURES / "rm" / "capacity-info.json").read_text()}


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def test_the_am_is_asked_through_the_rm_proxy_and_a_finished_attempt_comes_from_jobhistory(
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
) -> None:
    # The AM's REST answers share JobHistory's DAOs (JobsInfo, TasksInfo): the
    # recorded job replayed at the proxy stands for an AM whose tasks all ended.
    history = _recorded_jhs()
    proxied = {
        f"/proxy/{APP}/ws/v1/mapreduce{path.removeprefix('/ws/v1/history/mapreduce')}": body
        for path, body in history.items()
        if path.startswith("/ws/v1/history/mapreduce/jobs")
    }
    rm, at_rm = serve(_rm_info() | proxied)
    jhs, at_jhs = serve(history)
    edge = YarnEdge([rm], FAST, jobhistory=jhs)
    try:
        assert edge.task_progress(APP, MAP_0) == pytest.approx(1.0)
        assert f"/proxy/{APP}/ws/v1/mapreduce/jobs" in at_rm.asked
        assert f"/proxy/{APP}/ws/v1/mapreduce/jobs/{JOB}/tasks" in at_rm.asked
        # No task is RUNNING at the AM: its attempts are not asked for there.
        assert not [p for p in at_rm.asked if p.endswith("/attempts")]
        assert f"/ws/v1/history/mapreduce/jobs/{JOB}/tasks" in at_jhs.asked
        assert edge.task_progress(APP, REDUCE) == pytest.approx(1.0)
        assert edge.locality(REDUCE) is Locality.NON_LOCAL  # a reduce reads every node
        asked = (len(at_rm.asked), len(at_jhs.asked))
        assert edge.task_progress(APP, MAP_0) == pytest.approx(1.0)
        assert (len(at_rm.asked), len(at_jhs.asked)) == asked  # final: remembered
        assert edge.task_progress(APP, UNKNOWN) is None  # in neither
    finally:
        edge.close()


def test_an_am_that_is_gone_leaves_jobhistory_or_else_unknown_progress_never_a_crash(
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
) -> None:
    rm, at_rm = serve(_rm_info())  # the proxy answers 404: the AM is gone
    jhs, _ = serve(_recorded_jhs())
    edge = YarnEdge([rm], FAST, jobhistory=jhs)
    try:
        assert edge.task_progress(APP, MAP_0) == pytest.approx(1.0)
        assert at_rm.asked[-1] == f"/proxy/{APP}/ws/v1/mapreduce/jobs"
    finally:
        edge.close()
    without_history = YarnEdge([rm], FAST)
    try:
        assert without_history.task_progress(APP, MAP_0) is None
    finally:
        without_history.close()
    refused = YarnEdge([_closed_port()], FAST, jobhistory=_closed_port())
    try:
        assert refused.task_progress(APP, MAP_0) is None  # RM and JobHistory down
    finally:
        refused.close()


def _recorded_am() -> tuple[str, dict[str, str]]:
    """The running SleepJob's AM answers (tests/fixtures/record_am.py) by path."""
    manifest = json.loads((FIXTURES / "am" / "MANIFEST.json").read_text())
    routes = {}
    for name, entry in manifest["files"].items():
        _, path = entry["request"].split(" ", 1)
        routes[path] = (FIXTURES / "am" / name).read_text()
    jobs = json.loads((FIXTURES / "am" / "jobs.json").read_text())
    job = jobs["jobs"]["job"][0]["id"]
    return "application_" + job.removeprefix("job_"), routes


def test_a_running_attempt_is_found_at_the_am_and_then_asked_directly(
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
) -> None:
    app, routes = _recorded_am()
    attempt = json.loads((FIXTURES / "am" / "attempt-map-0.json").read_text())["taskAttempt"]
    container, attempt_id = attempt["assignedContainerId"], attempt["id"]
    job = "job_" + app.removeprefix("application_")
    task = "task_" + attempt_id.removeprefix("attempt_").rsplit("_", 1)[0]
    at_job = f"/proxy/{app}/ws/v1/mapreduce/jobs/{job}"
    rm, at_rm = serve(_rm_info() | routes)
    edge = YarnEdge([rm], FAST)
    try:
        # the AM reports percent (13.34 while the map sleeps); the agent reads 0-1
        assert edge.task_progress(app, container) == pytest.approx(attempt["progress"] / 100)
        assert f"{at_job}/tasks/{task}/attempts" in at_rm.asked
        asked = len(at_rm.asked)
        assert edge.task_progress(app, container) == pytest.approx(attempt["progress"] / 100)
        # the attempt's place is remembered: one request, the attempt itself
        assert at_rm.asked[asked:] == [f"{at_job}/tasks/{task}/attempts/{attempt_id}"]
        assert edge.locality(container) is not Locality.NON_LOCAL  # a map
        # a container the AM runs no attempt in: unknown, without JobHistory
        assert edge.task_progress(app, container.replace("_000002", "_000009")) is None
    finally:
        edge.close()
