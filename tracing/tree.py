"""Parent links as arrays: depth and top-level ancestor of every span at once (pointer
jumping), and cutting the cycles corrupt input can hold."""

from __future__ import annotations

import numpy as np


def cut_cycles(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Parent links with every cycle cut, which spans lost their parent, and each span's
    depth and top-level ancestor under the cut links."""
    cut = np.zeros(len(parent), bool)
    found = depths(parent)
    if found is not None:
        return parent, cut, found[0], found[1]
    on_cycle = _cycle_members(parent)
    parent = parent.copy()
    parent[on_cycle] = -1
    cut[on_cycle] = True
    found = depths(parent)
    assert found is not None
    return parent, cut, found[0], found[1]


def depths(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each span's distance from its top-level ancestor, and that ancestor, by pointer
    jumping (O(n log depth)); None if the links have a cycle."""
    n = len(parent)
    ancestor = np.where(parent >= 0, parent, np.arange(n))
    depth = (parent >= 0).astype(np.int64)
    active = np.flatnonzero(ancestor[ancestor] != ancestor)
    limit = int(np.ceil(np.log2(n + 1))) + 2
    rounds = 0
    while len(active):
        if rounds > limit:
            return None
        above = ancestor[active]
        depth[active] += depth[above]
        ancestor[active] = ancestor[above]
        ahead = ancestor[active]
        active = active[ancestor[ahead] != ahead]
        rounds += 1
    if bool((parent[ancestor] >= 0).any()):  # a "top" that has a parent: a cycle
        return None
    return depth, ancestor


def _cycle_members(parent: np.ndarray) -> np.ndarray:
    """Spans on a parent cycle: jumping 2^k >= n steps from any span that never reaches a
    root lands on its cycle; walking on from there collects the rest of it."""
    ancestor = parent.copy()
    for _ in range(int(np.ceil(np.log2(len(parent) + 1))) + 1):
        valid = ancestor >= 0
        ancestor = np.where(valid, ancestor[np.maximum(ancestor, 0)], -1)
    members = np.zeros(len(parent), bool)
    members[ancestor[ancestor >= 0]] = True
    frontier = np.flatnonzero(members)
    while len(frontier):
        nxt = parent[frontier]
        fresh = nxt[(nxt >= 0) & ~members[np.maximum(nxt, 0)]]
        members[fresh] = True
        frontier = fresh
    return np.flatnonzero(members)
