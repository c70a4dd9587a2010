"""Workloads: trace loaders into the one JobSpec/TaskSpec model, and the task
execution-time model.

Loaders (each ``load_X(path, *, lenient=False, ...) -> Workload``; malformed rows
raise :class:`~yarn_adapt.errors.TraceError` naming ``file:line``, or with
``lenient=True`` are skipped, counted in ``Workload.skipped_rows`` and logged):

* :func:`load_swim` — SWIM Facebook TSV (FB-2009, FB-2010)
* :func:`load_google` — Google cluster trace 2011 job_events + task_events
* :func:`load_sls`, :func:`load_rumen` — YARN SLS JSON and Rumen job traces
* :func:`workload_from_history` — MapReduce jobs from the JobHistory Server
* :func:`load_trace` — any of the file formats, detected from name and content

The task-time model is :mod:`.taskmodel` (features: :mod:`.taskhistory`); a live
cluster's model learned from JobHistory as jobs finish: :mod:`.history_model`.

Queues are short leaf names chosen by a :class:`QueueMapping` of priority ranges
(SWIM, Google) or taken from the trace's leaf queue (SLS, Rumen, JobHistory).
"""

from typing import TYPE_CHECKING

from yarn_adapt.errors import TaskTimeModelError
from yarn_adapt.workload.google import GoogleResourceMapping, group_by_application, load_google
from yarn_adapt.workload.jobhistory import workload_from_history
from yarn_adapt.workload.queues import (
    BEST_EFFORT_PRIORITIES,
    PriorityRange,
    QueueMapping,
    assign_queues,
    leaf_queue_name,
    random_priorities,
)
from yarn_adapt.workload.sls import load_rumen, load_sls
from yarn_adapt.workload.sniff import FORMATS, detect_format, load_trace
from yarn_adapt.workload.summary import WorkloadSummary, summarize
from yarn_adapt.workload.swim import (
    SWIM_MIN_INPUT_BYTES,
    SwimDurationModel,
    SwimReplaySettings,
    SwimShape,
    load_swim,
    sequence_file_payload,
    swim_shape,
)

if TYPE_CHECKING:
    from yarn_adapt.workload.taskmodel import (
        GRADIENT_BOOSTING,
        MEDIAN_FALLBACK,
        HeldOutReport,
        TaskTimeErrors,
        TaskTimeModel,
        fit_task_time_model,
        held_out_report,
        load_task_time_model,
        save_task_time_model,
        split_by_job,
        task_time_errors,
        with_estimated_durations,
    )

# The task-time model needs scikit-learn (a second to import): loaded on first use,
# so reading a trace or starting the CLI does not pay for it.
_TASK_MODEL_NAMES = frozenset(
    {
        "GRADIENT_BOOSTING",
        "MEDIAN_FALLBACK",
        "HeldOutReport",
        "TaskTimeErrors",
        "TaskTimeModel",
        "fit_task_time_model",
        "held_out_report",
        "load_task_time_model",
        "save_task_time_model",
        "split_by_job",
        "task_time_errors",
        "with_estimated_durations",
    }
)


def __getattr__(name: str) -> object:
    if name in _TASK_MODEL_NAMES:
        from yarn_adapt.workload import taskmodel

        return getattr(taskmodel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BEST_EFFORT_PRIORITIES",
    "FORMATS",
    "GRADIENT_BOOSTING",
    "MEDIAN_FALLBACK",
    "SWIM_MIN_INPUT_BYTES",
    "GoogleResourceMapping",
    "HeldOutReport",
    "PriorityRange",
    "QueueMapping",
    "SwimDurationModel",
    "SwimReplaySettings",
    "SwimShape",
    "TaskTimeErrors",
    "TaskTimeModel",
    "TaskTimeModelError",
    "WorkloadSummary",
    "assign_queues",
    "detect_format",
    "fit_task_time_model",
    "group_by_application",
    "held_out_report",
    "leaf_queue_name",
    "load_google",
    "load_rumen",
    "load_sls",
    "load_swim",
    "load_task_time_model",
    "load_trace",
    "random_priorities",
    "save_task_time_model",
    "sequence_file_payload",
    "split_by_job",
    "summarize",
    "swim_shape",
    "task_time_errors",
    "with_estimated_durations",
    "workload_from_history",
]
