"""Adapters from the tuner (:mod:`yarn_adapt.tuning.tuner`) to the service's
:class:`~yarn_adapt.service.proposers.seam.Proposer`: the tuner's
:class:`~yarn_adapt.tuning.proposal.Proposal` becomes a
:class:`~yarn_adapt.service.state.records.Suggestion` (predictions per triggered group,
the cluster's, and one reason line per distinct reason, naming what it explains).

Task times: the simulated cluster's proposer gets its model from the caller (the demo
fits one on the trace's earlier half); the RM's proposer learns one from the
JobHistory jobs it has seen so far, refitted when new ones arrive.

Likely ranges: each proposer keeps a
:class:`~yarn_adapt.service.proposers.intervals.PredictionLedger` of its predictions;
every round it first checks those whose jobs finished, then states each new
prediction's range as the ledger's calibration gives it
(:mod:`yarn_adapt.service.proposers.intervals`). The RM's proposer keeps its checked
log ratios in the state directory and starts from them after a restart
(:mod:`yarn_adapt.service.proposers.checks_file`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from yarn_adapt.model import ClusterSnapshot, Workload
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.service.backend import Observed, SimulatedView
from yarn_adapt.service.proposers.checks_file import checks_path, load_log_ratios, save_log_ratios
from yarn_adapt.service.proposers.evidence import (
    jobs_by_group,
    simulated_jobs,
    snapshot_jobs,
    with_evidence,
)
from yarn_adapt.service.proposers.intervals import (
    Calibration,
    PredictionLedger,
    RoundPrediction,
    population_by_group,
    round_predictions,
    with_population,
    with_ranges,
)
from yarn_adapt.service.settings import Settings
from yarn_adapt.service.state.records import GroupPrediction, Suggestion
from yarn_adapt.tuning.executors import open_executor
from yarn_adapt.tuning.proposal import Proposal
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.state import state_from_simulation, state_from_snapshot
from yarn_adapt.tuning.tuner import propose
from yarn_adapt.workload.history_model import HistoryModel
from yarn_adapt.workload.taskmodel import TaskTimeModel
from yarn_adapt.workload.taskvalidation import measure_error


def tuner_settings(settings: Settings, interval_s: float | None = None) -> TunerSettings:
    """``interval_s`` is the trigger window in the backend's clock (simulated seconds
    for the demo), the service interval by default."""
    return TunerSettings(
        interval_s=interval_s or settings.service.interval_s,
        min_improvement=settings.tuning.min_improvement,
        seed=settings.tuning.seed,
    )


def suggestion_of(proposal: Proposal, model: TaskTimeModel) -> Suggestion | None:
    """``None`` when the tuner found no group to re-tune (nothing triggered)."""
    if not proposal.triggered:
        return None
    groups = tuple(
        GroupPrediction(d.group, d.before_s, d.after_s, d.jobs, found_s=_known(d.found_s))
        for d in proposal.groups
        if d.triggered and not math.isnan(d.before_s)
    )
    return Suggestion(
        proposal.config,
        groups,
        proposal.cluster_before_s,
        proposal.cluster_after_s,
        (*reason_lines(proposal), f"task times: {model.reason}"),
        proposal.triggered,
    )


def _known(value: float) -> float | None:
    return value if math.isfinite(value) else None


def reason_lines(proposal: Proposal) -> tuple[str, ...]:
    """Each distinct reason once, after the changes it explains; groups the tuner
    looked at without changing them say why."""
    explained: dict[str, list[str]] = {}
    for change, reason in zip(proposal.changes, proposal.reasons, strict=True):
        explained.setdefault(reason, []).append(f"{change.queue or '(global)'} {change.prop}")
    lines = [f"{', '.join(what)}: {reason}" for reason, what in explained.items()]
    lines += [f"{d.group}: {d.reason}" for d in proposal.groups if d.triggered and not d.changed]
    return tuple(lines)


class SimulationProposer:
    """The tuner on a simulated cluster's view (the demo). ``history``: the jobs the
    model learned from, to measure its error for the prediction band."""

    def __init__(
        self, settings: TunerSettings, model: TaskTimeModel, history: Workload | None = None
    ) -> None:
        self.settings = settings
        self.model = model
        self.sigma = _spread(model, history.jobs if history else ())
        self.ledger = PredictionLedger()

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        view = observed.view
        assert isinstance(view, SimulatedView), "the simulation proposer needs a simulated cluster"
        self.ledger.observe(observed.finished, observed.config, view.time_s)
        state = state_from_simulation(view.time_s, view.start, view.cluster)
        proposal = propose(state, observed.config, self.model, self.settings, frozen=frozen)
        suggestion = suggestion_of(proposal, self.model)
        if suggestion is None:
            return None
        since = view.time_s - self.settings.interval_s
        jobs = jobs_by_group(simulated_jobs(view.start.jobs), observed.config, since)
        suggestion = _with_evidence(suggestion, jobs, self.model)
        population = population_by_group(
            ((p.job.id, p.job.queue) for p in view.start.jobs), observed.config
        )
        calibration = self.ledger.calibration(_prior(self.model, self.sigma))
        checkable = _checkable(suggestion, population, calibration)
        self.ledger.record(_predictions(checkable, observed, view.time_s, calibration))
        return checkable


class SnapshotProposer:
    """The tuner on a real RM's snapshot (``yarn-adapt serve``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = tuner_settings(settings)
        self.history = HistoryModel(seed=settings.tuning.seed)
        self.executor = settings.tuning.executor
        self.checks_file = checks_path(settings.state.state_dir)
        self.ledger = PredictionLedger(earlier=load_log_ratios(self.checks_file))

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        snapshot = observed.view
        assert isinstance(snapshot, ClusterSnapshot), "the snapshot proposer needs an RM"
        now_s = snapshot.taken_ms / 1000.0
        if self.ledger.observe(observed.finished, observed.config, now_s):
            save_log_ratios(self.checks_file, self.ledger.log_ratios())
        history = self.history.update(snapshot)
        assert self.history.model is not None
        model = self.history.model
        state = state_from_snapshot(snapshot, history)
        with open_executor(self.executor) as handle:
            proposal = propose(
                state, observed.config, model, self.settings, frozen=frozen, executor=handle
            )
        suggestion = suggestion_of(proposal, model)
        if suggestion is None:
            return None
        since = snapshot.taken_ms / 1000.0 - self.settings.interval_s
        jobs = jobs_by_group(snapshot_jobs(snapshot), observed.config, since)
        sigma = _spread(model, history[-SPREAD_JOBS:])
        suggestion = _with_evidence(suggestion, jobs, model)
        population = population_by_group(
            ((a.id, a.queue) for a in snapshot.apps if not a.is_finished), observed.config
        )
        calibration = self.ledger.calibration(_prior(model, sigma))
        checkable = _checkable(suggestion, population, calibration)
        self.ledger.record(_predictions(checkable, observed, now_s, calibration))
        return checkable


