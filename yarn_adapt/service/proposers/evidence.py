"""The evidence behind a proposal (pure): which jobs triggered each group, and when to
warn that the prediction rests on little or on a record of misses.

* **Jobs.** The tuner re-tunes a group when one of its leaves had a job submitted in
  the tuning interval that still needs resources (AdaptiveConfig §3.1); those jobs
  are the evidence, by id (the page links a YARN application id to the RM's app page
  and its MapReduce job to JobHistory). At most :data:`EVIDENCE_JOBS` are kept, the
  newest; the page says how many there were.
* **Range.** How sure a prediction is comes from :mod:`yarn_adapt.service.proposers.intervals`
  (calibrated on the predictions already checked on their jobs).
* **Warnings.** Thin evidence: fewer than :data:`THIN_JOBS` jobs, or task times from
  the median fallback. Past misses: an earlier proposal for the same group whose
  prediction, checked on its own jobs once they all finished
  (:class:`~yarn_adapt.service.state.records.PredictionError`, the one definition of
  realised), was off by more than :data:`MISS_RATIO` of what they realised.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from yarn_adapt.durations import duration
from yarn_adapt.model import ClusterSnapshot, SchedulerConfig
from yarn_adapt.model.apps import Application
from yarn_adapt.service.proposers.realized import group_of_queue
from yarn_adapt.service.state.records import GroupPrediction, PredictionError
from yarn_adapt.sim import JobInProgress

EVIDENCE_JOBS = 20
"""At most this many job ids are kept per group."""
THIN_JOBS = 3
MISS_RATIO = 0.25
MEDIAN_FALLBACK = "median-per-kind"


def jobs_by_group(
    jobs: Iterable[tuple[str, str, float]], config: SchedulerConfig, since: float
) -> dict[str, tuple[str, ...]]:
    """``jobs`` as (id, queue, submitted); the ids submitted after ``since``, per
    group, newest first, at most :data:`EVIDENCE_JOBS` each."""
    found: dict[str, list[tuple[float, str]]] = {}
    for job_id, queue, submitted in jobs:
        if submitted <= since:
            continue
        group = group_of_queue(queue, config)
        if group is not None:
            found.setdefault(group, []).append((submitted, job_id))
    return {
        group: tuple(job_id for _, job_id in sorted(items, reverse=True)[:EVIDENCE_JOBS])
        for group, items in found.items()
    }


def simulated_jobs(jobs: Iterable[JobInProgress]) -> list[tuple[str, str, float]]:
    return [(p.job.id, p.job.queue, p.job.submit_s) for p in jobs]


def snapshot_jobs(snapshot: ClusterSnapshot) -> list[tuple[str, str, float]]:
    """The applications still needing resources, submit times in seconds."""
    return [(a.id, a.queue, a.submitted_ms / 1000.0) for a in snapshot.apps if _waiting(a)]


def _waiting(app: Application) -> bool:
    return not app.is_finished


def with_evidence(
    groups: Sequence[GroupPrediction], jobs: dict[str, tuple[str, ...]], estimator: str
) -> tuple[GroupPrediction, ...]:
    """Each prediction with the jobs that triggered its group and the task-time
    estimator behind it."""
    return tuple(
        replace(group, job_ids=jobs.get(group.group, ()), estimator=estimator) for group in groups
    )


def jobs_words(group: GroupPrediction) -> str:
    """How many jobs the prediction rests on and how many of them are listed."""
    listed = len(group.job_ids)
    if listed >= group.jobs:
        return f"{group.jobs} job(s)"
    return f"{group.jobs} job(s), the newest {listed} that triggered it listed"


# --------------------------------------------------------------------------- warnings


def past_misses(
    group: str, checked: Iterable[PredictionError], before_proposal: int
) -> list[PredictionError]:
    """Earlier proposals' predictions for ``group`` that missed, checked on their jobs."""
    return [
        c
        for c in checked
        if c.group == group and c.proposal_id < before_proposal and c.error > MISS_RATIO
    ]


def warnings_for(
    group: GroupPrediction, checked: Iterable[PredictionError], proposal_id: int
) -> list[str]:
    """Short warnings for the page: thin evidence and past misses."""
    found = []
    if group.jobs < THIN_JOBS:
        found.append(
            f"thin evidence: the prediction rests on {group.jobs} job(s) (fewer than {THIN_JOBS})"
        )
    if group.estimator == MEDIAN_FALLBACK:
        found.append("thin evidence: task times are medians per kind (too little history to learn)")
    misses = past_misses(group.group, checked, proposal_id)
    if misses:
        worst = max(misses, key=lambda m: m.error)
        found.append(
            f"past predictions for {group.group} missed {len(misses)} time(s): proposal "
            f"{worst.proposal_id} predicted {duration(worst.predicted_s)} for its "
            f"{worst.jobs} jobs, which realised {duration(worst.realised_s)} "
            f"(off by {worst.error:.0%})"
        )
    return found
