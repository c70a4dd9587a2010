"""Predictions checked on the population they were about (pure).

A proposal predicts, for each re-tuned group, the mean latency (submission to
finish) of the group's jobs in progress when the tuner looked -- its population
(:attr:`~yarn_adapt.service.state.records.GroupPrediction.population`). Once every one of
those jobs finished, their realised mean is set beside the prediction: the jobs
the prediction was about, over the interval they ran (from the first one's
submission to the last one's finish). A window of whatever jobs happened to finish
in a round mixes other jobs in and is not a check of the prediction.

This is the one definition of "realised" for a prediction (:func:`realised_of`):
the proposal's page, the overview's predicted-vs-realised chart, the past-miss
warning, the API, the metrics, the demo's summary and the calibration of the likely
ranges (:mod:`yarn_adapt.service.proposers.intervals`) all read it.

Which prediction: ``after_s`` when the proposal was applied (its configuration ran
them, at least from the apply on), ``before_s`` when it was not (the running
configuration did). The error is ``|predicted - realised| / realised``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from yarn_adapt.service.backend import FinishedJob
from yarn_adapt.service.state.records import (
    GroupHistory,
    GroupPrediction,
    PredictionError,
    ProposalRecord,
    RecentChange,
)


@dataclass(frozen=True)
class Realised:
    """What a prediction's jobs realised: their mean latency (submission to finish),
    how many, and the interval they ran over (the first submission to the last
    finish, in seconds of the backend's clock)."""

    mean_s: float
    jobs: int
    start_s: float
    end_s: float


def realised_of(population: Sequence[str], finished: Mapping[str, FinishedJob]) -> Realised | None:
    """The realised mean of ``population``, or ``None`` while any of its jobs has not
    finished (or it has none)."""
    if not population or any(job_id not in finished for job_id in population):
        return None
    jobs = [finished[job_id] for job_id in population]
    mean = statistics.fmean(job.latency_s for job in jobs)
    if mean <= 0:
        return None
    return Realised(
        mean,
        len(jobs),
        min(job.submitted_ms for job in jobs) / 1000.0,
        max(job.finished_ms for job in jobs) / 1000.0,
    )


def check_group(
    proposal_id: int,
    prediction: GroupPrediction,
    finished: Mapping[str, FinishedJob],
    applied: bool,
) -> PredictionError | None:
    """The check of one group's prediction, or ``None`` while any job of its
    population has not finished (or it has none, or its prediction is unknown)."""
    predicted = prediction.after_s if applied else prediction.before_s
    if not math.isfinite(predicted) or predicted < 0:
        return None
    realised = realised_of(prediction.population, finished)
    if realised is None:
        return None
    low, high = (prediction.after_low_s, prediction.after_high_s) if applied else (None, None)
    return PredictionError(
        proposal_id=proposal_id,
        group=prediction.group,
        config="proposed" if applied else "running",
        predicted_s=predicted,
        low_s=low,
        high_s=high,
        realised_s=realised.mean_s,
        jobs=realised.jobs,
        finished=realised.jobs,
        window_start_s=realised.start_s,
        window_end_s=realised.end_s,
        error=abs(predicted - realised.mean_s) / realised.mean_s,
    )


def check_proposal(
    proposal: ProposalRecord, finished: Mapping[str, FinishedJob], applied: bool
) -> list[PredictionError]:
    """The checks of a proposal's groups whose populations all finished."""
    found = (check_group(proposal.id, g, finished, applied) for g in proposal.groups)
    return [checked for checked in found if checked is not None]


@dataclass(frozen=True)
class ProposalError:
    """A proposal's prediction for all its checked groups together: the
    job-weighted mean predicted and realised latency, and the relative error."""

    proposal_id: int
    predicted_s: float
    realised_s: float
    jobs: int
    error: float


def proposal_errors(checked: Iterable[PredictionError]) -> list[ProposalError]:
    """One :class:`ProposalError` per proposal, in proposal order."""
    by_proposal: dict[int, list[PredictionError]] = {}
    for row in checked:
        by_proposal.setdefault(row.proposal_id, []).append(row)
    found = []
    for proposal_id in sorted(by_proposal):
        rows = by_proposal[proposal_id]
        jobs = sum(r.jobs for r in rows)
        predicted = sum(r.predicted_s * r.jobs for r in rows) / jobs
        realised = sum(r.realised_s * r.jobs for r in rows) / jobs
        found.append(
            ProposalError(
                proposal_id, predicted, realised, jobs, abs(predicted - realised) / realised
            )
        )
    return found


def group_histories(
    checked: Sequence[PredictionError], recent: Sequence[tuple[str, RecentChange]]
) -> dict[str, GroupHistory]:
    """What the gates read about each group: its checked errors (oldest first) and
    its recently applied changes, ``recent`` as (group, change)."""
    errors: dict[str, list[float]] = {}
    for row in sorted(checked, key=lambda r: r.proposal_id):
        errors.setdefault(row.group, []).append(row.error)
    changes: dict[str, list[RecentChange]] = {}
    for group, change in recent:
        changes.setdefault(group, []).append(change)
    return {
        group: GroupHistory(tuple(errors.get(group, ())), tuple(changes.get(group, ())))
        for group in errors.keys() | changes.keys()
    }
