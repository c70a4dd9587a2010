"""One observation pass: RM (+ JobHistory) -> :class:`ClusterSnapshot`.

The RM is required: any RM error propagates, because a snapshot without the
scheduler or the nodes would mislead the decision code. The JobHistory Server is
optional: when it fails, the snapshot is still built with ``jobs=()`` and the error
is returned in :attr:`Observation.problems` for the caller to report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from yarn_adapt.errors import YarnError
from yarn_adapt.model import Application, AppState, ClusterSnapshot, MapReduceJob, Node
from yarn_adapt.yarn.history import JobHistoryClient
from yarn_adapt.yarn.rm import ResourceManagerClient

log = logging.getLogger(__name__)

UNFINISHED_STATES = (
    AppState.NEW,
    AppState.NEW_SAVING,
    AppState.SUBMITTED,
    AppState.ACCEPTED,
    AppState.RUNNING,
)
FINISHED_STATES = (AppState.FINISHED, AppState.FAILED, AppState.KILLED)
DEFAULT_APP_WINDOW_MS = 15 * 60 * 1000
DEFAULT_JOB_LIMIT = 50


@dataclass(frozen=True)
class Observation:
    """A snapshot and what could not be observed (empty when everything worked)."""

    snapshot: ClusterSnapshot
    problems: tuple[YarnError, ...] = ()


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def observe_cluster(
    rm: ResourceManagerClient,
    history: JobHistoryClient | None = None,
    *,
    app_window_ms: int = DEFAULT_APP_WINDOW_MS,
    job_limit: int = DEFAULT_JOB_LIMIT,
    task_attempts: bool = False,
    now_ms: Callable[[], int] = _wall_clock_ms,
    nodes: Callable[[], tuple[Node, ...]] | None = None,
) -> Observation:
    """Read cluster info, metrics, scheduler, nodes, unfinished apps plus apps that
    finished within ``app_window_ms``, and (with ``history``) up to ``job_limit``
    MapReduce jobs that finished in the same window, with their tasks. ``nodes``
    replaces ``rm.nodes`` (a cache the caller shares)."""
    taken_ms = now_ms()
    since_ms = taken_ms - app_window_ms
    snapshot = ClusterSnapshot(
        taken_ms=taken_ms,
        info=rm.cluster_info(),
        metrics=rm.cluster_metrics(),
        scheduler=rm.scheduler(),
        nodes=(nodes or rm.nodes)(),
        apps=_recent_apps(rm, since_ms),
    )
    jobs, problems = _recent_jobs(history, since_ms, job_limit, task_attempts)
    return Observation(replace(snapshot, jobs=jobs), problems)


def _recent_apps(rm: ResourceManagerClient, since_ms: int) -> tuple[Application, ...]:
    unfinished = rm.apps(states=UNFINISHED_STATES)
    finished = rm.apps(states=FINISHED_STATES, finished_after_ms=since_ms)
    by_id = {app.id: app for app in (*unfinished, *finished)}
    return tuple(sorted(by_id.values(), key=lambda app: (app.submitted_ms, app.id)))


def _recent_jobs(
    history: JobHistoryClient | None, since_ms: int, limit: int, attempts: bool
) -> tuple[tuple[MapReduceJob, ...], tuple[YarnError, ...]]:
    """All or nothing: a half-read job list would bias the latency statistics."""
    if history is None:
        return (), ()
    try:
        summaries = history.jobs(finished_after_ms=since_ms, limit=limit)
        return tuple(history.job_with_tasks(j.id, attempts=attempts) for j in summaries), ()
    except YarnError as error:
        log.warning("JobHistory not observed: %s", error.one_line())
        return (), (error,)
