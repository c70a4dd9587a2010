"""What every placement policy works with: a job to place (:class:`PlacementJob`, its
locality wish), the outcome (:class:`Placement`), the :class:`Placer` protocol and
:class:`CheckedPlacer`, the opening every placer shares (a job no server could ever
hold is unplaceable before any policy looks at it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.view import PlacementView

IntArray = npt.NDArray[np.int64]


FloatArray = npt.NDArray[np.float64]


NO_RUS: IntArray = np.empty(0, dtype=np.int64)


NO_QUALITY: FloatArray = np.empty(0)


class Locality(Enum):
    ANY = "any"
    SAME_SERVER = "same-server"
    SPREAD = "spread"


@dataclass(frozen=True)
class PlacementJob:
    """What a placer needs to know about a job (or a stage of one)."""

    id: str
    job_class: str
    ru_count: int = 1
    locality: Locality = Locality.ANY
    preferred_servers: tuple[int, ...] = ()
    preferred_racks: tuple[int, ...] = ()
    expected_duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.ru_count < 1:
            raise InputError(f"job {self.id}: needs at least one RU, asked for {self.ru_count}")

    def needing(self, ru_count: int) -> PlacementJob:
        """The same job asking for fewer RUs (after a partial commit)."""
        return PlacementJob(
            self.id, self.job_class, ru_count, self.locality, self.preferred_servers,
            self.preferred_racks, self.expected_duration_s,
        )  # fmt: skip


class Outcome(Enum):
    PLACED = "placed"
    QUEUED = "queued"  # admission control: wait for better RUs
    NO_ROOM = "no-room"  # fewer free RUs than asked: wait for any
    REJECTED = "rejected"  # can never fit this cluster


@dataclass(frozen=True)
class Placement:
    outcome: Outcome
    rus: IntArray = field(default_factory=lambda: NO_RUS)
    quality: FloatArray = field(default_factory=lambda: NO_QUALITY)
    sample_size: int = 0
    reason: str = ""
    wait_estimate_s: float | None = None
    wait_bound_s: float | None = None
    own_overshoot: float = 0.0  # predicted slowdown of the job on these RUs (worst RU)
    harm: float = 0.0  # predicted overshoot pushed onto their occupants (worst RU)
    acceptable_share: float | None = None  # of the candidates looked at

    @property
    def placed(self) -> bool:
        return self.outcome is Outcome.PLACED

    @property
    def overshoot(self) -> float:
        return self.own_overshoot + self.harm


class Placer(Protocol):
    name: str

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
        offered: IntArray | None = None,
    ) -> Placement:
        """Where ``job`` goes now. ``force``: skip admission queueing (the job's
        wait bound has passed). ``offered``: servers that just freed RUs the job
        accepts (admission control's wake-up); their free RUs join the
        candidates."""
        ...


def unplaceable_outcome(job: PlacementJob, view: PlacementView) -> Placement | None:
    if view.ru_count == 0:
        return Placement(Outcome.REJECTED, reason="the cluster has no resource units")
    if job.ru_count > view.ru_count:
        why = f"job {job.id} asks for {job.ru_count} RUs; the cluster has {view.ru_count}"
        return Placement(Outcome.REJECTED, reason=why)
    if job.ru_count > view.free_count:
        why = f"{view.free_count} free RUs for {job.ru_count}"
        return Placement(Outcome.NO_ROOM, reason=why)
    return None


class CheckedPlacer:
    """The opening every placer here shares: a job the cluster cannot hold, now or
    ever (:func:`unplaceable_outcome`), is answered before the policy runs. A policy that
    admits, forces or takes offered RUs overrides :meth:`_place`; the others
    :meth:`_pick`."""

    name: str

    def place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float = 0.0,
        *,
        force: bool = False,
        offered: IntArray | None = None,
    ) -> Placement:
        """See :meth:`Placer.place`."""
        unplaceable = unplaceable_outcome(job, view)
        if unplaceable is not None:
            return unplaceable
        return self._place(job, view, rng, now, force=force, offered=offered)

    def _place(
        self,
        job: PlacementJob,
        view: PlacementView,
        rng: np.random.Generator,
        now: float,
        *,
        force: bool,
        offered: IntArray | None,
    ) -> Placement:
        return self._pick(job, view, rng)

    def _pick(self, job: PlacementJob, view: PlacementView, rng: np.random.Generator) -> Placement:
        raise NotImplementedError(f"{type(self).__name__} places no job")
