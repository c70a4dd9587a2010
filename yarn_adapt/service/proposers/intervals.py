"""The likely range of each prediction, calibrated on the predictions already
checked, and the population each prediction is about (pure).

A prediction of a group's mean job latency misses for reasons a model of task times
does not see: jobs that arrive after the tuner looked and share the queues, the
order the scheduler really picks containers in, stragglers. The task-time model's
own measured error (0.07 in log terms on the demo's trace) says little about those,
and a range drawn from it held ±1 % where the outcome missed by 25 %. So the range
is calibrated on outcomes:

* **Every prediction is kept.** Each round, the tuner predicts each re-tuned group's
  mean latency under the running configuration and under the one it found best;
  :class:`PredictionLedger` keeps both, with the population they are about (the
  group's jobs in progress when the tuner looked). The next round says which of the
  two configurations ran (the proposed one when it runs by then). Once every job of
  the population finished, the prediction for the configuration that ran is checked
  on them -- the one definition of realised,
  :func:`~yarn_adapt.service.proposers.checking.realised_of` -- as
  ``log(realised / predicted)``.
* **The range** of a new prediction ``p`` is ``p · exp(m ± t · s · sqrt(1 + 1/n))``
  over the latest :data:`WINDOW` checked log ratios (``m`` their mean, ``s`` their
  standard deviation, ``t`` Student's quantile of :data:`LEVEL` with ``n - 1``
  degrees of freedom): the normal prediction interval of the next log ratio. It
  need not hold ``p``: when predictions have run short, the range says so.
* **Before** :data:`MIN_CHECKED` **checks** the range is a prior,
  ``p · exp(±z · σ)`` with ``σ`` the larger of the task-time model's measured error
  and :data:`PRIOR_SIGMA`: wide on purpose, until outcomes say otherwise.
* **Coverage**: how many checked predictions realised inside the range stated when
  they were made (the demo's and ``bench adaptive-latency``'s ``interval_coverage``),
  and of those stated from checks rather than the prior
  (``interval_coverage_calibrated``). A ledger may start from an earlier record of
  checked log ratios (``earlier``): the bench carries one from run to run, as a
  service carries its own from round to round.

The ledger lives with the proposer; the RM's proposer keeps its checked log ratios in
the state directory, so a restarted service does not start from the prior again
(:mod:`yarn_adapt.service.proposers.checks_file`); the proposals' own checks are stored
(:class:`~yarn_adapt.service.state.records.PredictionError`) and shown on their pages.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from yarn_adapt.model import SchedulerConfig
from yarn_adapt.service.backend import FinishedJob
from yarn_adapt.service.proposers.checking import Realised, realised_of
from yarn_adapt.service.proposers.realized import group_of_queue
from yarn_adapt.service.state.records import GroupPrediction
from yarn_adapt.yarn.confxml import diff_configs

LEVEL = 0.80
"""The share of outcomes a stated range should hold."""
MIN_CHECKED = 3
"""Checked predictions needed before the range is calibrated on them."""
WINDOW = 40
"""The calibration reads the latest this many checked predictions."""
PRIOR_SIGMA = 0.3
"""The log-error spread the range assumes before :data:`MIN_CHECKED` predictions were
checked: a factor of 1.47 either way at 80 %. The spreads measured so far (the standard
deviation of checked log ratios): 0.20 on the demo's 20 rounds of the bundled FB-2009
day, 0.03 on ``bench adaptive-latency --quick``; this is half again the larger. The
former 0.5 (a factor of 1.9) held all 18 of the ranges it gave there: wider than
outcomes needed, and wide enough to hold back moves that would gain."""
FINISHED_KEPT = 20_000
"""Finished jobs the ledger remembers (by id) to check populations that end rounds apart."""

Range = tuple[float, float]


# --------------------------------------------------------------------------- populations


def population_by_group(
    jobs: Iterable[tuple[str, str]], config: SchedulerConfig
) -> dict[str, tuple[str, ...]]:
    """``jobs`` as (id, leaf queue) of the jobs in progress: their ids per group."""
    found: dict[str, list[str]] = {}
    for job_id, queue in jobs:
        group = group_of_queue(queue, config)
        if group is not None:
            found.setdefault(group, []).append(job_id)
    return {group: tuple(ids) for group, ids in found.items()}


def with_population(
    groups: Sequence[GroupPrediction], population: dict[str, tuple[str, ...]]
) -> tuple[GroupPrediction, ...]:
    return tuple(replace(g, population=population.get(g.group, ())) for g in groups)


# --------------------------------------------------------------------------- calibration


def normal_quantile(p: float) -> float:
    return statistics.NormalDist().inv_cdf(p)


def t_quantile(p: float, degrees: int) -> float:
    """Student's t quantile (Cornish-Fisher expansion around the normal's; within
    1 % for 3 or more degrees of freedom, 2 % at 2)."""
    z = normal_quantile(p)
    nu = float(max(degrees, 1))
    return z + (z**3 + z) / (4 * nu) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2)


@dataclass(frozen=True)
class Calibration:
    """What the checked predictions say about the next one: their log ratios
    ``log(realised / predicted)``, oldest first, and the prior's spread."""

    log_ratios: tuple[float, ...] = ()
    prior_sigma: float = PRIOR_SIGMA
    level: float = LEVEL

    @property
    def recent(self) -> tuple[float, ...]:
        return self.log_ratios[-WINDOW:]

    @property
    def calibrated(self) -> bool:
        return len(self.recent) >= MIN_CHECKED

    def log_bounds(self) -> tuple[float, float]:
        """The range as log factors on a prediction: (low, high)."""
        recent = self.recent
        if not self.calibrated:
            half = normal_quantile((1 + self.level) / 2) * max(self.prior_sigma, PRIOR_SIGMA)
            return -half, half
        n = len(recent)
        centre = statistics.fmean(recent)
        half = t_quantile((1 + self.level) / 2, n - 1) * statistics.stdev(recent)
        half *= math.sqrt(1 + 1 / n)
        return centre - half, centre + half

    def range_of(self, point_s: float) -> Range | None:
        """The likely range of a prediction ``point_s`` (None when it is not finite)."""
        if not math.isfinite(point_s) or point_s < 0:
            return None
        low, high = self.log_bounds()
        return point_s * math.exp(low), point_s * math.exp(high)

    def describe(self) -> str:
        """Where the range comes from, in words (the page's hover text)."""
        share = f"{self.level:.0%}"
        if not self.calibrated:
            return (
                f"{share} range, a wide prior: fewer than {MIN_CHECKED} predictions checked "
                "on their jobs yet"
            )
        return f"{share} range calibrated on the last {len(self.recent)} predictions checked"


