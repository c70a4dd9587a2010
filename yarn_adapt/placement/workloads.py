"""Workloads for the RU cluster model: interference classes, a synthetic mix of short
tasks and long jobs, and the same from a trace.

**Classes** (:func:`synthetic_classes`). Real interference profiles are low rank
(Paragon/Quasar's premise: a few behaviours -- compute, memory, storage, network --
mixed), so the true profiles are random mixtures of four archetypes, at a light or
heavy intensity, with per-class noise; sensitivity is the caused vector with its
own noise (jobs that cause pressure mostly suffer from it too, Tarcil §3.2).
The scheduler does not see them: :func:`profiled_book` measures some classes fully
and the rest with a few probes only, then completes them by collaborative
filtering, as the paper does for new applications.

**Synthetic mix** (:func:`synthetic_jobs`), after Tarcil §6: short Spark-like tasks
(1 RU, 0.1-2 s), medium Spark stages (2-8 RUs, 1-10 s, a third of them with data
on 3 preferred servers), long Hadoop jobs (4-16 RUs, 30-300 s) and latency-critical
services (1-4 RUs spread over servers, 300-1200 s). Poisson arrivals at the rate
that offers the target load: ``rate = load x RUs / E[RU-seconds per job]``.

**Traces** (:func:`trace_jobs`): any format ``load_trace`` reads. A job becomes one
request of ``min(tasks, max_rus)`` RUs for ``total task seconds / RUs`` (its tasks
in waves on those RUs); its class comes from a stable hash of its id. Arrival times
are rescaled so the trace offers the target load on the cluster, and the trace is
replayed again (shifted) until the wanted horizon is covered.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError, TraceError
from yarn_adapt.placement.jobs import Locality, PlacementJob
from yarn_adapt.placement.profiles import (
    N_RESOURCES,
    RESOURCES,
    CompletionSettings,
    InterferenceProfile,
    ProbeMeasurement,
    ProfileBook,
    learn_profiles,
    measurements_of,
)

FloatArray = npt.NDArray[np.float64]

# cpu, memory bandwidth, LLC, disk I/O, network
ARCHETYPES: dict[str, tuple[float, ...]] = {
    "compute": (0.85, 0.10, 0.35, 0.00, 0.05),
    "memory": (0.30, 0.85, 0.70, 0.00, 0.05),
    "storage": (0.20, 0.10, 0.10, 0.85, 0.30),
    "network": (0.20, 0.10, 0.20, 0.10, 0.85),
}


@dataclass(frozen=True)
class JobArrival:
    """A job the model submits: when, what, and how long it runs on clean RUs."""

    job: PlacementJob
    arrival_s: float
    duration_s: float


@dataclass(frozen=True)
class Kind:
    """One kind of job in the synthetic mix."""

    name: str
    weight: float
    rus: tuple[int, int]
    duration_s: tuple[float, float]
    locality: Locality = Locality.ANY
    data_local_share: float = 0.0

    @property
    def mean_ru_seconds(self) -> float:
        low, high = self.duration_s
        mean_duration = (high - low) / math.log(high / low) if high > low else low
        return (self.rus[0] + self.rus[1]) / 2.0 * mean_duration


MIX: tuple[Kind, ...] = (
    Kind("short", 0.60, (1, 1), (0.1, 2.0)),
    Kind("medium", 0.28, (2, 8), (1.0, 10.0), data_local_share=1 / 3),
    Kind("long", 0.10, (4, 16), (30.0, 300.0)),
    Kind("service", 0.02, (1, 4), (300.0, 1200.0), Locality.SPREAD),
)


def synthetic_classes(count: int, seed: int) -> dict[str, InterferenceProfile]:
    """``count`` true class profiles (see the module docstring)."""
    if count < 1:
        raise InputError("need at least one interference class")
    rng = np.random.default_rng(seed)
    basis = np.array(list(ARCHETYPES.values()))
    classes: dict[str, InterferenceProfile] = {}
    for index in range(count):
        mix = rng.dirichlet(np.full(len(basis), 0.4))
        intensity = rng.choice([0.35, 0.6, 0.9], p=[0.4, 0.35, 0.25])
        caused = np.clip(intensity * (mix @ basis) / (mix @ basis).max()
                         + rng.normal(0, 0.04, N_RESOURCES), 0.0, 1.0)  # fmt: skip
        sensitivity = np.clip(caused * rng.uniform(0.8, 1.2, N_RESOURCES), 0.0, 1.0)
        classes[f"c{index:02d}"] = InterferenceProfile(tuple(sensitivity), tuple(caused))
    return classes


def profiled_book(
    truth: dict[str, InterferenceProfile],
    *,
    new_share: float,
    probes: int,
    noise: float,
    seed: int,
) -> ProfileBook:
    """What the scheduler knows: ``1 - new_share`` of the classes fully measured
    (with noise), the others by ``probes`` random entries each, completed by
    collaborative filtering."""
    rng = np.random.default_rng(seed)
    names = sorted(truth)
    new = set(rng.choice(names, size=round(new_share * len(names)), replace=False).tolist())
    measured: list[ProbeMeasurement] = []
    for name in names:
        noisy = _noisy(truth[name], noise, rng)
        entries = measurements_of({name: noisy})
        if name in new:
            keep = rng.choice(len(entries), size=min(probes, len(entries)), replace=False)
            entries = [entries[int(i)] for i in keep]
        measured.extend(entries)
    return learn_profiles(measured, CompletionSettings(seed=seed))


def _noisy(
    profile: InterferenceProfile, noise: float, rng: np.random.Generator
) -> InterferenceProfile:
    row = np.clip(profile.as_row() + rng.normal(0, noise, 2 * N_RESOURCES), 0.0, 1.0)
    return InterferenceProfile(tuple(row[:N_RESOURCES]), tuple(row[N_RESOURCES:]))


def profile_error(book: ProfileBook, truth: dict[str, InterferenceProfile]) -> float:
    """Mean absolute error of the book's profiles against the truth."""
    errors = [np.abs(book.profile(name).as_row() - p.as_row()).mean() for name, p in truth.items()]
    return float(np.mean(errors)) if errors else 0.0


