"""The evidence behind a proposal (pure): which jobs triggered each group, how sure
the prediction is, and when to warn that it rests on little or on a record of misses.

* **Jobs.** The tuner re-tunes a group when one of its leaves had a job submitted in
  the tuning interval that still needs resources (AdaptiveConfig §3.1); those jobs
  are the evidence, by id (the page links a YARN application id to the RM's app page
  and its MapReduce job to JobHistory).
* **Band.** Job latency scales with task durations, and the task times are a
  model's estimates. The band is the proposed latency when every task runs
  ``exp(±1.645 σ)`` times its estimate, σ being the model's measured log-error
  spread of stage means (:func:`yarn_adapt.workload.taskvalidation.measure_error`): about a 90 %
  band if the errors were one shared log-normal factor. Measured on the jobs the
  model learned from, so optimistic for a learned model; for the median fallback
  it is the spread of the history itself.
* **Warnings.** Thin evidence: fewer than :data:`THIN_JOBS` jobs, or task times from
  the median fallback. Past misses: a measured interval of an earlier proposal for
  the same group whose mean latency was off its prediction by more than
  :data:`MISS_RATIO` (either way), over at least :data:`MISS_MIN_JOBS` jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from yarn_adapt.model import ClusterSnapshot, SchedulerConfig
from yarn_adapt.model.apps import Application
from yarn_adapt.service.realized import group_of_queue
from yarn_adapt.service.records import GroupPrediction, RealizedLatency
from yarn_adapt.service.web.words import duration
from yarn_adapt.sim import JobInProgress

EVIDENCE_JOBS = 20
"""At most this many job ids are kept per group."""
THIN_JOBS = 3
Z_90 = 1.645
MISS_RATIO = 0.5
MISS_MIN_JOBS = 2
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


def band(after_s: float, sigma: float) -> tuple[float | None, float | None]:
    if not math.isfinite(after_s) or after_s < 0 or not math.isfinite(sigma):
        return None, None
    factor = math.exp(Z_90 * max(sigma, 0.0))
    return after_s / factor, after_s * factor


def with_evidence(
    groups: Sequence[GroupPrediction],
    jobs: dict[str, tuple[str, ...]],
    sigma: float,
    estimator: str,
) -> tuple[GroupPrediction, ...]:
    result = []
    for group in groups:
        low, high = band(group.after_s, sigma)
        result.append(
            replace(
                group,
                job_ids=jobs.get(group.group, ()),
                after_low_s=low,
                after_high_s=high,
                estimator=estimator,
                interval_source="model error" if low is not None else "",
            )
        )
    return tuple(result)


# --------------------------------------------------------------------------- warnings


@dataclass(frozen=True)
class Miss:
    proposal_id: int
    interval: int
    predicted_s: float
    measured_s: float
    jobs: int


def past_misses(
    group: str, realized: Iterable[RealizedLatency], before_proposal: int
) -> list[Miss]:
    """Measured intervals of earlier proposals for ``group`` that missed."""
    misses = []
    for r in realized:
        if r.group != group or r.proposal_id >= before_proposal or r.mean_s is None:
            continue
        if r.jobs < MISS_MIN_JOBS or r.predicted_s <= 0 or not math.isfinite(r.predicted_s):
            continue
        if abs(r.mean_s - r.predicted_s) > MISS_RATIO * r.predicted_s:
            misses.append(Miss(r.proposal_id, r.interval, r.predicted_s, r.mean_s, r.jobs))
    return misses


def warnings_for(
    group: GroupPrediction, realized: Iterable[RealizedLatency], proposal_id: int
) -> list[str]:
    """Short warnings for the page: thin evidence and past misses."""
    found = []
    if group.jobs < THIN_JOBS:
        found.append(
            f"thin evidence: the prediction rests on {group.jobs} job(s) (fewer than {THIN_JOBS})"
        )
    if group.estimator == MEDIAN_FALLBACK:
        found.append("thin evidence: task times are medians per kind (too little history to learn)")
    misses = past_misses(group.group, realized, proposal_id)
    if misses:
        worst = max(misses, key=lambda m: abs(m.measured_s - m.predicted_s) / m.predicted_s)
        found.append(
            f"past predictions for {group.group} missed {len(misses)} time(s): proposal "
            f"{worst.proposal_id} predicted {duration(worst.predicted_s)}, {worst.jobs} jobs "
            f"measured {duration(worst.measured_s)}"
        )
    return found
