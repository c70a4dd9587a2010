"""observe_cluster over local servers replaying answers recorded from the real cluster,
so the JobHistory Server can be made to fail at a chosen step (the live test covers the
real cluster and an unreachable JobHistory)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_faults import Answer, ScriptedServer, recorded, replayed

from yarn_adapt.errors import YarnHTTPError
from yarn_adapt.yarn.history import JobHistoryClient
from yarn_adapt.yarn.http import INFO_PATH, HttpSettings
from yarn_adapt.yarn.observe import observe_cluster
from yarn_adapt.yarn.rm import ResourceManagerClient

ServerFactory = Callable[[], ScriptedServer]
NOW_MS = 1795312240000
WINDOW_MS = 60_000
JOB = "job_1795312196869_0001"
JOBS = "/ws/v1/history/mapreduce/jobs"


def _rm_server(fault_server: ServerFactory) -> ScriptedServer:
    server = fault_server().on("GET", INFO_PATH, replayed("active-info"))
    for path, name in [
        ("metrics", "capacity-metrics"),
        ("scheduler", "capacity-scheduler"),
        ("nodes", "capacity-nodes"),
        ("apps", "capacity-apps"),
    ]:
        server.on("GET", f"/ws/v1/cluster/{path}", Answer(200, recorded(f"rm/{name}.json")))
    return server


def _history_server(fault_server: ServerFactory, tasks: Answer | None = None) -> ScriptedServer:
    server = fault_server().on("GET", JOBS, Answer(200, recorded("jhs/jobs.json")))
    server.on("GET", f"{JOBS}/{JOB}", Answer(200, recorded("jhs/job.json")))
    return server.on("GET", f"{JOBS}/{JOB}/tasks", tasks or Answer(200, recorded("jhs/tasks.json")))


def _observe(rm_server: ScriptedServer, history_server: ScriptedServer, settings: HttpSettings):
    with (
        ResourceManagerClient(rm_server.url, settings) as rm,
        JobHistoryClient(history_server.url, settings) as history,
    ):
        return observe_cluster(rm, history, app_window_ms=WINDOW_MS, now_ms=lambda: NOW_MS)


def test_a_full_observation(fault_server: ServerFactory, fast_settings: HttpSettings):
    rm_server, history_server = _rm_server(fault_server), _history_server(fault_server)
    observation = _observe(rm_server, history_server, fast_settings)
    snapshot = observation.snapshot
    assert observation.problems == ()
    assert snapshot.taken_ms == NOW_MS
    assert len(snapshot.apps) == 5  # both /apps calls answered the same five: no duplicates
    assert [a.submitted_ms for a in snapshot.apps] == sorted(a.submitted_ms for a in snapshot.apps)
    [job] = snapshot.jobs
    assert (job.id, len(job.tasks), job.avg_map_time_ms) == (JOB, 3, 2972)
    app_queries = [s.query for s in rm_server.seen if s.path == "/ws/v1/cluster/apps"]
    assert app_queries[0]["states"] == ["NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"]
    assert app_queries[1]["states"] == ["FINISHED,FAILED,KILLED"]
    assert app_queries[1]["finishedTimeBegin"] == [str(NOW_MS - WINDOW_MS)]
    [jobs_query] = [s.query for s in history_server.seen if s.path == JOBS]
    assert jobs_query["finishedTimeBegin"] == [str(NOW_MS - WINDOW_MS)]


def test_a_failing_job_history_leaves_jobs_empty_and_says_why(
    fault_server: ServerFactory, fast_settings: HttpSettings
):
    broken = Answer(500, '{"RemoteException":{"message":"history store unreadable"}}')
    rm_server = _rm_server(fault_server)
    history_server = _history_server(fault_server, tasks=broken)
    observation = _observe(rm_server, history_server, fast_settings)
    assert observation.snapshot.jobs == ()
    assert len(observation.snapshot.apps) == 5 and observation.snapshot.nodes
    [problem] = observation.problems
    assert isinstance(problem, YarnHTTPError)
    assert "history store unreadable" in str(problem)


def test_a_failing_rm_fails_the_observation(
    fault_server: ServerFactory, fast_settings: HttpSettings
):
    rm_server = _rm_server(fault_server)
    rm_server.on("GET", "/ws/v1/cluster/scheduler", Answer(500, "scheduler busy"))
    with pytest.raises(YarnHTTPError, match="scheduler busy"):
        _observe(rm_server, _history_server(fault_server), fast_settings)