SPREAD_JOBS = 200
"""The model's error is measured on at most this many of the latest jobs."""


def _spread(model: TaskTimeModel, jobs: Sequence[JobSpec]) -> float:
    scored = [job for job in jobs[-SPREAD_JOBS:] if job.tasks]
    # the spread of the stage-mean error, net of the stages' own sampling noise
    return measure_error(model, scored).sigma if scored else math.nan


def _prior(model: TaskTimeModel, sigma: float) -> float:
    """The task-time model's error for the prior range: the one measured on jobs it
    had not seen when it carries one (on its own training jobs it is ~0)."""
    held_out = model.error.sigma if model.error is not None else 0.0
    return max(held_out, sigma if math.isfinite(sigma) else 0.0)


def _checkable(
    suggestion: Suggestion, population: dict[str, tuple[str, ...]], calibration: Calibration
) -> Suggestion:
    """The suggestion with what makes its predictions checkable: the population
    each is about, and the likely range the ledger's calibration gives it."""
    groups = with_population(suggestion.groups, population)
    return replace(suggestion, groups=with_ranges(groups, calibration))


def _predictions(
    suggestion: Suggestion, observed: Observed, at_s: float, calibration: Calibration
) -> list[RoundPrediction]:
    return round_predictions(
        suggestion.groups, calibration, at_s, suggestion.config, observed.config
    )


def _with_evidence(
    suggestion: Suggestion, jobs: dict[str, tuple[str, ...]], model: TaskTimeModel
) -> Suggestion:
    return replace(suggestion, groups=with_evidence(suggestion.groups, jobs, model.estimator))
