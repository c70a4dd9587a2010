"""Interference profiles of job classes, and how they are learned.

A profile says, for each shared resource of a server (:data:`RESOURCES`), how much a
job of the class **suffers** from pressure there (``sensitivity``) and how much
pressure it **causes** (``caused``). Both are fractions in ``[0, 1]`` -- Tarcil §3.2
writes them as percentages ``0..99`` of microbenchmark pressure; a job tolerates
pressure up to ``1 - sensitivity`` on each resource (the paper's ``t_i = 99 - c_i``
is the special case ``sensitivity == caused``).

Profiles come from measurements (:class:`ProbeMeasurement`): Quasar-style probes in
which a microbenchmark pushes one resource until the job's performance drops (the
tolerated pressure, hence the sensitivity), or measures the pressure the job exerts.
A class with every entry measured gets the mean of its measurements. A class with
only a few probes is completed by collaborative filtering (:func:`complete_matrix`:
an SVD start refined by gradient steps on the known entries, the "PQ
reconstruction" of Paragon/Quasar that Tarcil relies on): the known classes form a low-rank matrix
of classes x (sensitivities, caused); the new class's missing entries come from its
similarity, on the probed entries, to the classes seen before.

**Default for a class never seen** (:meth:`ProfileBook.profile`): the element-wise
mean of the known profiles, marked ``source="default"``. It places an unknown job as
an average job -- neither on the cleanest servers (which a conservative maximum
would demand, starving known sensitive jobs) nor anywhere at all. A book with no
profiles at all uses :data:`NEUTRAL_PROFILE` (0.5 everywhere).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError

RESOURCES: tuple[str, ...] = ("cpu", "memory_bandwidth", "llc", "disk_io", "network")
N_RESOURCES = len(RESOURCES)

ProfileOrigin = Literal["measured", "completed", "default", "corrected"]
ProbeKind = Literal["sensitivity", "caused"]
FloatArray = npt.NDArray[np.float64]


class ProfileError(InputError):
    """A profile or a probe measurement is malformed (wrong length, out of range)."""


def _checked_vector(values: Sequence[float], what: str) -> tuple[float, ...]:
    if len(values) != N_RESOURCES:
        raise ProfileError(f"{what}: {len(values)} values, expected {N_RESOURCES} ({RESOURCES})")
    for name, value in zip(RESOURCES, values, strict=True):
        if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0):
            raise ProfileError(f"{what}: {name}={value!r} is not a fraction in [0, 1]")
    return tuple(float(v) for v in values)


@dataclass(frozen=True)
class InterferenceProfile:
    """How a job class suffers from and causes pressure on each shared resource."""

    sensitivity: tuple[float, ...]
    caused: tuple[float, ...]
    source: ProfileOrigin = "measured"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", _checked_vector(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "caused", _checked_vector(self.caused, "caused"))

    @classmethod
    def symmetric(cls, caused: Sequence[float]) -> InterferenceProfile:
        """Tarcil's simplification: a job is as sensitive as it is aggressive."""
        return cls(tuple(caused), tuple(caused))

    @property
    def tolerance(self) -> tuple[float, ...]:
        """The pressure the job tolerates on each resource."""
        return tuple(1.0 - s for s in self.sensitivity)

    def as_row(self) -> FloatArray:
        return np.array(self.sensitivity + self.caused, dtype=np.float64)


NEUTRAL_PROFILE = InterferenceProfile((0.5,) * N_RESOURCES, (0.5,) * N_RESOURCES, "default")


@dataclass(frozen=True)
class ProfileBook:
    """Profiles by job class, with the documented default for classes never seen."""

    profiles: Mapping[str, InterferenceProfile] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", dict(self.profiles))
        object.__setattr__(self, "_default", _mean_profile(self.profiles.values()))

    def profile(self, job_class: str) -> InterferenceProfile:
        """The class's profile, or the default (see the module docstring)."""
        found = self.profiles.get(job_class)
        return found if found is not None else self.default

    @property
    def default(self) -> InterferenceProfile:
        default: InterferenceProfile = self.__dict__["_default"]
        return default

    def __contains__(self, job_class: object) -> bool:
        return job_class in self.profiles

    def revision(self, job_class: str) -> int:
        """A book never changes: every profile is at revision 0."""
        return 0


class ProfileSource(Protocol):
    """Where placers read profiles: a fixed :class:`ProfileBook`, or one that the
    load monitors correct while jobs run
    (:class:`~yarn_adapt.placement.correction.LiveProfiles`). ``revision`` changes
    whenever the class's profile does, so readers may cache what they derive."""

    def profile(self, job_class: str) -> InterferenceProfile: ...

    def revision(self, job_class: str) -> int: ...


def _mean_profile(profiles: Iterable[InterferenceProfile]) -> InterferenceProfile:
    rows = [p.as_row() for p in profiles]
    if not rows:
        return NEUTRAL_PROFILE
    mean = np.mean(rows, axis=0)
    return InterferenceProfile(
        tuple(mean[:N_RESOURCES]), tuple(mean[N_RESOURCES:]), source="default"
    )


# --------------------------------------------------------------------------- learning


@dataclass(frozen=True)
class ProbeMeasurement:
    """One measured entry of a class's profile (from a probe or a full profiling run)."""

    job_class: str
    resource: str
    kind: ProbeKind
    value: float

    def __post_init__(self) -> None:
        where = f"probe {self.job_class}/{self.resource}/{self.kind}"
        if self.resource not in RESOURCES:
            raise ProfileError(f"{where}: unknown resource (known: {', '.join(RESOURCES)})")
        if self.kind not in ("sensitivity", "caused"):
            raise ProfileError(f"{where}: kind must be 'sensitivity' or 'caused'")
        value = self.value
        if not (isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1):
            raise ProfileError(f"{where}: value {value!r} is not a fraction in [0, 1]")

    @property
    def column(self) -> int:
        offset = 0 if self.kind == "sensitivity" else N_RESOURCES
        return offset + RESOURCES.index(self.resource)


