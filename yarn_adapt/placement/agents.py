"""Scheduling agents over one shared cluster state (Tarcil §5.1).

:class:`SharedState` is the master copy. Its :meth:`~SharedState.try_commit` is the
atomic write: under one lock it takes every requested RU that is still free and
reports the others as conflicts -- so no RU is ever given twice, whatever the
agents believed.

:class:`SchedulingAgent` keeps a **local copy** of the state: a full copy at start,
then every ``sync_interval_s`` (plus a random offset so agents do not sync in step)
it applies the master's change feed -- the servers changed since its last read --
and it notes its own commits at once (as taken; their contention arrives with the
next feed). (The paper re-syncs fully every 5-10 s and
keeps the copy "updated frequently" in between; the feed is that update, and its
interval sets how stale a copy gets.) It samples and chooses on the
local copy, which may be stale: RUs another agent took since the last sync can be
chosen, and the commit reports them. The agent then re-reads the servers where it
conflicted and samples again for the RUs still missing (incremental transactions:
the RUs it did get are kept), up to ``max_retries`` times; if the job is still
short, everything it took is given back and the job waits, as one with no room.

In the bench the agents are simulated: jobs are dealt to agents in turn (the
cluster front-end's load balancing) and each decision is instantaneous in
simulated time, so conflicts come only from stale local copies, as between real
agents between syncs. The lock makes the master safe for real threads too (the
tests run agents on threads).

:class:`DirectScheduler` is one centralised scheduler that reads the master state
itself (no copy, no conflicts): the greedy optimum, YARN, least-loaded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.jobs import Outcome, Placement, PlacementJob, Placer
from yarn_adapt.placement.state import FREE, RUState

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
_NO_RUS: IntArray = np.empty(0, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Tenant:
    """What a job puts on each of its RUs: the pressure it causes (measured by the
    node monitors once it runs) and what the scheduler believes it tolerates."""

    caused: FloatArray
    tolerance: FloatArray


@dataclass(frozen=True)
class AgentSettings:
    agents: int = 10
    sync_interval_s: float = 0.1
    sync_jitter: float = 0.2
    max_retries: int = 8
    check_quality: bool = False  # refuse commits on servers grown more contended (try_commit)

    def __post_init__(self) -> None:
        if self.agents < 1 or self.sync_interval_s < 0 or self.max_retries < 0:
            raise InputError("agents: need >= 1 agent, sync_interval_s >= 0, max_retries >= 0")


@dataclass
class CommitStats:
    commits: int = 0
    conflicted_commits: int = 0
    conflicted_rus: int = 0
    retries: int = 0
    gave_up: int = 0
    stale_commits: int = 0  # commits that met a server more contended than the agent saw
    stale_rus: int = 0

    @property
    def conflict_rate(self) -> float:
        """Share of commit attempts that met at least one taken RU."""
        return self.conflicted_commits / self.commits if self.commits else 0.0

    @property
    def stale_rate(self) -> float:
        """Share of commit attempts refused, in part, for a stale quality."""
        return self.stale_commits / self.commits if self.commits else 0.0


# A commit is refused where a server's contention per RU (eq. 3) rose by at least
# this much on some resource since the agent's copy: one of the paper's levels.
STALE_STEP = 1.0 / 99.0


class SharedState:
    """The master copy of the cluster state, with atomic commits."""

    def __init__(self, state: RUState) -> None:
        self.state = state
        self.stats = CommitStats()
        self._lock = threading.Lock()
        # the change feed: servers changed by each commit or release, in order
        self._log: list[IntArray] = []
        self._base = 0
        self._cursors: dict[int, int] = {}
        state.listeners.append(self._record)

    def _record(self, servers: IntArray, now: float) -> None:
        if self._cursors:  # someone follows the feed
            self._log.append(servers)

    def try_commit(
        self,
        rus: IntArray,
        owner: int,
        tenant: Tenant,
        now: float = 0.0,
        *,
        seen: RUState | None = None,
    ) -> tuple[IntArray, IntArray]:
        """Take each of ``rus`` that is still free for ``owner``; return (taken,
        conflicting). With ``seen`` (the agent's copy the choice was made on), an
        RU also conflicts when its server has grown more contended than the copy
        says (by :data:`STALE_STEP` on some resource): the quality the agent chose
        it for no longer holds -- another agent, or its own last job, placed there
        since its last sync. The pressure sums compared are the master's own,
        current at every commit (no settling on the critical path)."""
        rus = np.asarray(rus, dtype=np.int64)
        if len(rus) > 1:
            rus = np.unique(rus)
        with self._lock:
            free = self.state.occupant[rus] == FREE
            stale = np.zeros(len(rus), dtype=bool)
            if seen is not None:
                servers = self.state.ru_server[rus]
                rose = self.state.server_caused[servers] - seen.server_caused[servers]
                per_ru = rose / self.state.server_neighbours_of(servers)[:, None]
                stale = free & (per_ru >= STALE_STEP).any(axis=1)
            ok = free & ~stale
            taken, conflicting = rus[ok], rus[~ok]
            if len(taken):
                self.state.occupy(taken, owner, tenant.caused, tenant.tolerance, now)
            self.stats.commits += 1
            if (~free).any():
                self.stats.conflicted_commits += 1
                self.stats.conflicted_rus += int((~free).sum())
            if stale.any():
                self.stats.stale_commits += 1
                self.stats.stale_rus += int(stale.sum())
        return taken, conflicting

    def release(self, rus: IntArray, now: float = 0.0) -> None:
        with self._lock:
            self.state.release(rus, now)

    def set_closed(self, servers: IntArray, closed: bool, now: float = 0.0) -> None:
        """The load monitor closes (or reopens) servers to new work."""
        with self._lock:
            self.state.set_closed(servers, closed, now)

    def retolerate(self, rus: IntArray, tolerance: FloatArray, now: float = 0.0) -> None:
        """A corrected profile: what the occupants of ``rus`` tolerate."""
        with self._lock:
            self.state.retolerate(rus, tolerance, now)

    def snapshot(self, reader: int) -> RUState:
        """A full copy for ``reader``, who then follows the change feed."""
        with self._lock:
            self._cursors[reader] = self._base + len(self._log)
            return self.state.copy()

    def catch_up(self, reader: int, local: RUState) -> None:
        """Bring ``reader``'s copy up to date with the changes since its last read."""
        with self._lock:
            self.state.settle()
            cursor = self._cursors.get(reader, self._base)
            pending = self._log[cursor - self._base :]
            if pending:
                local.refresh_servers(self.state, np.concatenate(pending))
            self._cursors[reader] = self._base + len(self._log)
            self._trim()

    def settle(self) -> None:
        """Let the monitors' updates of a deferred master catch up."""
        with self._lock:
            self.state.settle()

    def refresh(self, local: RUState, servers: IntArray) -> None:
        """Re-read ``servers`` into ``local`` (after a conflict, or a give-back)."""
        with self._lock:
            self.state.settle()
            local.refresh_servers(self.state, servers)

    def _trim(self) -> None:
        oldest = min(self._cursors.values())
        if oldest - self._base > 4096:
            del self._log[: oldest - self._base]
            self._base = oldest


@dataclass(frozen=True)
class Scheduled:
    """A scheduling attempt: the placer's last word and the RUs committed."""

    placement: Placement
    rus: IntArray = field(default_factory=lambda: _NO_RUS)
    attempts: int = 1
    conflicts: int = 0

    @property
    def placed(self) -> bool:
        return self.placement.placed and len(self.rus) > 0


class Scheduler(Protocol):
    shared: SharedState

    def maintain(self, now: float) -> None:
        """Background work due by ``now`` (agents' syncs), outside any decision."""
        ...

    def notice(self, servers: IntArray) -> None:
        """Admission control's notice that ``servers`` freed RUs it will offer to
        the next job scheduled: whoever schedules it re-reads them first (in the
        background, as the notice arrives)."""
        ...

    def schedule(
        self,
        job: PlacementJob,
        owner: int,
        tenant: Tenant,
        now: float,
        *,
        force: bool,
        offered: IntArray | None = None,
    ) -> Scheduled:
        """Place ``job`` for ``owner`` (see :meth:`Placer.place` for ``force`` and
        ``offered``) and commit it."""
        ...


class SchedulingAgent:
    """One agent with its local copy of the state (see the module docstring)."""

    def __init__(
        self,
        shared: SharedState,
        placer: Placer,
        settings: AgentSettings,
        rng: np.random.Generator,
    ) -> None:
        self.shared = shared
        self.placer = placer
        self.settings = settings
        self.rng = rng
        self.reader = id(self)
        self.local: RUState | None = None  # copied at the first maintain()
        self._next_sync = 0.0

    def _sync_delay(self, now: float) -> float:
        jitter = 1.0 + self.settings.sync_jitter * float(self.rng.random())
        return now + self.settings.sync_interval_s * jitter

    def maintain(self, now: float) -> None:
        """Re-read the master copy when the sync interval has passed (in the
        background of a real agent: not part of a decision)."""
        if self.local is None:
            self.local = self.shared.snapshot(self.reader)
            self._next_sync = self._sync_delay(now)
        elif now >= self._next_sync:
            self.shared.catch_up(self.reader, self.local)
            self._next_sync = self._sync_delay(now)

    def notice(self, servers: IntArray) -> None:
        """Re-read ``servers`` from the master (the notice carries their state)."""
        if self.local is not None and len(servers):
            self.shared.refresh(self.local, servers)

    def schedule(
        self,
        job: PlacementJob,
        owner: int,
        tenant: Tenant,
        now: float,
        *,
        force: bool,
        offered: IntArray | None = None,
    ) -> Scheduled:
        if self.local is None:
            self.maintain(now)
        local = self.local
        assert local is not None
        taken: list[IntArray] = []
        got = conflicts = 0
        placement = Placement(Outcome.NO_ROOM)
        for attempt in range(self.settings.max_retries + 1):
            wanted = job if got == 0 else job.needing(job.ru_count - got)
            placement = self.placer.place(
                wanted, local, self.rng, now, force=force or got > 0, offered=offered
            )
            if not placement.placed:
                break
            committed, conflicting = self.shared.try_commit(
                placement.rus,
                owner,
                tenant,
                now,
                seen=local if self.settings.check_quality else None,
            )
            if len(committed):
                if self.settings.check_quality:  # its own job's pressure counts at once
                    local.occupy(committed, owner, tenant.caused, tenant.tolerance, now)
                else:
                    local.mark_taken(committed, owner)
                taken.append(committed)
                got += len(committed)
            if len(conflicting):
                conflicts += 1
                self.shared.refresh(local, local.server_of(conflicting))
            if got == job.ru_count:
                rus = np.concatenate(taken)
                return Scheduled(placement, rus, attempt + 1, conflicts)
            self.shared.stats.retries += 1
        if taken:  # could not complete the job: give back what it holds
            back = np.concatenate(taken)
            self.shared.release(back, now)
            self.shared.refresh(local, local.server_of(back))
            self.shared.stats.gave_up += 1
        if placement.placed:
            placement = Placement(Outcome.NO_ROOM, reason="conflicts on every retry")
        return Scheduled(placement, _NO_RUS, self.settings.max_retries + 1, conflicts)


class AgentPool:
    """Several agents; jobs are dealt to them in turn."""

    def __init__(
        self,
        shared: SharedState,
        placer: Placer,
        settings: AgentSettings,
        rng: np.random.Generator,
    ) -> None:
        self.shared = shared
        seeds = rng.integers(0, 2**63 - 1, size=settings.agents)
        self.agents = [
            SchedulingAgent(shared, placer, settings, np.random.default_rng(int(seed)))
            for seed in seeds
        ]
        self._turn = 0

    def maintain(self, now: float) -> None:
        for agent in self.agents:
            agent.maintain(now)

    def notice(self, servers: IntArray) -> None:
        self.agents[self._turn].notice(servers)  # the agent the next job goes to

    def schedule(
        self,
        job: PlacementJob,
        owner: int,
        tenant: Tenant,
        now: float,
        *,
        force: bool,
        offered: IntArray | None = None,
    ) -> Scheduled:
        agent = self.agents[self._turn]
        self._turn = (self._turn + 1) % len(self.agents)
        return agent.schedule(job, owner, tenant, now, force=force, offered=offered)


class DirectScheduler:
    """A single scheduler reading the master state directly."""

    def __init__(self, shared: SharedState, placer: Placer, rng: np.random.Generator) -> None:
        self.shared = shared
        self.placer = placer
        self.rng = rng

    def maintain(self, now: float) -> None:
        self.shared.settle()

    def notice(self, servers: IntArray) -> None:
        self.shared.settle()  # it reads the master itself

    def schedule(
        self,
        job: PlacementJob,
        owner: int,
        tenant: Tenant,
        now: float,
        *,
        force: bool,
        offered: IntArray | None = None,
    ) -> Scheduled:
        placement = self.placer.place(
            job, self.shared.state, self.rng, now, force=force, offered=offered
        )
        if not placement.placed:
            return Scheduled(placement)
        committed, conflicting = self.shared.try_commit(placement.rus, owner, tenant, now)
        if len(conflicting):  # cannot happen with one scheduler; never half-commit
            self.shared.release(committed, now)
            return Scheduled(Placement(Outcome.NO_ROOM, reason="conflict"), _NO_RUS, 1, 1)
        return Scheduled(placement, committed)