def with_ranges(
    groups: Sequence[GroupPrediction], calibration: Calibration
) -> tuple[GroupPrediction, ...]:
    """Each prediction with the likely range of its proposed latency."""
    found = []
    for group in groups:
        bounds = calibration.range_of(group.after_s)
        if bounds is None:
            found.append(replace(group, after_low_s=None, after_high_s=None, interval_source=""))
            continue
        found.append(
            replace(
                group,
                after_low_s=bounds[0],
                after_high_s=bounds[1],
                interval_source=calibration.describe(),
            )
        )
    return tuple(found)


def log_ratio_spread(runs: Iterable[Sequence[float]]) -> dict[str, float | None]:
    """The mean and standard deviation of every checked log ratio (None under two)."""
    ratios = [r for run in runs for r in run]
    enough = len(ratios) >= 2
    return {
        "prediction_log_error_mean_ratio": round(statistics.fmean(ratios), 3) if ratios else None,
        "prediction_log_error_sd_ratio": round(statistics.stdev(ratios), 3) if enough else None,
    }


# --------------------------------------------------------------------------- the ledger


@dataclass(frozen=True)
class RoundPrediction:
    """One round's prediction for one group: the latency of its population under
    the running configuration and under the proposed one (``proposed``: the whole
    configuration proposed, ``None`` when it changes nothing), each with the range
    stated when it was made."""

    at_s: float
    group: str
    population: tuple[str, ...]
    running_s: float
    proposed_s: float
    running_range: Range | None
    proposed_range: Range | None
    proposed: SchedulerConfig | None = None
    calibrated: bool = False  # the ranges came from checks, not the prior


@dataclass(frozen=True)
class LedgerCheck:
    """A round's prediction checked on its population: for the configuration that
    ran them (``config``), what it predicted, its range, what they realised."""

    at_s: float
    group: str
    config: str
    predicted_s: float
    realised_s: float
    jobs: int
    low_s: float | None
    high_s: float | None
    calibrated: bool = False

    @property
    def inside(self) -> bool | None:
        if self.low_s is None or self.high_s is None:
            return None
        return self.low_s <= self.realised_s <= self.high_s

    @property
    def log_ratio(self) -> float:
        return math.log(self.realised_s / self.predicted_s)


