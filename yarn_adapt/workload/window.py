"""A workload's first hours, for ``yarn-adapt sim --hours`` and the benches' quick forms."""

from __future__ import annotations

from yarn_adapt.model.workload import Workload


def within_hours(workload: Workload, hours: float | None) -> Workload:
    """The jobs submitted within ``hours`` of the first one (all of them for None)."""
    if hours is None:
        return workload
    first = workload.jobs[0].submit_s if workload.jobs else 0.0
    jobs = tuple(job for job in workload.jobs if job.submit_s - first < hours * 3600)
    return Workload(jobs, workload.source, workload.skipped_rows)
