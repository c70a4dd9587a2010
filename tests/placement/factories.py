"""Builders for placement tests: clusters with chosen contention, profiles, jobs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from yarn_adapt.placement.agents import Tenant
from yarn_adapt.placement.profiles import N_RESOURCES, InterferenceProfile, ProfileBook
from yarn_adapt.placement.state import RUState, Topology

CPU_HEAVY = InterferenceProfile.symmetric((0.9, 0.1, 0.2, 0.0, 0.0))
NET_HEAVY = InterferenceProfile.symmetric((0.1, 0.0, 0.1, 0.1, 0.9))
LIGHT = InterferenceProfile.symmetric((0.1,) * N_RESOURCES)
BOOK = ProfileBook({"cpu": CPU_HEAVY, "net": NET_HEAVY, "light": LIGHT})


def cluster(servers: int, rus_per_server: int = 8, per_rack: int = 4) -> RUState:
    return RUState(Topology.uniform(servers, rus_per_server, per_rack))


def tenant(profile: InterferenceProfile) -> Tenant:
    return Tenant(np.array(profile.caused), np.array(profile.tolerance))


def load_servers(
    state: RUState, plan: Sequence[tuple[int, int, InterferenceProfile]], first_owner: int = 1000
) -> None:
    """Occupy ``count`` RUs of ``server`` with ``profile`` for each (server, count,
    profile), one owner each."""
    for owner, (server, count, profile) in enumerate(plan, start=first_owner):
        rus = state.free_rus_on(server)[:count]
        state.occupy(rus, owner, profile.caused, profile.tolerance)
