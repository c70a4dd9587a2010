"""The shared cluster state Tarcil's agents sample: resource units (RUs) and the
contention each one sees.

An RU (Tarcil §3.2) is one core with an equal share of its server's memory, storage
and network. :class:`Topology` numbers the RUs server by server (server ``s`` owns
the contiguous ids ``first[s] .. first[s] + size[s] - 1``) and servers rack by rack.

:class:`RUState` is the mutable state every placer reads through the
:class:`~yarn_adapt.placement.view.PlacementView` protocol:

* which RU is free, with a **free list** (array + position index, swap-remove), so
  a uniform sample of ``k`` free RUs costs O(k) whatever the cluster size;
* per server, the sum of the pressure its occupants cause, and the contention a job
  placed on one of its free RUs would see (eq. 3, as the paper's 0..99 levels --
  every free RU of a server sees the same), kept up to date on every change;
* per server and per rack, free RU counts; a version per RU (bumped on every
  change) for optimistic commits;
* listeners told which servers changed (the admission control's LSH counters);
* per server, whether the load monitor **closed** it to new work because an
  occupant runs below its target (Tarcil §5.2); placers rank closed servers last.

With ``deferred=True`` (the master copy under scheduling agents) a commit or
release changes occupancy, free lists and pressure sums at once -- what makes a
second booking impossible -- and the derived contention levels and headroom, with
the listeners, catch up in :meth:`settle`: the node monitors' update of RU quality
after a task starts or ends (Tarcil §5.1), off the scheduling critical path.
Readers of a deferred state settle it first (the agents' catch-up, the admission
control's flush, a direct scheduler's background step).

A server of one RU has no neighbours, so its contention is zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yarn_adapt.errors import InputError
from yarn_adapt.placement.profiles import N_RESOURCES
from yarn_adapt.placement.quality import digits

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
FREE = -1

ServerListener = Callable[[IntArray, float], None]


class TopologyError(InputError):
    """A cluster shape that cannot hold work (negative sizes, mismatched racks)."""


class CommitConflict(InputError):
    """An RU asked for is not free (a stale view or a double booking)."""


@dataclass(frozen=True, eq=False)
class Topology:
    """Servers, their RU counts and racks."""

    rus_per_server: IntArray
    rack_of_server: IntArray

    def __post_init__(self) -> None:
        sizes = np.asarray(self.rus_per_server, dtype=np.int64)
        racks = np.asarray(self.rack_of_server, dtype=np.int64)
        if sizes.ndim != 1 or racks.shape != sizes.shape:
            raise TopologyError("rus_per_server and rack_of_server must be equal-length lists")
        if (sizes < 1).any():
            raise TopologyError("every server needs at least one RU")
        if (racks < 0).any():
            raise TopologyError("rack numbers must be non-negative")
        object.__setattr__(self, "rus_per_server", sizes)
        object.__setattr__(self, "rack_of_server", racks)

    @classmethod
    def uniform(cls, servers: int, rus_per_server: int, servers_per_rack: int = 40) -> Topology:
        if servers < 0 or rus_per_server < 1 or servers_per_rack < 1:
            raise TopologyError(
                f"cannot build {servers} servers x {rus_per_server} RUs "
                f"({servers_per_rack} per rack)"
            )
        sizes = np.full(servers, rus_per_server, dtype=np.int64)
        racks = np.arange(servers, dtype=np.int64) // servers_per_rack
        return cls(sizes, racks)

    @property
    def servers(self) -> int:
        return len(self.rus_per_server)

    @property
    def racks(self) -> int:
        return int(self.rack_of_server.max()) + 1 if self.servers else 0

    @property
    def ru_count(self) -> int:
        return int(self.rus_per_server.sum())

    def first_ru(self) -> IntArray:
        first: IntArray = np.concatenate(([0], np.cumsum(self.rus_per_server)[:-1])).astype(
            np.int64
        )
        return first if self.servers else np.empty(0, dtype=np.int64)

    def server_of_ru(self) -> IntArray:
        server: IntArray = np.repeat(np.arange(self.servers, dtype=np.int64), self.rus_per_server)
        return server


class RUState:
    """Occupancy and contention of every RU; see the module docstring."""

    def __init__(self, topology: Topology, *, deferred: bool = False) -> None:
        self.topology = topology
        self.deferred = deferred
        self._dirty: list[tuple[IntArray, float]] = []
        self.server_first = topology.first_ru()
        self.server_size = topology.rus_per_server
        self.ru_server = topology.server_of_ru()
        self.rack_of_server = topology.rack_of_server
        total = topology.ru_count
        self.occupant = np.full(total, FREE, dtype=np.int64)
        self.ru_caused = np.zeros((total, N_RESOURCES))
        # what each occupant tolerates, as the scheduler believes (for headroom)
        self.ru_tolerance = np.ones((total, N_RESOURCES))
        self.version = np.zeros(total, dtype=np.int64)
        self.server_caused = np.zeros((topology.servers, N_RESOURCES))
        self.server_levels = np.zeros((topology.servers, N_RESOURCES))
        self.server_headroom = np.ones((topology.servers, N_RESOURCES))
        self.server_closed = np.zeros(topology.servers, dtype=bool)
        self.server_free = self.server_size.copy()
        self.rack_free = np.bincount(
            self.rack_of_server, weights=self.server_size, minlength=topology.racks
        ).astype(np.int64)
        # servers grouped by rack (rack r: _rack_servers[_rack_start[r]:_rack_start[r + 1]]),
        # so a rack's servers are found without a scan of the cluster
        self._rack_servers = np.argsort(self.rack_of_server, kind="stable").astype(np.int64)
        self._rack_start = np.concatenate(
            ([0], np.cumsum(np.bincount(self.rack_of_server, minlength=topology.racks)))
        ).astype(np.int64)
        self.free_ids = np.arange(total, dtype=np.int64)
        self.free_pos = np.arange(total, dtype=np.int64)
        self.n_free = total
        # neighbours per RU, for eq. (3): M - 1 (1 for a lone RU, whose sum is 0)
        self._neighbours = np.maximum(self.server_size - 1, 1).astype(np.float64)
        sizes = np.unique(self.server_size)
        self._uniform = int(sizes[0]) if len(sizes) == 1 else 0  # fast path: one size
        self.listeners: list[ServerListener] = []

    # ------------------------------------------------------------------ reading

    @property
    def ru_count(self) -> int:
        return len(self.occupant)

    @property
    def server_count(self) -> int:
        return len(self.server_size)

    @property
    def free_count(self) -> int:
        return self.n_free

    def sample_free(self, count: int, rng: np.random.Generator) -> IntArray:
        """``count`` free RUs drawn uniformly with replacement, in draw order."""
        if self.n_free == 0 or count <= 0:
            return np.empty(0, dtype=np.int64)
        picked: IntArray = self.free_ids[rng.integers(0, self.n_free, size=count)]
        return picked

    def sample_free_in_racks(
        self, racks: IntArray, count: int, rng: np.random.Generator
    ) -> IntArray:
        """Up to ``count`` free RUs of the given racks: rejection sampling over the
        racks' servers (O(count / free share)), no scan of the cluster."""
        servers = self.servers_in_racks(racks)
        if len(servers) == 0 or self.server_free[servers].sum() == 0:
            return np.empty(0, dtype=np.int64)
        tries = max(count, 1) * 8
        server = servers[rng.integers(0, len(servers), size=tries)]
        slot = (rng.random(tries) * self.server_size[server]).astype(np.int64)
        rus = self.server_first[server] + slot
        free: IntArray = rus[self.occupant[rus] == FREE][:count]
        return free

    def servers_in_racks(self, racks: IntArray) -> IntArray:
        """The servers of ``racks`` (each rack once, unknown racks none), rack by
        rack: O(their servers), whatever the cluster size."""
        known = np.unique(racks[(racks >= 0) & (racks < len(self._rack_start) - 1)])
        if not len(known):
            return np.empty(0, dtype=np.int64)
        parts = [self._rack_servers[self._rack_start[r] : self._rack_start[r + 1]] for r in known]
        servers: IntArray = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return servers

    def sample_free_on(self, servers: IntArray, rng: np.random.Generator) -> IntArray:
        """A free RU on each of ``servers``, by rejection over its slots (a few
        tries; a server with none free gives none)."""
        servers = servers[self.server_free[servers] > 0]
        found: list[IntArray] = []
        for _ in range(8):
            if not len(servers):
                break
            slot = (rng.random(len(servers)) * self.server_size[servers]).astype(np.int64)
            rus = self.server_first[servers] + slot
            free = self.occupant[rus] == FREE
            found.append(rus[free])
            servers = servers[~free]
        picked: IntArray = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
        return picked

    def contention_levels(self, rus: IntArray) -> FloatArray:
        """The contention (levels 0..99) a new job placed on each (free) RU sees."""
        levels: FloatArray = self.server_levels[self.ru_server[rus]]
        return levels

    def server_of(self, rus: IntArray) -> IntArray:
        servers: IntArray = self.ru_server[rus]
        return servers

    def rack_of(self, servers: IntArray) -> IntArray:
        racks: IntArray = self.rack_of_server[servers]
        return racks

    def free_rus_on(self, server: int) -> IntArray:
        first = int(self.server_first[server])
        rus = np.arange(first, first + int(self.server_size[server]), dtype=np.int64)
        free: IntArray = rus[self.occupant[rus] == FREE]
        return free

    def servers_with_free(self) -> IntArray:
        """Every server with a free RU: an O(servers) scan, for exhaustive placers."""
        servers: IntArray = np.flatnonzero(self.server_free > 0).astype(np.int64)
        return servers

    def server_free_of(self, servers: IntArray) -> IntArray:
        free: IntArray = self.server_free[servers]
        return free

    def server_levels_of(self, servers: IntArray) -> FloatArray:
        levels: FloatArray = self.server_levels[servers]
        return levels

    def server_headroom_of(self, servers: IntArray) -> FloatArray:
        headroom: FloatArray = self.server_headroom[servers]
        return headroom

    def server_neighbours_of(self, servers: IntArray) -> FloatArray:
        """``M - 1`` per server: the divisor of eq. (3)."""
        neighbours: FloatArray = self._neighbours[servers]
        return neighbours

    def server_closed_of(self, servers: IntArray) -> npt.NDArray[np.bool_]:
        closed: npt.NDArray[np.bool_] = self.server_closed[servers]
        return closed

    def ru_contention(self, rus: IntArray) -> FloatArray:
        """The pressure (fractions) each occupied RU sees from its server's others."""
        servers = self.ru_server[rus]
        others = self.server_caused[servers] - self.ru_caused[rus]
        contention: FloatArray = others / self._neighbours[servers][:, None]
        return contention

    # ------------------------------------------------------------------ writing

    def occupy(
        self,
        rus: IntArray,
        owner: int,
        caused: npt.ArrayLike,
        tolerance: npt.ArrayLike | None = None,
        now: float = 0.0,
    ) -> None:
        """Give the distinct, free ``rus`` to ``owner``, which causes ``caused``
        pressure on each and (the scheduler believes) tolerates ``tolerance``
        (default: anything). Raises :class:`CommitConflict`, changing nothing, when
        an RU is taken or listed twice."""
        rus = np.asarray(rus, dtype=np.int64)
        if len(rus) > 1 and len(set(rus.tolist())) != len(rus):
            raise CommitConflict("the same RU was asked for twice")
        taken = rus[self.occupant[rus] != FREE]
        if len(taken):
            raise CommitConflict(f"RU {int(taken[0])} is already taken")
        self.occupant[rus] = owner
        self.ru_caused[rus] = caused
        self.ru_tolerance[rus] = 1.0 if tolerance is None else tolerance
        self.version[rus] += 1
        for ru in rus.tolist():
            self._unlist(ru)
        self._changed(self._account(rus, +1), now)

    def set_closed(self, servers: IntArray, closed: bool, now: float = 0.0) -> None:
        """Close ``servers`` to new work (or reopen them): the load monitor's
        action when an occupant runs below its target (Tarcil §5.2)."""
        servers = np.asarray(servers, dtype=np.int64)
        changed = servers[self.server_closed[servers] != closed]
        if len(changed):
            self.server_closed[changed] = closed
            self._changed(changed, now)

    def retolerate(self, rus: IntArray, tolerance: npt.ArrayLike, now: float = 0.0) -> None:
        """The scheduler's belief of what the occupants of ``rus`` tolerate changed
        (a corrected profile): their servers' headroom follows."""
        rus = np.asarray(rus, dtype=np.int64)
        if not len(rus):
            return
        self.ru_tolerance[rus] = tolerance
        self._changed(np.unique(self.ru_server[rus]), now)

    def mark_taken(self, rus: IntArray, owner: int) -> None:
        """Only note that ``rus`` are taken (free list and counts), leaving the
        contention figures as they were: an agent recording its own commit in its
        local copy, which the next catch-up with the master completes."""
        rus = np.asarray(rus, dtype=np.int64)
        self.occupant[rus] = owner
        for ru in rus.tolist():
            self._unlist(ru)
        per_ru = self.ru_server[rus]
        if len(rus) == 1:
            self.server_free[per_ru] -= 1
            self.rack_free[self.rack_of_server[per_ru]] -= 1
            return
        np.add.at(self.server_free, per_ru, -1)
        np.add.at(self.rack_free, self.rack_of_server[per_ru], -1)

    def release(self, rus: IntArray, now: float = 0.0) -> None:
        """Free ``rus`` (each must be occupied)."""
        rus = np.asarray(rus, dtype=np.int64)
        if (self.occupant[rus] == FREE).any():
            raise CommitConflict("releasing an RU that is free")
        servers = self._account(rus, -1)
        self.occupant[rus] = FREE
        self.ru_caused[rus] = 0.0
        self.ru_tolerance[rus] = 1.0
        self.version[rus] += 1
        for ru in rus.tolist():
            self._relist(ru)
        self._changed(servers, now)

    def _account(self, rus: IntArray, sign: int) -> IntArray:
        """Add (+1) or remove (-1) the RUs' pressure and free counts per server;
        the servers touched."""
        per_ru = self.ru_server[rus]
        if len(rus) == 1:
            self.server_caused[per_ru] += sign * self.ru_caused[rus]
            self.server_free[per_ru] -= sign
            self.rack_free[self.rack_of_server[per_ru]] -= sign
            return per_ru
        counts: dict[int, int] = {}
        for server in per_ru.tolist():
            counts[server] = counts.get(server, 0) + 1
        servers = np.fromiter(counts, dtype=np.int64, count=len(counts))
        if len(servers) == len(rus):  # no server twice: plain fancy indexing
            self.server_caused[per_ru] += sign * self.ru_caused[rus]
            self.server_free[per_ru] -= sign
        else:
            np.add.at(self.server_caused, per_ru, sign * self.ru_caused[rus])
            np.add.at(self.server_free, per_ru, -sign)
        np.add.at(self.rack_free, self.rack_of_server[per_ru], -sign)
        return servers

    def copy(self) -> RUState:
        """A private, settled copy (an agent's local view); listeners are not
        copied."""
        self.settle()
        clone = RUState.__new__(RUState)
        clone.__dict__.update(
            {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        )
        clone.listeners = []
        clone.deferred = False
        clone._dirty = []
        return clone

    def refresh_servers(self, source: RUState, servers: IntArray) -> None:
        """Re-read ``servers`` (their RUs and aggregates) from ``source``: an agent
        catching up with the master, or learning the truth where it conflicted."""
        servers = np.unique(servers)
        rus = self.rus_of(servers)
        was_free = self.occupant[rus] == FREE
        now_free = source.occupant[rus] == FREE
        for ru in rus[was_free & ~now_free].tolist():
            self._unlist(ru)
        for ru in rus[~was_free & now_free].tolist():
            self._relist(ru)
        self.occupant[rus] = source.occupant[rus]
        self.ru_caused[rus] = source.ru_caused[rus]
        self.ru_tolerance[rus] = source.ru_tolerance[rus]
        self.version[rus] = source.version[rus]
        self.server_caused[servers] = source.server_caused[servers]
        self.server_levels[servers] = source.server_levels[servers]
        self.server_headroom[servers] = source.server_headroom[servers]
        self.server_closed[servers] = source.server_closed[servers]
        gained = source.server_free[servers] - self.server_free[servers]
        np.add.at(self.rack_free, self.rack_of_server[servers], gained)
        self.server_free[servers] = source.server_free[servers]

    def rus_of(self, servers: IntArray) -> IntArray:
        """Every RU of ``servers``, server by server."""
        sizes = self.server_size[servers]
        rus: IntArray = np.repeat(self.server_first[servers], sizes) + (
            np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        )
        return rus

    def _unlist(self, ru: int) -> None:
        pos = int(self.free_pos[ru])
        last = int(self.free_ids[self.n_free - 1])
        self.free_ids[pos] = last
        self.free_pos[last] = pos
        self.free_ids[self.n_free - 1] = ru
        self.free_pos[ru] = self.n_free - 1
        self.n_free -= 1

    def _relist(self, ru: int) -> None:
        pos = int(self.free_pos[ru])
        first_busy = int(self.free_ids[self.n_free])
        self.free_ids[pos] = first_busy
        self.free_pos[first_busy] = pos
        self.free_ids[self.n_free] = ru
        self.free_pos[ru] = self.n_free
        self.n_free += 1

    def settle(self) -> None:
        """Bring the derived figures of a deferred state up to date, in order."""
        dirty, self._dirty = self._dirty, []
        for servers, now in dirty:
            self._derive(servers, now)

    def _changed(self, servers: IntArray, now: float) -> None:
        if self.deferred:
            self._dirty.append((servers, now))
        else:
            self._derive(servers, now)

    def _derive(self, servers: IntArray, now: float) -> None:
        contention = self.server_caused[servers] / self._neighbours[servers][:, None]
        self.server_levels[servers] = digits(contention)
        self._update_headroom(servers)
        for listener in self.listeners:
            listener(servers, now)

    def _update_headroom(self, servers: IntArray) -> None:
        """Per server and resource, the least slack (tolerance - contention) of its
        occupants: how much more pressure the server takes before someone suffers;
        0 when someone already does (any more pressure adds to their overshoot)."""
        if self._uniform:
            rus = self.server_first[servers][:, None] + np.arange(self._uniform)
            others = self.server_caused[servers][:, None, :] - self.ru_caused[rus]
            seen = others / self._neighbours[servers][:, None, None]
            slack = np.where(
                (self.occupant[rus] == FREE)[..., None], 1.0, self.ru_tolerance[rus] - seen
            )
            self.server_headroom[servers] = np.maximum(slack.min(axis=1), 0.0)
            return
        sizes = self.server_size[servers]
        flat = self.rus_of(servers)
        owners = np.repeat(servers, sizes)
        seen_flat = (self.server_caused[owners] - self.ru_caused[flat]) / self._neighbours[owners][
            :, None
        ]
        slack_flat = np.where(
            (self.occupant[flat] == FREE)[:, None], 1.0, self.ru_tolerance[flat] - seen_flat
        )
        starts = np.cumsum(sizes) - sizes
        least = np.minimum.reduceat(slack_flat, starts, axis=0)
        self.server_headroom[servers] = np.maximum(least, 0.0)