def mean_ru_seconds(mix: Sequence[Kind]) -> float:
    total = sum(kind.weight for kind in mix)
    return sum(kind.weight * kind.mean_ru_seconds for kind in mix) / total


def synthetic_jobs(
    *,
    classes: Sequence[str],
    rus: int,
    servers: int,
    racks: int,
    load: float,
    horizon_s: float,
    seed: int,
    mix: Sequence[Kind] = MIX,
    start_s: float = 0.0,
) -> list[JobArrival]:
    """Poisson arrivals of the mix offering ``load`` of ``rus`` over the horizon."""
    rng = np.random.default_rng(seed)
    rate = load * rus / mean_ru_seconds(mix)
    count = int(rng.poisson(rate * horizon_s))
    times = np.sort(rng.uniform(start_s, start_s + horizon_s, size=count))
    return [
        draw_job(f"j{i}", float(t), classes, servers, racks, rng, mix)
        for i, t in enumerate(times.tolist())
    ]


def draw_job(
    job_id: str,
    arrival_s: float,
    classes: Sequence[str],
    servers: int,
    racks: int,
    rng: np.random.Generator,
    mix: Sequence[Kind] = MIX,
    weights: FloatArray | None = None,
) -> JobArrival:
    """One job of the mix (kinds drawn by ``weights``, default the mix's)."""
    probabilities = weights if weights is not None else np.array([k.weight for k in mix])
    kind = mix[int(rng.choice(len(mix), p=probabilities / probabilities.sum()))]
    ru_count = int(rng.integers(kind.rus[0], kind.rus[1] + 1))
    low, high = kind.duration_s
    duration = float(math.exp(rng.uniform(math.log(low), math.log(high))))
    preferred: tuple[int, ...] = ()
    if servers and rng.random() < kind.data_local_share:
        preferred = tuple(int(s) for s in rng.choice(servers, size=min(3, servers), replace=False))
    job = PlacementJob(
        job_id, str(rng.choice(classes)), ru_count, kind.locality, preferred,
        expected_duration_s=duration,
    )  # fmt: skip
    return JobArrival(job, arrival_s, duration)


def resident_weights(mix: Sequence[Kind]) -> FloatArray:
    """Kind weights of the jobs *running* at a random instant (length-biased by
    RU-seconds), for a warm start at steady state."""
    weights = np.array([k.weight * k.mean_ru_seconds for k in mix])
    result: FloatArray = weights / weights.sum()
    return result


def trace_jobs(
    path: Path,
    *,
    classes: Sequence[str],
    rus: int,
    load: float,
    horizon_s: float,
    max_rus: int,
    seed: int,
    lenient: bool = False,
) -> list[JobArrival]:
    """Jobs of a trace (any ``load_trace`` format), rescaled to offer ``load``."""
    from yarn_adapt.workload import load_trace

    workload = load_trace(path, lenient=lenient, seed=seed)
    shapes = [
        (job.submit_s, min(len(job.tasks), max_rus), job.total_task_seconds, job.id)
        for job in workload.jobs
        if job.tasks and job.total_task_seconds > 0
    ]
    if not shapes:
        raise TraceError(str(path), 1, "no job with tasks and a positive duration")
    first = min(s[0] for s in shapes)
    span = max(max(s[0] for s in shapes) - first, 1.0)
    offered = sum(s[2] for s in shapes)  # RU-seconds (each task one RU)
    stretch = offered / (load * rus * span)  # time scale that offers `load`
    period = span * stretch
    jobs: list[JobArrival] = []
    for cycle in range(max(1, math.ceil(horizon_s / period))):
        for submit, ru_count, task_seconds, job_id in shapes:
            at = (submit - first) * stretch + cycle * period
            if at >= horizon_s:
                continue
            duration = max(task_seconds / ru_count, 0.01)
            job = PlacementJob(
                f"{job_id}#{cycle}", _class_of(job_id, classes), ru_count,
                expected_duration_s=duration,
            )  # fmt: skip
            jobs.append(JobArrival(job, at, duration))
    jobs.sort(key=lambda a: a.arrival_s)
    return jobs


def _class_of(job_id: str, classes: Sequence[str]) -> str:
    digest = hashlib.sha256(job_id.encode()).digest()
    return classes[int.from_bytes(digest[:4], "big") % len(classes)]


__all__ = ["RESOURCES", "JobArrival", "Kind", "synthetic_classes", "synthetic_jobs", "trace_jobs"]
