"""Admission control (Tarcil §4): coarse statistics of free RUs by contention, a
queue decision and a wait estimate, without touching the whole cluster state.

**Buckets.** Every free RU of a server sees the same contention vector (its
server's, eq. 3). :class:`LshHasher` hashes such vectors with random hyperplanes
(sign of the dot product with ``planes`` Gaussian normals): vectors at a small
angle -- high cosine similarity -- fall on the same side of every plane, so RUs
contended *in the same resources* share a bucket. Cosine ignores magnitude, and an
RU at 10% and one at 80% of the same pressure mix are not equally good, so each
direction is split further into ``bands`` magnitude bands by the largest level
(our addition). A server with no contention at all has its own bucket, 0.

:class:`FreeCounters` listens to :class:`~yarn_adapt.placement.state.RUState`
changes and keeps, per bucket, the free RU count, the sum of the free RUs'
contention levels (their mean is the bucket's representative), a running centre of
every vector that entered it, and the times at which RUs became free in it. An
update costs O(changed servers); nothing here scans the cluster.

**Decision** (:meth:`AdmissionControl.assess`). The job's acceptable buckets are
those whose centre gives ``U_H >= T_W``. With ``good`` free RUs in them:

* ``good >= headroom * m``: admit, sampling ``R`` per RU for the share
  ``g = good / free`` (:func:`~yarn_adapt.placement.sampling.sample_size`);
* otherwise estimate the wait: ``mu + 2 sigma`` of the waits that similar jobs
  (same class, same size band) saw before, or, with fewer than ``min_history`` of
  those, of the time until the missing RUs free up at the acceptable buckets'
  recent free rate (Poisson: ``mu = k / rate``, ``sigma = sqrt(k) / rate``). A job
  queues if that is within its bound, ``min(max_wait_s, patience x expected
  duration)``, and waits at most the bound; otherwise it is placed now with the
  largest sample (``cap``) -- the paper's "scheduled to avoid excessive queueing".

Each admitted queued job records (estimate, actual wait) so the estimate's error
is measured (:meth:`AdmissionControl.estimate_errors`).
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.profiles import N_RESOURCES
from yarn_adapt.placement.quality import LEVELS
from yarn_adapt.placement.sampling import SampleSize, sample_size
from yarn_adapt.placement.state import RUState

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class AdmissionSettings:
    """Knobs of admission control and of the sample size it sets."""

    planes: int = 4
    bands: int = 4
    seed: int = 0
    miss_probability: float = 1e-3
    cap: int = 32
    headroom: float = 1.0
    max_wait_s: float = 60.0
    patience: float = 0.25
    history: int = 256
    min_history: int = 3
    free_window: int = 256

    def __post_init__(self) -> None:
        if self.planes < 1 or self.bands < 1:
            raise InputError("admission: planes and bands must be at least 1")
        if not 0 < self.miss_probability < 1:
            raise InputError("admission: miss_probability must be in (0, 1)")
        if self.cap < 1 or self.headroom <= 0 or self.max_wait_s < 0 or self.patience < 0:
            raise InputError("admission: cap, headroom, max_wait_s and patience must be positive")


class LshHasher:
    """Random-hyperplane LSH over contention levels, plus magnitude bands."""

    def __init__(self, planes: int, bands: int, seed: int, dim: int = N_RESOURCES) -> None:
        rng = np.random.default_rng(seed)
        self.normals = rng.standard_normal((planes, dim))
        self.bands = bands
        self._bit_values = (1 << np.arange(planes)).astype(np.int64)
        self.bucket_count = 1 + (1 << planes) * bands

    def signature(self, levels: FloatArray) -> IntArray:
        """The side of each hyperplane, as bits: equal signatures <=> no plane
        separates the vectors (the cosine-LSH family)."""
        sides = (np.atleast_2d(levels) @ self.normals.T) >= 0
        signature: IntArray = sides.astype(np.int64) @ self._bit_values
        return signature

    def band(self, levels: FloatArray) -> IntArray:
        peak = np.atleast_2d(levels).max(axis=1)
        band: IntArray = np.minimum((peak * self.bands) // (LEVELS + 1), self.bands - 1).astype(
            np.int64
        )
        return band

    def bucket(self, levels: FloatArray) -> IntArray:
        levels = np.atleast_2d(levels)
        clean = levels.max(axis=1) <= 0
        bucket: IntArray = np.where(
            clean, 0, 1 + self.signature(levels) * self.bands + self.band(levels)
        )
        return bucket


class FreeCounters:
    """Per-bucket free RU counts, representatives and free history (a listener)."""

    def __init__(self, state: RUState, hasher: LshHasher, free_window: int) -> None:
        self.state = state
        self.hasher = hasher
        buckets = hasher.bucket_count
        self.server_bucket = hasher.bucket(state.server_levels)
        self._free_seen = state.server_free.copy()
        self._levels_seen = state.server_levels.copy()
        self.free = np.bincount(
            self.server_bucket, weights=self._free_seen, minlength=buckets
        ).astype(np.int64)
        self.level_sum = np.zeros((buckets, N_RESOURCES))
        np.add.at(self.level_sum, self.server_bucket, self._levels_seen * self._free_seen[:, None])
        self.centre_sum = self.level_sum.copy()
        self.centre_count = self.free.astype(np.float64)
        self.free_times: list[deque[float]] = [deque(maxlen=free_window) for _ in range(buckets)]
        self._pending: list[tuple[IntArray, FloatArray, IntArray, float]] = []
        self._centres = self._fresh_centres()
        self.epoch = 0  # bumps when a published centre moves by a level or more
        state.listeners.append(self.note_change)

    def note_change(self, servers: IntArray, now: float) -> None:
        """The state's listener: remember what changed (the servers' contention and
        free counts as they are now). The counters catch up in :meth:`flush` -- off
        the scheduling critical path, as in the paper."""
        state = self.state
        self._pending.append(
            (servers, state.server_levels[servers], state.server_free[servers], now)
        )

    def flush(self) -> None:
        """Apply the changes noted since the last flush, in order."""
        self.state.settle()
        pending, self._pending = self._pending, []
        for servers, levels, free, now in pending:
            self.on_change(servers, levels, free, now)

    def on_change(
        self, servers: IntArray, levels: FloatArray, new_free: IntArray, now: float
    ) -> None:
        """``servers`` now see contention ``levels`` and have ``new_free`` free RUs."""
        old_bucket = self.server_bucket[servers]
        old_free = self._free_seen[servers]
        np.subtract.at(self.free, old_bucket, old_free)
        np.subtract.at(self.level_sum, old_bucket, self._levels_seen[servers] * old_free[:, None])
        new_bucket = self.hasher.bucket(levels)
        np.add.at(self.free, new_bucket, new_free)
        np.add.at(self.level_sum, new_bucket, levels * new_free[:, None])
        np.add.at(self.centre_sum, new_bucket, levels)
        np.add.at(self.centre_count, new_bucket, 1.0)
        self._publish(new_bucket)
        self.server_bucket[servers] = new_bucket
        self._free_seen[servers] = new_free
        self._levels_seen[servers] = levels
        for bucket, gained in zip(new_bucket.tolist(), (new_free - old_free).tolist(), strict=True):
            for _ in range(max(0, gained)):
                self.free_times[bucket].append(now)

    def centres(self) -> FloatArray:
        """Each bucket's published centre (levels); rows never entered are
        all-``LEVELS`` (the worst, so they never count as acceptable). A centre is
        re-published when its running mean has moved a level or more, and
        :attr:`epoch` counts the re-publications, so callers may cache what they
        derive from the centres per epoch."""
        return self._centres

    def _fresh_centres(self) -> FloatArray:
        seen = self.centre_count > 0
        centres = np.full_like(self.centre_sum, float(LEVELS))
        centres[seen] = self.centre_sum[seen] / self.centre_count[seen, None]
        return centres

    def _publish(self, buckets: IntArray) -> None:
        rows = np.unique(buckets)
        fresh = self.centre_sum[rows] / self.centre_count[rows, None]
        moved = np.abs(fresh - self._centres[rows]).max(axis=1) >= 1.0
        if moved.any():
            self._centres = self._centres.copy()
            self._centres[rows[moved]] = fresh[moved]
            self.epoch += 1

    def free_rate(self, buckets: IntArray, now: float) -> float:
        """RUs per second that became free in ``buckets`` over their recent history."""
        rate = 0.0
        for bucket in buckets.tolist():
            times = self.free_times[bucket]
            if len(times) >= 2 and now > times[0]:
                rate += (len(times) - 1) / (now - times[0])
        return rate


class Verdict(Enum):
    ADMIT = "admit"
    QUEUE = "queue"
    PLACE_NOW = "place-now"  # buckets cannot meet it, but waiting is not worth it


@dataclass(frozen=True)
class Assessment:
    verdict: Verdict
    sample: SampleSize
    good_free: int
    wait_estimate_s: float | None
    bound_s: float | None
    reason: str


@dataclass
class _WaitRecord:
    estimates: list[tuple[float, float]] = field(default_factory=list)


class AdmissionControl:
    """See the module docstring. One instance serves every agent (it reads the
    master state)."""

    def __init__(self, state: RUState, settings: AdmissionSettings | None = None) -> None:
        self.settings = settings or AdmissionSettings()
        self.state = state
        self.hasher = LshHasher(self.settings.planes, self.settings.bands, self.settings.seed)
        self.counters = FreeCounters(state, self.hasher, self.settings.free_window)
        self._waits: dict[tuple[str, int], deque[float]] = defaultdict(
            lambda: deque(maxlen=self.settings.history)
        )
        self._record = _WaitRecord()
        self._acceptable_cache: dict[Hashable, tuple[int, IntArray]] = {}

    def assess(
        self,
        job_class: str,
        ru_count: int,
        acceptable_levels: Callable[[FloatArray], npt.NDArray[np.bool_]],
        now: float,
        expected_duration_s: float | None = None,
        *,
        cache_key: Hashable | None = None,
    ) -> Assessment:
        """Admit, queue or place now (see the module docstring).
        ``acceptable_levels`` says which contention vectors the job accepts (e.g.
        :meth:`QualityKernel.acceptable`); jobs passing the same ``cache_key`` (e.g.
        their class) accept the same vectors, so the answer is reused while the
        bucket centres stay put."""
        settings = self.settings
        self.counters.flush()
        total_free = self.state.free_count
        acceptable = self._acceptable_buckets(acceptable_levels, cache_key)
        good = int(self.counters.free[acceptable].sum())
        share = good / total_free if total_free else 0.0
        sample = sample_size(settings.miss_probability, share, cap=settings.cap)
        if good >= settings.headroom * ru_count:
            return Assessment(Verdict.ADMIT, sample, good, None, None, "enough acceptable RUs")
        missing = math.ceil(settings.headroom * ru_count) - good
        estimate = self._estimate(job_class, ru_count, missing, acceptable, now)
        bound = settings.max_wait_s
        if expected_duration_s is not None:
            bound = min(bound, settings.patience * expected_duration_s)
        if estimate is not None and estimate <= bound:
            return Assessment(
                Verdict.QUEUE, sample, good, estimate, bound,
                f"{good} acceptable free RUs for {ru_count}; wait about {estimate:.3g}s",
            )  # fmt: skip
        capped = sample_size(settings.miss_probability, share, cap=settings.cap)
        forced = SampleSize(
            settings.cap, capped.exact, True, capped.reachable, capped.miss_probability
        )
        why = (
            "no estimate" if estimate is None else f"estimate {estimate:.3g}s > bound {bound:.3g}s"
        )
        return Assessment(Verdict.PLACE_NOW, forced, good, estimate, bound, why)

    def _acceptable_buckets(
        self,
        acceptable_levels: Callable[[FloatArray], npt.NDArray[np.bool_]],
        key: Hashable | None,
    ) -> IntArray:
        """The buckets whose centre the job accepts, cached per ``key`` and epoch."""
        epoch = self.counters.epoch
        cached = self._acceptable_cache.get(key) if key is not None else None
        if cached is not None and cached[0] == epoch:
            return cached[1]
        buckets = np.flatnonzero(acceptable_levels(self.counters.centres()))
        if key is not None:
            self._acceptable_cache[key] = (epoch, buckets)
        return buckets

    def _estimate(
        self, job_class: str, ru_count: int, missing: int, acceptable: IntArray, now: float
    ) -> float | None:
        history = self._waits[_similarity_key(job_class, ru_count)]
        if len(history) >= self.settings.min_history:
            waits = np.asarray(history)
            return float(waits.mean() + 2.0 * waits.std())
        rate = self.counters.free_rate(acceptable, now)
        if rate <= 0.0:
            return None
        return (missing + 2.0 * math.sqrt(missing)) / rate

    def flush(self) -> None:
        """Bring the bucket counters up to date (the background updater)."""
        self.counters.flush()

    def record_wait(
        self, job_class: str, ru_count: int, waited_s: float, estimate_s: float
    ) -> None:
        """A queued job was admitted after ``waited_s``: learn from it and keep the
        estimate's error."""
        self._waits[_similarity_key(job_class, ru_count)].append(waited_s)
        self._record.estimates.append((estimate_s, waited_s))

    def estimate_errors(self) -> list[tuple[float, float]]:
        """(estimate, actual wait) of every queued job admitted so far."""
        return list(self._record.estimates)


def _similarity_key(job_class: str, ru_count: int) -> tuple[str, int]:
    return job_class, int(ru_count).bit_length()
