"""MapReduce JobHistory Server REST client (``/ws/v1/history``), typed.

Job ids are MapReduce ids (``job_<clusterTimestamp>_<seq>``), not application ids.
The JobHistory Server is a single address (it has no HA); it never redirects, so a
redirect is reported as an error rather than followed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar
from urllib.parse import quote

from yarn_adapt.errors import SettingsError, YarnHTTPError
from yarn_adapt.model import (
    HistoryServerInfo,
    JobState,
    MapReduceJob,
    MapReduceTask,
    TaskAttempt,
    TaskType,
)
from yarn_adapt.yarn import parse
from yarn_adapt.yarn.http import DEFAULT_HTTP_SETTINGS, HttpReply, HttpSettings, Params, Transport

T = TypeVar("T")
HISTORY = "/ws/v1/history"
MAPREDUCE = HISTORY + "/mapreduce"
_TASK_TYPE_PARAM = {TaskType.MAP: "m", TaskType.REDUCE: "r"}


class JobHistoryClient:
    """Typed access to one JobHistory Server web address (``http://host:19888``)."""

    def __init__(
        self,
        address: str,
        settings: HttpSettings = DEFAULT_HTTP_SETTINGS,
        *,
        transport: Transport | None = None,
    ) -> None:
        if not address.startswith(("http://", "https://")):
            raise SettingsError(f"JobHistory address {address!r}: expected http(s)://host:port")
        self.base_url = address.rstrip("/")
        self._owns_transport = transport is None
        self._transport = transport or Transport(settings)

    def close(self) -> None:
        if self._owns_transport:
            self._transport.close()

    def __enter__(self) -> JobHistoryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _get(
        self, path: str, parser: Callable[[object, str], T], params: Params | None = None
    ) -> T:
        reply = self._transport.request("GET", self.base_url + path, params=params)
        _refuse_redirect(reply)
        return parser(reply.json(), reply.url)

    def info(self) -> HistoryServerInfo:
        """``/info``: start time and version."""
        return self._get(HISTORY + "/info", parse.parse_history_info)

    def jobs(
        self,
        *,
        queue: str | None = None,
        state: JobState | str | None = None,
        user: str | None = None,
        limit: int | None = None,
        started_after_ms: int | None = None,
        started_before_ms: int | None = None,
        finished_after_ms: int | None = None,
        finished_before_ms: int | None = None,
    ) -> tuple[MapReduceJob, ...]:
        """``/mapreduce/jobs``: the summary fields only (no averages, no tasks)."""
        filters = {
            "queue": queue,
            "state": state,
            "user": user,
            "limit": limit,
            "startedTimeBegin": started_after_ms,
            "startedTimeEnd": started_before_ms,
            "finishedTimeBegin": finished_after_ms,
            "finishedTimeEnd": finished_before_ms,
        }
        params = {key: value for key, value in filters.items() if value is not None}
        return self._get(MAPREDUCE + "/jobs", parse.parse_jobs, params)

    def job(self, job_id: str) -> MapReduceJob:
        """``/mapreduce/jobs/{id}``: the full job, with average task times."""
        return self._get(f"{MAPREDUCE}/jobs/{quote(job_id)}", parse.parse_job)

    def tasks(self, job_id: str, task_type: TaskType | None = None) -> tuple[MapReduceTask, ...]:
        """``/mapreduce/jobs/{id}/tasks``, optionally only maps or only reduces."""
        params = {"type": _TASK_TYPE_PARAM[task_type]} if task_type else None
        return self._get(f"{MAPREDUCE}/jobs/{quote(job_id)}/tasks", parse.parse_tasks, params)

    def task_attempts(self, job_id: str, task_id: str) -> tuple[TaskAttempt, ...]:
        """``/mapreduce/jobs/{id}/tasks/{task}/attempts``."""
        path = f"{MAPREDUCE}/jobs/{quote(job_id)}/tasks/{quote(task_id)}/attempts"
        return self._get(path, parse.parse_task_attempts)

    def job_with_tasks(self, job_id: str, *, attempts: bool = True) -> MapReduceJob:
        """The full job with its tasks, and each task's attempts when ``attempts``
        (one request per task: use it for recent jobs, not whole histories)."""
        tasks = self.tasks(job_id)
        if attempts:
            tasks = tuple(replace(t, attempts=self.task_attempts(job_id, t.id)) for t in tasks)
        return replace(self.job(job_id), tasks=tasks)


def _refuse_redirect(reply: HttpReply) -> None:
    if reply.is_redirect:
        message = f"unexpected redirect to {reply.location or '(no location)'}"
        raise YarnHTTPError(reply.method, reply.url, reply.status, message)