@dataclass(frozen=True)
class CompletionSettings:
    """Matrix completion (SVD start, then SGD on the observed entries)."""

    rank: int = 3
    epochs: int = 500
    learning_rate: float = 0.05
    regularisation: float = 0.02
    seed: int = 0  # kept for callers; the passes are deterministic


def measurements_of(profiles: Mapping[str, InterferenceProfile]) -> list[ProbeMeasurement]:
    """Every entry of fully known profiles as measurements (the training rows)."""
    out: list[ProbeMeasurement] = []
    for job_class, profile in profiles.items():
        for i, resource in enumerate(RESOURCES):
            out.append(ProbeMeasurement(job_class, resource, "sensitivity", profile.sensitivity[i]))
            out.append(ProbeMeasurement(job_class, resource, "caused", profile.caused[i]))
    return out


def learn_profiles(
    measurements: Iterable[ProbeMeasurement], settings: CompletionSettings | None = None
) -> ProfileBook:
    """Profiles for every class named in ``measurements``.

    Entries measured several times are averaged. Classes with every entry measured
    keep their measurements (``source="measured"``); the others are completed by
    :func:`complete_matrix` (``source="completed"``), measured entries kept as
    measured."""
    cells: dict[tuple[str, int], list[float]] = defaultdict(list)
    for m in measurements:
        cells[(m.job_class, m.column)].append(m.value)
    classes = sorted({job_class for job_class, _ in cells})
    if not classes:
        return ProfileBook({})
    observed = np.full((len(classes), 2 * N_RESOURCES), np.nan)
    for (job_class, column), values in cells.items():
        observed[classes.index(job_class), column] = float(np.mean(values))
    completed = complete_matrix(observed, settings or CompletionSettings())
    book: dict[str, InterferenceProfile] = {}
    for row, job_class in enumerate(classes):
        full = not np.isnan(observed[row]).any()
        values = np.where(np.isnan(observed[row]), completed[row], observed[row])
        book[job_class] = InterferenceProfile(
            tuple(values[:N_RESOURCES]),
            tuple(values[N_RESOURCES:]),
            source="measured" if full else "completed",
        )
    return ProfileBook(book)


def complete_matrix(observed: FloatArray, settings: CompletionSettings) -> FloatArray:
    """Fill the NaN entries of ``observed`` (classes x features, values in [0, 1]).

    Start: missing entries set to their column mean, then a rank-``k`` truncated
    SVD gives the factors P (classes x k) and Q (features x k). Gradient steps then
    fit ``P Q^T + column mean`` to the observed entries only, with L2
    regularisation (the PQ reconstruction of Paragon/Quasar; each epoch is one
    full pass over the observed entries, vectorised). Result clipped to [0, 1]. A
    column with no observation at all falls back to 0.5."""
    mask = ~np.isnan(observed)
    column_mean = _column_means(observed, mask)
    centred = np.where(mask, observed - column_mean, 0.0)
    rank = max(1, min(settings.rank, *centred.shape))
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    p = u[:, :rank] * np.sqrt(s[:rank])
    q = vt[:rank].T * np.sqrt(s[:rank])
    rate, penalty = settings.learning_rate, settings.regularisation
    for _ in range(settings.epochs):
        error = np.where(mask, centred - p @ q.T, 0.0)
        p, q = p + rate * (error @ q - penalty * p), q + rate * (error.T @ p - penalty * q)
    result: FloatArray = np.clip(p @ q.T + column_mean, 0.0, 1.0)
    return result


def _column_means(observed: FloatArray, mask: npt.NDArray[np.bool_]) -> FloatArray:
    counts = mask.sum(axis=0)
    sums = np.where(mask, observed, 0.0).sum(axis=0)
    means: FloatArray = np.where(counts > 0, sums / np.maximum(counts, 1), 0.5)
    return means


# --------------------------------------------------------------------------- caution

UNCERTAIN_ORIGINS: frozenset[str] = frozenset({"completed", "default"})


@dataclass(frozen=True)
class CautiousProfiles:
    """A :class:`ProfileSource` that reads a completed or default profile (filled in
    from a few probes, or a class never seen) as more sensitive than it looks:
    ``margin`` more sensitivity on every resource (less tolerance), until it is
    measured or corrected. A placer then keeps such a job, and the jobs it would
    sit beside, off the contention a completion error would have hidden -- the
    quality floor for uncertain profiles (at 100 servers, margin 0.2 lowered
    the worst degradation 0.46 -> 0.27 and 0.30 -> 0.24 on two seeds, mean
    performance unchanged within 0.2%). ``margin = 0`` changes nothing."""

    source: ProfileSource
    margin: float = 0.2

    def __post_init__(self) -> None:
        if not (math.isfinite(self.margin) and 0.0 <= self.margin <= 1.0):
            raise ProfileError(f"profile caution margin {self.margin!r} is not in [0, 1]")

    def profile(self, job_class: str) -> InterferenceProfile:
        found = self.source.profile(job_class)
        if self.margin <= 0.0 or found.source not in UNCERTAIN_ORIGINS:
            return found
        sensitivity = tuple(min(1.0, s + self.margin) for s in found.sensitivity)
        return InterferenceProfile(sensitivity, found.caused, found.source)

    def revision(self, job_class: str) -> int:
        return self.source.revision(job_class)
