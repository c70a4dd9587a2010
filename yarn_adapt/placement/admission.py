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
changes and keeps, per bucket, the free RU count (a server the load monitor
closed counts none), the sum of the free RUs'
contention levels (their mean is the bucket's representative), a running centre of
every vector that entered it, and the times at which RUs became free in it. An
update costs O(changed servers); nothing here scans the cluster.

**Assessment** (:meth:`AdmissionControl.assess`, before sampling). The job's
acceptable buckets are those whose centre gives ``U_H >= T_W`` and no overshoot;
with ``good`` free RUs in them the sample size ``R`` is derived for the share
``g = good / free`` -- or the share of acceptable RUs the placer found in its
recent samples for the class, if smaller -- by
:func:`~yarn_adapt.placement.sampling.sample_size`, capped (Tarcil caps it at 32).

**Wait or place** (:meth:`AdmissionControl.decide`, after sampling). When the best
of the ``R x m`` samples would still slow the job (or its neighbours) down -- the
cap kept ``R`` below what the load needs, or no acceptable RU is free -- the
placer asks whether to wait. :func:`wait_or_place` compares the two costs in
seconds of the job's time: placing now costs ``duration x predicted overshoot``
(the job runs ``1 + overshoot`` times slower; harm to neighbours counted in the
same units); waiting costs the wait. The estimate (:meth:`AdmissionControl.
estimate`) is the paper's ``mu + 2 sigma`` of the "time-until-free": offers of
RUs the job's class accepts come at a recent rate (:class:`AppearanceRates`;
only offers of at least the job's ``m`` RUs count); the job needs one, and so do
the ``k - 1`` jobs of its class queued before it, so the estimate is ``(k + 2
sqrt(k)) / rate`` (Poisson: ``mu = k / rate``, ``sigma = sqrt(k) / rate``). The
job queues when the estimate is within its bound -- the cost of placing now, at
most ``max_wait_s`` -- and waits at most the bound; then it is placed with the
largest sample (``cap``), the paper's "scheduled to avoid excessive queueing".
No such offer came lately: the job is placed now. A feedback loop guards
the estimate: when more than ``max_ran_out_share`` of the waits of similar jobs
(same class and size band, :func:`similarity_key`) that ended in the last
``feedback_window_s`` ran out their bound, such jobs are placed now
(:meth:`AdmissionControl.waits_run_out`).

**The queue** (:class:`WaitQueue`): queued jobs by class, oldest first. The node
monitors tell admission control which servers freed RUs; the caller checks those
servers with every class's scorer (the appearances above) and offers them to the
oldest waiting jobs whose class accepts them, so a waiting job is placed as soon
as an acceptable RU frees up, without a scan of the cluster.

Each queued job records (estimate, actual wait, ran out) so the estimate's error
is measured (:meth:`AdmissionControl.wait_records`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace

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
    free_window: int = 256
    appearance_window: int = 1024
    feedback_window_s: float = 60.0
    feedback_min: int = 3
    max_ran_out_share: float = 0.5

    def __post_init__(self) -> None:
        if self.planes < 1 or self.bands < 1:
            raise InputError("admission: planes and bands must be at least 1")
        if not 0 < self.miss_probability < 1:
            raise InputError("admission: miss_probability must be in (0, 1)")
        if self.cap < 1 or self.headroom <= 0 or self.max_wait_s < 0:
            raise InputError("admission: cap and headroom must be positive, max_wait_s >= 0")
        if self.free_window < 2 or self.appearance_window < 2:
            raise InputError("admission: free_window and appearance_window must be at least 2")
        if self.feedback_window_s < 0 or self.feedback_min < 1:
            raise InputError("admission: feedback_window_s >= 0 and feedback_min >= 1")
        if not 0 <= self.max_ran_out_share <= 1:
            raise InputError("admission: max_ran_out_share must be in [0, 1]")


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
        self._free_seen = np.where(state.server_closed, 0, state.server_free)
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
        # per bucket, its servers with free RUs: an indexable set, for sampling
        servers = len(self.server_bucket)
        self._members = np.zeros((buckets, max(servers, 1)), dtype=np.int64)
        self._sizes = np.zeros(buckets, dtype=np.int64)
        self._slot = np.full(servers, -1, dtype=np.int64)
        for server in np.flatnonzero(self._free_seen > 0).tolist():
            self._enlist(server, int(self.server_bucket[server]))
        state.listeners.append(self.note_change)

    def note_change(self, servers: IntArray, now: float) -> None:
        """The state's listener: remember what changed (the servers' contention and
        free counts as they are now). The counters catch up in :meth:`flush` -- off
        the scheduling critical path, as in the paper."""
        state = self.state
        free = np.where(state.server_closed[servers], 0, state.server_free[servers])
        self._pending.append((servers, state.server_levels[servers], free, now))

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
        moves = zip(
            servers.tolist(), old_bucket.tolist(), (old_free > 0).tolist(),
            new_bucket.tolist(), (new_free > 0).tolist(), strict=True,
        )  # fmt: skip
        for server, was_in, was_listed, now_in, listed in moves:
            if was_listed and (not listed or was_in != now_in):
                self._delist(server, was_in)
            if listed and (not was_listed or was_in != now_in):
                self._enlist(server, now_in)
        for bucket, gained in zip(new_bucket.tolist(), (new_free - old_free).tolist(), strict=True):
            for _ in range(max(0, gained)):
                self.free_times[bucket].append(now)

    def _enlist(self, server: int, bucket: int) -> None:
        size = int(self._sizes[bucket])
        self._members[bucket, size] = server
        self._slot[server] = size
        self._sizes[bucket] = size + 1

    def _delist(self, server: int, bucket: int) -> None:
        last_slot = int(self._sizes[bucket]) - 1
        slot = int(self._slot[server])
        last = int(self._members[bucket, last_slot])
        self._members[bucket, slot] = last
        self._slot[last] = slot
        self._slot[server] = -1
        self._sizes[bucket] = last_slot

    def members(self, bucket: int) -> IntArray:
        """The servers of ``bucket`` with free RUs."""
        members: IntArray = self._members[bucket, : int(self._sizes[bucket])].copy()
        return members

    def sample_servers(self, buckets: IntArray, count: int, rng: np.random.Generator) -> IntArray:
        """``count`` servers with free RUs drawn uniformly, with replacement, from
        the members of ``buckets``: O(count), whatever the cluster size."""
        sizes = self._sizes[buckets]
        total = int(sizes.sum())
        if total == 0 or count <= 0:
            return np.empty(0, dtype=np.int64)
        picks = rng.integers(0, total, size=count)
        ends = np.cumsum(sizes)
        which = np.searchsorted(ends, picks, side="right")
        chosen: IntArray = self._members[buckets[which], picks - (ends - sizes)[which]]
        return chosen

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


@dataclass(frozen=True)
class Assessment:
    """Before sampling: the sample size for the share of acceptable free RUs."""

    sample: SampleSize
    good_free: int
    short: bool  # the acceptable buckets hold fewer free RUs than the job needs
    reason: str
    buckets: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


@dataclass(frozen=True)
class WaitDecision:
    """After sampling found no acceptable RUs: wait (at most ``bound_s``) or place."""

    queue: bool
    estimate_s: float | None
    bound_s: float
    cost_now_s: float
    reason: str


def wait_or_place(
    *,
    overshoot: float,
    duration_s: float | None,
    estimate_s: float | None,
    max_wait_s: float,
) -> WaitDecision:
    """The wait-versus-quality decision (see the module docstring): placing now
    costs ``duration x overshoot`` seconds (the whole ``max_wait_s`` when the
    duration is unknown); the job waits when the estimate is within that cost (and
    ``max_wait_s``), and at most that long."""
    cost_now = max_wait_s if duration_s is None else max(duration_s, 0.0) * max(overshoot, 0.0)
    bound = min(cost_now, max_wait_s)
    if bound <= 0.0:
        return WaitDecision(False, estimate_s, 0.0, cost_now, "placing now costs nothing")
    if estimate_s is None:
        return WaitDecision(False, None, bound, cost_now, "no acceptable RU offered lately")
    if estimate_s <= bound:
        why = f"wait about {estimate_s:.3g}s < {cost_now:.3g}s slower now"
        return WaitDecision(True, estimate_s, bound, cost_now, why)
    why = f"wait about {estimate_s:.3g}s > {bound:.3g}s: place now"
    return WaitDecision(False, estimate_s, bound, cost_now, why)


def time_until(count: float, rate: float) -> float:
    """``mu + 2 sigma`` of the time until ``count`` events of a Poisson stream of
    ``rate`` per second: ``(count + 2 sqrt(count)) / rate``."""
    return (count + 2.0 * math.sqrt(count)) / rate


class AppearanceRates:
    """Per class, the recent **offers**: moments when servers that just freed RUs
    (or freed them of contention) held some that one job of the class could take
    with no predicted overshoot, and how many -- the "time-until-free" history of
    Tarcil §4, kept per job class rather than per bucket because acceptability is
    checked with the class's own scorer. A queued job of ``m`` RUs is served by an
    offer of at least ``m`` (it chooses among the freed RUs only), so the rate
    that matters for it counts those offers only. The window is the last
    ``window`` offers (or the time since ``since`` until there are that many)."""

    def __init__(self, window: int, since: float = 0.0) -> None:
        self.window = window
        self.since = since
        self._times: dict[str, FloatArray] = {}
        self._counts: dict[str, IntArray] = {}
        self._seen: dict[str, int] = {}

    def note(self, job_class: str, count: int, now: float) -> None:
        if count <= 0:
            return
        times = self._times.get(job_class)
        if times is None:
            times = self._times[job_class] = np.zeros(self.window)
            self._counts[job_class] = np.zeros(self.window, dtype=np.int64)
        seen = self._seen.get(job_class, 0)
        times[seen % self.window] = now
        self._counts[job_class][seen % self.window] = count
        self._seen[job_class] = seen + 1

    def rate(self, job_class: str, now: float, at_least: int = 1) -> float:
        """Offers of at least ``at_least`` RUs per second lately (0 with none)."""
        seen = self._seen.get(job_class, 0)
        if not seen:
            return 0.0
        counts = self._counts[job_class]
        if seen < self.window:
            span = now - self.since
            offers = int((counts[:seen] >= at_least).sum())
        else:  # the oldest kept offer opens the window
            oldest = seen % self.window
            span = now - float(self._times[job_class][oldest])
            offers = int((counts >= at_least).sum()) - int(counts[oldest] >= at_least)
        return offers / span if span > 0 else 0.0


@dataclass(frozen=True)
class WaitRecord:
    """One queued job's wait: the estimate it queued with, how long it waited, and
    whether it ran out its bound (placed by force) rather than finding RUs."""

    estimate_s: float | None
    waited_s: float
    ran_out: bool


class AdmissionControl:
    """See the module docstring. One instance serves every agent (it reads the
    master state)."""

    def __init__(self, state: RUState, settings: AdmissionSettings | None = None) -> None:
        self.settings = settings or AdmissionSettings()
        self.state = state
        self.hasher = LshHasher(self.settings.planes, self.settings.bands, self.settings.seed)
        self.counters = FreeCounters(state, self.hasher, self.settings.free_window)
        self.appearances = AppearanceRates(self.settings.appearance_window)
        self.queue = WaitQueue()
        self._records: list[WaitRecord] = []
        self._outcomes: dict[tuple[str, int], deque[tuple[float, bool]]] = {}
        self._acceptable_cache: dict[Hashable, tuple[int, IntArray]] = {}

    def assess(
        self,
        ru_count: int,
        acceptable_levels: Callable[[FloatArray], npt.NDArray[np.bool_]],
        *,
        cache_key: Hashable | None = None,
        learned_share: float | None = None,
    ) -> Assessment:
        """The sample size from the acceptable buckets' free RUs (see the module
        docstring). ``acceptable_levels`` says which contention vectors the job
        accepts; jobs passing the same ``cache_key`` (e.g. their class) accept the
        same vectors, so the answer is reused while the bucket centres stay put.
        ``learned_share``: the share of acceptable RUs the placer found among its
        recent samples for the class; the smaller of the two shares sets ``R``
        (a bucket's centre judges the job's own slowdown only, not the harm to
        the RU's neighbours, so the buckets overrate the share)."""
        settings = self.settings
        self.counters.flush()
        total_free = self.state.free_count
        acceptable = self._acceptable_buckets(acceptable_levels, cache_key)
        good = int(self.counters.free[acceptable].sum())
        share = good / total_free if total_free else 0.0
        if learned_share is not None:
            share = min(share, learned_share)
        sample = sample_size(settings.miss_probability, share, cap=settings.cap)
        short = good < settings.headroom * ru_count
        why = f"{good} acceptable free RUs for {ru_count}; R = {sample.r}"
        why += " (capped)" if sample.capped else ""
        return Assessment(sample, good, short, why, acceptable)

    def sample_servers(self, buckets: IntArray, count: int, rng: np.random.Generator) -> IntArray:
        """Servers with free RUs in ``buckets`` (e.g. a job's acceptable ones), drawn
        uniformly with replacement (:meth:`FreeCounters.sample_servers`)."""
        return self.counters.sample_servers(buckets, count, rng)

    def estimate(self, job_class: str, ru_count: int, now: float) -> float | None:
        """``mu + 2 sigma`` of the time until offers of at least ``ru_count`` RUs
        have come for this job and for the jobs of its class queued before it;
        ``None`` when no such offer came lately."""
        rate = self.appearances.rate(job_class, now, at_least=ru_count)
        if rate <= 0.0:
            return None
        return time_until(self.queue.waiting(job_class) + 1, rate)

    def decide(
        self,
        job_class: str,
        ru_count: int,
        *,
        overshoot: float,
        duration_s: float | None,
        now: float,
    ) -> WaitDecision:
        """Wait or place a job whose best sampled RUs predict ``overshoot``."""
        decision = wait_or_place(
            overshoot=overshoot, duration_s=duration_s,
            estimate_s=self.estimate(job_class, ru_count, now),
            max_wait_s=self.settings.max_wait_s,
        )  # fmt: skip
        if decision.queue and self.waits_run_out(job_class, ru_count, now):
            why = "most recent waits of similar jobs ran out: place now"
            return replace(decision, queue=False, reason=why)
        return decision

    def waits_run_out(self, job_class: str, ru_count: int, now: float) -> bool:
        """The feedback loop: did more than ``max_ran_out_share`` of the waits of
        similar jobs (same class, same size band) that ended in the last
        ``feedback_window_s`` run out their bound?"""
        outcomes = self._outcomes.get(similarity_key(job_class, ru_count))
        if not outcomes:
            return False
        settings = self.settings
        while outcomes and outcomes[0][0] < now - settings.feedback_window_s:
            outcomes.popleft()
        if len(outcomes) < settings.feedback_min:
            return False
        ran_out = sum(1 for _, out in outcomes if out)
        return ran_out > settings.max_ran_out_share * len(outcomes)

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

    def flush(self) -> None:
        """Bring the bucket counters up to date (the background updater)."""
        self.counters.flush()

    def enqueue(
        self,
        owner: int,
        job_class: str,
        ru_count: int,
        now: float,
        bound_s: float,
        estimate_s: float | None,
    ) -> None:
        """Hold a job (see :class:`WaitQueue`)."""
        self.queue.add(owner, job_class, ru_count, now, bound_s, estimate_s)

    def dequeue(self, owner: int, now: float, *, ran_out: bool) -> WaitRecord:
        """A queued job leaves: placed on RUs that appeared, or (``ran_out``) by
        force at its bound. Its wait is recorded against its estimate."""
        key = similarity_key(self.queue.class_of(owner), self.queue.ru_count_of(owner))
        entry = self.queue.remove(owner)
        record = WaitRecord(entry.estimate_s, now - entry.queued_at, ran_out)
        self._records.append(record)
        self._outcomes.setdefault(key, deque()).append((now, ran_out))
        return record

    def wait_records(self) -> list[WaitRecord]:
        """Every queued job's wait so far."""
        return list(self._records)

    def estimate_errors(self) -> list[tuple[float, float]]:
        """(estimate, actual wait) of every queued job that had an estimate."""
        return [(r.estimate_s, r.waited_s) for r in self._records if r.estimate_s is not None]


@dataclass
class _Waiting:
    owner: int
    ru_count: int
    queued_at: float
    deadline: float
    estimate_s: float | None


class WaitQueue:
    """Jobs held by admission control, by class, oldest first (see the module
    docstring). Pure bookkeeping: the caller offers freed servers and places."""

    def __init__(self) -> None:
        self._by_class: dict[str, dict[int, _Waiting]] = {}
        self._class_of: dict[int, str] = {}
        self._rus: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._class_of)

    def __contains__(self, owner: object) -> bool:
        return owner in self._class_of

    def add(
        self,
        owner: int,
        job_class: str,
        ru_count: int,
        now: float,
        bound_s: float,
        estimate_s: float | None,
    ) -> None:
        if owner in self._class_of:
            raise InputError(f"admission: job {owner} is already queued")
        entry = _Waiting(owner, ru_count, now, now + bound_s, estimate_s)
        self._by_class.setdefault(job_class, {})[owner] = entry
        self._class_of[owner] = job_class
        self._rus[job_class] = self._rus.get(job_class, 0) + ru_count

    def remove(self, owner: int) -> _Waiting:
        job_class = self._class_of.pop(owner)
        entries = self._by_class[job_class]
        entry = entries.pop(owner)
        self._rus[job_class] -= entry.ru_count
        if not entries:
            del self._by_class[job_class]
        return entry

    def classes(self) -> list[str]:
        return list(self._by_class)

    def oldest(self, job_class: str, count: int) -> list[int]:
        entries = self._by_class.get(job_class, {})
        return [owner for owner, _ in zip(entries, range(count), strict=False)]

    def class_of(self, owner: int) -> str:
        return self._class_of[owner]

    def ru_count_of(self, owner: int) -> int:
        return self._by_class[self._class_of[owner]][owner].ru_count

    def rus_waiting(self, job_class: str) -> int:
        """RUs the queued jobs of ``job_class`` wait for."""
        return self._rus.get(job_class, 0)

    def waiting(self, job_class: str) -> int:
        """How many jobs of ``job_class`` wait."""
        return len(self._by_class.get(job_class, {}))

    def owners(self) -> list[int]:
        return list(self._class_of)


def similarity_key(job_class: str, ru_count: int) -> tuple[str, int]:
    """Jobs alike for the feedback loop: the same class and size band (1, 2-3,
    4-7, 8-15, ... RUs)."""
    return job_class, int(ru_count).bit_length()
