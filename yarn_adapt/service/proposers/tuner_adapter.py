"""Adapters from the tuner (:mod:`yarn_adapt.tuning.tuner`) to the service's
:class:`~yarn_adapt.service.proposers.seam.Proposer`: the tuner's
:class:`~yarn_adapt.tuning.proposal.Proposal` becomes a
:class:`~yarn_adapt.service.state.records.Suggestion` (predictions per triggered group,
the cluster's, and one reason line per distinct reason, naming what it explains).

One proposer, :class:`TunerProposer`, for a simulated cluster and a real one: a
:class:`ClusterReader` turns the backend's view into the same :class:`TunerInput`
(the tuner's state, the task-time model, the jobs not finished). Task times: the
simulated cluster's reader gets its model from the caller (the demo fits one on the
trace's earlier half); the RM's reader learns one from the JobHistory jobs it has seen
so far, refitted when new ones arrive.

Likely ranges: the proposer keeps a
:class:`~yarn_adapt.service.proposers.intervals.PredictionLedger` of its predictions;
every round it first checks those whose jobs finished, then states each new
prediction's range as the ledger's calibration gives it
(:mod:`yarn_adapt.service.proposers.intervals`). On an RM it keeps its checked
log ratios in the state directory and starts from them after a restart
(:mod:`yarn_adapt.service.proposers.checks_file`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

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
from yarn_adapt.tuning.executors import ExecutorHandle, open_executor
from yarn_adapt.tuning.proposal import Proposal
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.state import TuningState, state_from_simulation, state_from_snapshot
from yarn_adapt.tuning.tuner import propose
from yarn_adapt.workload.history_model import HistoryModel
from yarn_adapt.workload.taskmodel import TaskTimeModel
from yarn_adapt.workload.taskvalidation import measure_error


def tuner_settings(settings: Settings, interval_s: float | None = None) -> TunerSettings:
    """``interval_s`` is the trigger window in the backend's clock (simulated seconds
    for the demo), the service interval by default."""
    # no hindsight static yet: the gates judge the prediction on the jobs in
    # progress, which a move to the hindsight static is not meant to improve
    return TunerSettings(
        interval_s=interval_s or settings.service.interval_s,
        min_improvement=settings.tuning.min_improvement,
        seed=settings.tuning.seed,
        hindsight=False,
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


@dataclass(frozen=True)
class TunerInput:
    """What the tuner's proposer reads of one observation, alike for a simulated
    cluster and an RM: the time, the tuner's state, the task-time model, and every job
    not finished yet as (id, queue, submitted s) -- the evidence and the population of
    its predictions."""

    now_s: float
    state: TuningState
    model: TaskTimeModel
    waiting: tuple[tuple[str, str, float], ...]


class ClusterReader(Protocol):
    """Reads a backend's view into a :class:`TunerInput`; ``spread`` is the model's
    measured error (for the prior range), asked for only when there is a suggestion."""

    def read(self, view: ClusterSnapshot | SimulatedView) -> TunerInput: ...

    def spread(self, model: TaskTimeModel) -> float: ...


class SimulatedReader:
    """A simulated cluster (the demo); its task-time model comes from the caller, which
    fitted it on ``history`` (the jobs whose error gives the spread)."""

    def __init__(self, model: TaskTimeModel, history: Workload | None = None) -> None:
        self.model = model
        self.sigma = _spread(model, history.jobs if history else ())

    def read(self, view: ClusterSnapshot | SimulatedView) -> TunerInput:
        assert isinstance(view, SimulatedView), "a simulated cluster's reader needs its view"
        state = state_from_simulation(
            view.time_s, view.start, view.cluster, view.recent, view.history
        )
        return TunerInput(view.time_s, state, self.model, tuple(simulated_jobs(view.start.jobs)))

    def spread(self, model: TaskTimeModel) -> float:
        return self.sigma


class SnapshotReader:
    """A real RM's snapshot (``yarn-adapt serve``); the task-time model is learned from
    the JobHistory jobs seen so far, refitted when new ones arrive."""

    def __init__(self, seed: int) -> None:
        self.history = HistoryModel(seed=seed)

    def read(self, view: ClusterSnapshot | SimulatedView) -> TunerInput:
        assert isinstance(view, ClusterSnapshot), "an RM's reader needs its snapshot"
        jobs = self.history.update(view)
        assert self.history.model is not None
        state = state_from_snapshot(view, jobs)
        waiting = tuple(snapshot_jobs(view))
        return TunerInput(view.taken_ms / 1000.0, state, self.history.model, waiting)

    def spread(self, model: TaskTimeModel) -> float:
        return _spread(model, tuple(self.history.jobs.values()))


class TunerProposer:
    """The tuner behind the service's :class:`~yarn_adapt.service.proposers.seam.Proposer`
    seam, one class for a simulated cluster and a real one: ``reader`` says which.
    ``executor``: where the groups' searches run (inline when ``None``); ``checks_file``:
    where the checked predictions are kept across restarts (``None``: in memory)."""

    def __init__(
        self,
        settings: TunerSettings,
        reader: ClusterReader,
        *,
        executor: str | None = None,
        checks_file: Path | None = None,
    ) -> None:
        self.settings = settings
        self.reader = reader
        self.executor = executor
        self.checks_file = checks_file
        earlier = load_log_ratios(checks_file) if checks_file is not None else ()
        self.ledger = PredictionLedger(earlier=earlier)

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        seen = self.reader.read(observed.view)
        checked = self.ledger.observe(observed.finished, observed.config, seen.now_s)
        if checked and self.checks_file is not None:
            save_log_ratios(self.checks_file, self.ledger.log_ratios())
        suggestion = suggestion_of(self._tune(seen, observed, frozen), seen.model)
        if suggestion is None:
            return None
        since = seen.now_s - self.settings.interval_s
        jobs = jobs_by_group(seen.waiting, observed.config, since)
        suggestion = _with_evidence(suggestion, jobs, seen.model)
        population = population_by_group(((i, q) for i, q, _ in seen.waiting), observed.config)
        calibration = self.ledger.calibration(_prior(seen.model, self.reader.spread(seen.model)))
        checkable = _checkable(suggestion, population, calibration)
        self.ledger.record(_predictions(checkable, observed, seen.now_s, calibration))
        return checkable

    def _tune(self, seen: TunerInput, observed: Observed, frozen: frozenset[str]) -> Proposal:
        inline: AbstractContextManager[ExecutorHandle | None] = nullcontext()
        with inline if self.executor is None else open_executor(self.executor) as handle:
            return propose(
                seen.state, observed.config, seen.model, self.settings, frozen=frozen,
                executor=handle,
            )  # fmt: skip


def rm_proposer(settings: Settings) -> TunerProposer:
    """The tuner on a real RM, as ``yarn-adapt serve`` runs it."""
    return TunerProposer(
        tuner_settings(settings),
        SnapshotReader(settings.tuning.seed),
        executor=settings.tuning.executor,
        checks_file=checks_path(settings.state.state_dir),
    )


def simulated_proposer(
    settings: TunerSettings, model: TaskTimeModel, history: Workload | None = None
) -> TunerProposer:
    """The tuner on a simulated cluster (the demo), inline, its checks in memory."""
    return TunerProposer(settings, SimulatedReader(model, history))


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
