"""Applications as the RM reports them, and MapReduce jobs/tasks from JobHistory.

Times are epoch milliseconds as YARN reports them; ``None`` where YARN reports 0 or
-1 for "not yet" (a running app's finish time, say).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from yarn_adapt.model.resources import NO_RESOURCES, Resources


class AppState(StrEnum):
    NEW = "NEW"
    NEW_SAVING = "NEW_SAVING"
    SUBMITTED = "SUBMITTED"
    ACCEPTED = "ACCEPTED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    @property
    def is_terminal(self) -> bool:
        return self in (AppState.FINISHED, AppState.FAILED, AppState.KILLED)


class FinalStatus(StrEnum):
    UNDEFINED = "UNDEFINED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    ENDED = "ENDED"


@dataclass(frozen=True)
class Application:
    """``/ws/v1/cluster/apps`` entry. ``submitted_ms`` is YARN's ``startedTime``
    (the moment the RM accepted the submission); ``launched_ms`` is when the AM
    container was launched."""

    id: str
    name: str
    user: str
    queue: str
    state: AppState
    final_status: FinalStatus
    application_type: str
    submitted_ms: int
    launched_ms: int | None = None
    finished_ms: int | None = None
    progress: float = 0.0
    allocated: Resources = NO_RESOURCES
    running_containers: int = 0
    priority: int = 0
    tags: tuple[str, ...] = ()

    @property
    def is_finished(self) -> bool:
        return self.state.is_terminal

    @property
    def latency_ms(self) -> int | None:
        """Submission to finish, once finished."""
        if self.finished_ms is None:
            return None
        return self.finished_ms - self.submitted_ms

    @property
    def wait_ms(self) -> int | None:
        """Submission to AM launch, once launched."""
        if self.launched_ms is None:
            return None
        return self.launched_ms - self.submitted_ms


@dataclass(frozen=True)
class AppAttempt:
    """``/apps/{id}/appattempts`` entry."""

    attempt_id: int
    node_id: str
    container_id: str
    start_ms: int
    state: str


class JobState(StrEnum):
    NEW = "NEW"
    INITED = "INITED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILL_WAIT = "KILL_WAIT"
    KILLED = "KILLED"
    ERROR = "ERROR"


class TaskType(StrEnum):
    MAP = "MAP"
    REDUCE = "REDUCE"


@dataclass(frozen=True)
class TaskAttempt:
    """``/jobs/{job}/tasks/{task}/attempts`` entry."""

    id: str
    task_type: TaskType
    state: str
    start_ms: int | None
    finish_ms: int | None
    elapsed_ms: int
    node_http_address: str = ""
    rack: str = ""
    container_id: str = ""


@dataclass(frozen=True)
class MapReduceTask:
    """``/jobs/{job}/tasks`` entry, with its attempts when they were fetched."""

    id: str
    task_type: TaskType
    state: str
    start_ms: int | None
    finish_ms: int | None
    elapsed_ms: int
    successful_attempt: str = ""
    attempts: tuple[TaskAttempt, ...] = ()


@dataclass(frozen=True)
class MapReduceJob:
    """A MapReduce job from the JobHistory Server (``/ws/v1/history/mapreduce``)."""

    id: str
    name: str
    queue: str
    user: str
    state: JobState
    submit_ms: int
    start_ms: int | None
    finish_ms: int | None
    maps_total: int
    maps_completed: int
    reduces_total: int
    reduces_completed: int
    avg_map_time_ms: int | None = None
    avg_reduce_time_ms: int | None = None
    tasks: tuple[MapReduceTask, ...] = ()
    # JobHistory's avgReduceTime is the reduce phase only; a whole reduce attempt is
    # avgShuffleTime + avgMergeTime + avgReduceTime.
    avg_shuffle_time_ms: int | None = None
    avg_merge_time_ms: int | None = None

    @property
    def latency_ms(self) -> int | None:
        if self.finish_ms is None:
            return None
        return self.finish_ms - self.submit_ms

    @property
    def application_id(self) -> str:
        """The YARN application id this MR job ran as (``job_X_N`` -> ``application_X_N``)."""
        return "application_" + self.id.removeprefix("job_")
