"""What a placer may read of the cluster: :class:`PlacementView`.

:class:`~yarn_adapt.placement.state.RUState` implements it for the RU cluster model
and for scheduling agents' local copies;
:class:`~yarn_adapt.placement.sim_hook.YarnSimView` implements it over the YARN
simulator's nodes. Every placer runs against this protocol only, so the bench and
``yarn-adapt sim --placement`` run the same placement code.

Sampling methods cost O(samples); ``servers_with_free`` is the one O(cluster) call,
used only by the exhaustive placers (greedy, least-loaded).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class PlacementView(Protocol):
    @property
    def ru_count(self) -> int: ...

    @property
    def server_count(self) -> int: ...

    @property
    def free_count(self) -> int: ...

    def sample_free(self, count: int, rng: np.random.Generator) -> IntArray:
        """``count`` free RUs, uniform with replacement, in draw order."""
        ...

    def sample_free_in_racks(
        self, racks: IntArray, count: int, rng: np.random.Generator
    ) -> IntArray: ...

    def contention_levels(self, rus: IntArray) -> FloatArray:
        """Contention levels (0..99 per resource) a new job would see on each RU."""
        ...

    def server_of(self, rus: IntArray) -> IntArray: ...

    def rack_of(self, servers: IntArray) -> IntArray: ...

    def free_rus_on(self, server: int) -> IntArray: ...

    def servers_with_free(self) -> IntArray: ...

    def server_free_of(self, servers: IntArray) -> IntArray: ...

    def server_levels_of(self, servers: IntArray) -> FloatArray: ...

    def server_headroom_of(self, servers: IntArray) -> FloatArray:
        """Per server and resource, the pressure its occupants can still take
        before one of them exceeds its tolerance (1 on an empty server)."""
        ...

    def server_neighbours_of(self, servers: IntArray) -> FloatArray:
        """``M - 1`` per server (the divisor of eq. 3)."""
        ...