def round_predictions(
    groups: Sequence[GroupPrediction],
    calibration: Calibration,
    at_s: float,
    proposed: SchedulerConfig,
    running: SchedulerConfig,
) -> list[RoundPrediction]:
    """What a round predicted, for the ledger (groups with a population only)."""
    changes = diff_configs(running, proposed)
    return [
        RoundPrediction(
            at_s,
            group.group,
            group.population,
            group.before_s,
            group.after_s,
            calibration.range_of(group.before_s),
            calibration.range_of(group.after_s),
            proposed if changes else None,
            calibration.calibrated,
        )
        for group in groups
        if group.population
    ]


class PredictionLedger:
    """Every round's predictions, checked once their jobs finished; the calibration
    and the coverage they give (see the module's docstring)."""

    def __init__(self, earlier: Sequence[float] = ()) -> None:
        self.earlier = tuple(earlier)  # log ratios checked before this ledger began
        self._open: dict[tuple[float, str], tuple[RoundPrediction, str | None]] = {}
        self._finished: dict[str, FinishedJob] = {}
        self.checks: list[LedgerCheck] = []

    def record(self, predictions: Iterable[RoundPrediction]) -> None:
        """Keep a round's predictions (a later call for the same round and group
        replaces the earlier one: the suggestion the round went on with)."""
        for prediction in predictions:
            self._open[(prediction.at_s, prediction.group)] = (prediction, None)

    def observe(
        self, finished: Iterable[FinishedJob], running: SchedulerConfig, now_s: float
    ) -> list[LedgerCheck]:
        """A new observation: note which configuration ran each earlier round's
        jobs, then check every prediction whose jobs all finished."""
        self._remember(finished)
        checked = []
        for key, (prediction, ran) in list(self._open.items()):
            if ran is None and prediction.at_s < now_s:
                ran = _which_ran(prediction, running)
                self._open[key] = (prediction, ran)
            realised = realised_of(prediction.population, self._finished)
            if ran is None or realised is None:
                continue
            del self._open[key]
            found = _check(prediction, ran, realised)
            if found is not None:
                checked.append(found)
        self.checks += checked
        return checked

    def _remember(self, finished: Iterable[FinishedJob]) -> None:
        for job in finished:
            self._finished[job.id] = job
        excess = len(self._finished) - FINISHED_KEPT
        for stale in list(self._finished)[: max(excess, 0)]:
            del self._finished[stale]

    def log_ratios(self) -> tuple[float, ...]:
        """Every checked log ratio, the earlier record's first."""
        return (*self.earlier, *(c.log_ratio for c in self.checks if c.predicted_s > 0))

    def calibration(self, prior_sigma: float = PRIOR_SIGMA) -> Calibration:
        return Calibration(self.log_ratios(), prior_sigma)

    def coverage(self, *, calibrated_only: bool = False) -> tuple[int, int]:
        """How many checked predictions realised inside their stated range, of how
        many (``calibrated_only``: of those whose range came from checks)."""
        judged = [
            c.inside
            for c in self.checks
            if c.inside is not None and (c.calibrated or not calibrated_only)
        ]
        return sum(1 for inside in judged if inside), len(judged)

    @property
    def open_predictions(self) -> int:
        return len(self._open)


def _which_ran(prediction: RoundPrediction, running: SchedulerConfig) -> str:
    """``proposed`` when the configuration it proposed runs now, else ``running``."""
    proposed = prediction.proposed
    if proposed is not None and not diff_configs(running, proposed):
        return "proposed"
    return "running"


def _check(prediction: RoundPrediction, ran: str, realised: Realised) -> LedgerCheck | None:
    """The check of the prediction for the configuration that ran (None when that
    prediction was not a finite latency: jobs it said would starve)."""
    proposed = ran == "proposed"
    predicted = prediction.proposed_s if proposed else prediction.running_s
    if not math.isfinite(predicted) or predicted <= 0:
        return None
    bounds = prediction.proposed_range if proposed else prediction.running_range
    low, high = bounds if bounds is not None else (None, None)
    return LedgerCheck(
        prediction.at_s, prediction.group, ran, predicted, realised.mean_s, realised.jobs,
        low, high, prediction.calibrated,
    )  # fmt: skip
