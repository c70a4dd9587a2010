"""Online correction of interference profiles from what the load monitors observe
(Tarcil §5.2: a job can run below its target "due to inaccurate classification";
the monitor's measurements then correct the class's profile for the next jobs).

:class:`LiveProfiles` is a :class:`~yarn_adapt.placement.profiles.ProfileSource`:
the profiled :class:`~yarn_adapt.placement.profiles.ProfileBook` plus corrections,
with a revision per class that placers use to rebuild what they cached. The node
monitors feed it two kinds of observation, and :meth:`LiveProfiles.refit` (the
background step, never on a decision's path) turns them into profiles:

* **caused pressure** (:meth:`~LiveProfiles.observe_pressure`): what a running job
  of the class exerts on each shared resource, measured on its server (the model
  measures it exactly; a real monitor reads performance counters). The class's
  ``caused`` becomes the mean of the recent measurements -- this alone fixes a
  probe-completed entry that collaborative filtering got badly wrong.
* **slowdowns** (:meth:`~LiveProfiles.observe_slowdown`): an RU's measured speed
  ``v`` (progress per second against running alone) and the contention ``c`` it
  saw. The scheduler's interference model predicts ``1 / v - 1 = slope x sum_i
  max(c_i - t_i, 0)`` for the class's tolerance ``t`` (the same model the scorer
  predicts overshoot with). The refit finds the tolerance closest to the
  profiled one that explains the recent observations: least squares on the
  observed overshoot ``o = (1 / v - 1) / slope`` against the prediction, with
  ``max`` smoothed (softplus at ``temperature``, so an under-predicted slowdown
  moves the resources whose contention came closest to the tolerance), plus
  ``prior_weight x |t - t_profiled|^2``; projected gradient steps, ``t`` kept in
  [0, 1]. A slowdown seen where none was predicted lowers the tolerance; no
  slowdown where one was predicted raises it; contention below the tolerance with
  no slowdown says nothing (and moves nothing).

A class's profile is republished (its revision bumped) when a tolerance or a
caused entry moved by ``min_change`` or more; the corrected profile keeps
``sensitivity = 1 - tolerance`` and is marked ``source="corrected"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.profiles import N_RESOURCES, InterferenceProfile, ProfileBook

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CorrectionSettings:
    window: int = 512  # slowdown observations kept per class
    pressure_window: int = 64  # pressure measurements kept per class
    min_observations: int = 64  # fresh observations before a class is refitted
    temperature: float = 0.1
    prior_weight: float = 0.02
    steps: int = 100
    learning_rate: float = 0.5
    min_change: float = 0.03
    slope: float = 1.0

    def __post_init__(self) -> None:
        if self.window < 1 or self.pressure_window < 1 or self.min_observations < 1:
            raise InputError("correction: window, pressure_window, min_observations >= 1")
        if self.temperature <= 0 or self.prior_weight < 0 or self.steps < 0:
            raise InputError("correction: temperature > 0, prior_weight >= 0, steps >= 0")
        if self.learning_rate <= 0 or self.min_change < 0 or self.slope <= 0:
            raise InputError("correction: learning_rate > 0, min_change >= 0, slope > 0")


class _Ring:
    """The newest ``size`` rows of a stream, as one array."""

    def __init__(self, size: int, width: int) -> None:
        self.rows = np.zeros((size, width))
        self.count = 0
        self.next = 0

    def extend(self, rows: FloatArray) -> None:
        size = len(self.rows)
        for row in rows[-size:]:
            self.rows[self.next] = row
            self.next = (self.next + 1) % size
        self.count = min(self.count + len(rows), size)

    def values(self) -> FloatArray:
        values: FloatArray = self.rows[: self.count]
        return values


@dataclass
class _Evidence:
    slowdowns: _Ring  # contention (N columns), then the observed overshoot
    pressure: _Ring
    fresh: int = 0  # slowdown observations since the last refit
    fresh_pressure: int = 0


class LiveProfiles:
    """Profiles corrected from the monitors' observations (see the module
    docstring)."""

    def __init__(self, book: ProfileBook, settings: CorrectionSettings | None = None) -> None:
        self.book = book
        self.settings = settings or CorrectionSettings()
        self._corrected: dict[str, InterferenceProfile] = {}
        self._revisions: dict[str, int] = {}
        self._evidence: dict[str, _Evidence] = {}
        self.corrections = 0

    # ------------------------------------------------------------------ ProfileSource

    def profile(self, job_class: str) -> InterferenceProfile:
        found = self._corrected.get(job_class)
        return found if found is not None else self.book.profile(job_class)

    def revision(self, job_class: str) -> int:
        return self._revisions.get(job_class, 0)

    # ------------------------------------------------------------------ observing

    def _of(self, job_class: str) -> _Evidence:
        evidence = self._evidence.get(job_class)
        if evidence is None:
            settings = self.settings
            evidence = _Evidence(
                _Ring(settings.window, N_RESOURCES + 1),
                _Ring(settings.pressure_window, N_RESOURCES),
            )
            self._evidence[job_class] = evidence
        return evidence

    def observe_slowdown(self, job_class: str, contention: FloatArray, speed: FloatArray) -> None:
        """RUs of ``job_class`` ran at ``speed`` (rows of ``contention``: the
        pressure, as fractions, each saw from its neighbours)."""
        contention = np.atleast_2d(np.asarray(contention, dtype=np.float64))
        speed = np.asarray(speed, dtype=np.float64).reshape(-1)
        if contention.shape != (len(speed), N_RESOURCES):
            raise InputError(f"correction: {contention.shape} contention rows for {len(speed)}")
        if (speed <= 0).any() or (speed > 1 + 1e-9).any():
            raise InputError("correction: speeds must be in (0, 1]")
        evidence = self._of(job_class)
        overshoot = (1.0 / speed - 1.0) / self.settings.slope
        evidence.slowdowns.extend(np.column_stack((contention, overshoot)))
        evidence.fresh += len(speed)

    def observe_pressure(self, job_class: str, caused: FloatArray) -> None:
        """A running job of ``job_class`` exerts ``caused`` on each resource."""
        caused = np.asarray(caused, dtype=np.float64).reshape(-1)
        if caused.shape != (N_RESOURCES,) or (caused < 0).any() or (caused > 1).any():
            raise InputError("correction: a pressure measurement is N fractions in [0, 1]")
        evidence = self._of(job_class)
        evidence.pressure.extend(caused[None, :])
        evidence.fresh_pressure += 1

    # ------------------------------------------------------------------ refitting

    def refit(self) -> list[str]:
        """Refit the classes with enough fresh evidence; the classes republished."""
        changed: list[str] = []
        settings = self.settings
        for job_class, evidence in self._evidence.items():
            refit_tolerance = evidence.fresh >= settings.min_observations
            if not refit_tolerance and not evidence.fresh_pressure:
                continue
            current = self.profile(job_class)
            caused = np.array(current.caused)
            if evidence.fresh_pressure:
                caused = evidence.pressure.values().mean(axis=0)
                evidence.fresh_pressure = 0
            tolerance = np.array(current.tolerance)
            if refit_tolerance:
                rows = evidence.slowdowns.values()
                prior = np.array(self.book.profile(job_class).tolerance)
                tolerance = fit_tolerance(
                    rows[:, :N_RESOURCES], rows[:, N_RESOURCES], tolerance, prior, settings
                )
                evidence.fresh = 0
            moved = max(
                float(np.abs(caused - np.array(current.caused)).max()),
                float(np.abs(tolerance - np.array(current.tolerance)).max()),
            )
            if moved >= settings.min_change:
                self._corrected[job_class] = InterferenceProfile(
                    tuple(np.clip(1.0 - tolerance, 0.0, 1.0)), tuple(np.clip(caused, 0.0, 1.0)),
                    source="corrected",
                )  # fmt: skip
                self._revisions[job_class] = self.revision(job_class) + 1
                self.corrections += 1
                changed.append(job_class)
        return changed


def fit_tolerance(
    contention: FloatArray,
    overshoot: FloatArray,
    start: FloatArray,
    prior: FloatArray,
    settings: CorrectionSettings,
) -> FloatArray:
    """The tolerance explaining ``overshoot`` (one per row of ``contention``),
    near ``prior`` (see the module docstring); batch steps from ``start``.

    Each step compares the prediction ``sum_i max(c_i - t_i, 0)`` with every
    observation: a missing overshoot lowers the tolerances, shared out by a
    softmax (``temperature``) of ``c_i - t_i`` -- the resources that came closest
    to their tolerance, whichever side -- and an excess raises the resources that
    predicted it, in proportion to their part; the mean over the observations is
    applied, with a pull of ``prior_weight`` back to the prior."""
    tau = settings.temperature
    rate = settings.learning_rate
    t = np.clip(np.asarray(start, dtype=np.float64).copy(), 0.0, 1.0)
    count = max(len(overshoot), 1)
    for _ in range(settings.steps):
        gap = contention - t
        excess = np.maximum(gap, 0.0)
        predicted = excess.sum(axis=1)
        error = predicted - overshoot
        under = error < 0.0
        closest = gap[under] / tau
        closest = np.exp(closest - closest.max(axis=1, keepdims=True))
        closest /= closest.sum(axis=1, keepdims=True)
        lower = (-error[under][:, None] * closest).sum(axis=0)
        over = error > 0.0
        part = excess[over] / predicted[over][:, None]
        higher = (error[over][:, None] * part).sum(axis=0)
        step = (higher - lower) / count - settings.prior_weight * (t - prior)
        t = np.clip(t + rate * step, 0.0, 1.0)
    fitted: FloatArray = t
    return fitted
