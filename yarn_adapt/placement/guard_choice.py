"""The placement policies as the co-location guard's node chooser: Algorithm 1's
"the node with the lowest risk" (:mod:`yarn_adapt.cosim.toposch`, Lines 17-18)
goes through :func:`lowest_risk_chooser`, set as ``ToposchSettings.lowest_risk``.

* ``tarcil`` -- sample with the §3.3 guarantee instead of ranking every node:
  ``R = ceil(ln p / ln(1 - g))`` candidates (:func:`~yarn_adapt.placement.sampling.sample_size`;
  ``p`` = ``miss_probability``, ``g`` = ``top_share``), the lowest risk of them.
  With probability at least ``1 - p`` the chosen node is among the ``top_share``
  lowest-risk candidates; the cost is ``R`` risk reads, whatever the cluster
  size. With ``R`` or fewer candidates it ranks them all (then it is exact).
* ``greedy`` -- every candidate ranked (the paper's rule as written).
* ``random`` -- Sparrow-like: the lower risk of 2 sampled.
* ``least-loaded`` -- the candidate with the most free vcores (then memory),
  risk ignored.
* ``yarn`` -- the first candidate (heartbeat order, local nodes first).

A chooser is pure: its samples come from a generator seeded by the container's
id and retry count (:func:`_seed`), so a pass replays the same choice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yarn_adapt.cosim.toposch import (
    LowestRiskChooser,
    NodeState,
    WaitingContainer,
    scan_lowest_risk,
)
from yarn_adapt.errors import InputError
from yarn_adapt.placement.baselines import POLICY_NAMES
from yarn_adapt.placement.sampling import sample_best, sample_size

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SampledLowestRisk:
    """Tarcil's chooser (see the module docstring)."""

    miss_probability: float = 1e-3
    top_share: float = 0.2

    def __post_init__(self) -> None:
        if not 0.0 < self.top_share < 1.0:
            raise InputError(f"lowest-risk sampling: top_share {self.top_share!r} not in (0, 1)")
        sample_size(self.miss_probability, self.top_share)  # validates the probability

    @property
    def r(self) -> int:
        return sample_size(self.miss_probability, self.top_share).r

    def __call__(self, container: WaitingContainer, candidates: Sequence[NodeState]) -> NodeState:
        r = self.r
        if len(candidates) <= r:
            return scan_lowest_risk(container, candidates)
        return _sampled(container, candidates, r)


@dataclass(frozen=True)
class SampledPair:
    """Sparrow-like: the lower risk of ``probes`` sampled candidates."""

    probes: int = 2

    def __call__(self, container: WaitingContainer, candidates: Sequence[NodeState]) -> NodeState:
        return _sampled(container, candidates, self.probes)


def first_candidate(container: WaitingContainer, candidates: Sequence[NodeState]) -> NodeState:
    """YARN: the first candidate (heartbeat order, local nodes first)."""
    return candidates[0]


def most_available(container: WaitingContainer, candidates: Sequence[NodeState]) -> NodeState:
    """Least loaded: the most free vcores, then memory; the first on ties."""
    return max(candidates, key=lambda n: (n.available.vcores, n.available.memory_mb))


def lowest_risk_chooser(policy: str, *, miss_probability: float = 1e-3) -> LowestRiskChooser:
    """The chooser for a placement policy name (one of ``POLICY_NAMES``)."""
    if policy == "tarcil":
        return SampledLowestRisk(miss_probability)
    if policy == "greedy":
        return scan_lowest_risk
    if policy == "random":
        return SampledPair()
    if policy == "least-loaded":
        return most_available
    if policy == "yarn":
        return first_candidate
    raise InputError(f"unknown placement policy {policy!r} (known: {', '.join(POLICY_NAMES)})")


def _sampled(container: WaitingContainer, candidates: Sequence[NodeState], r: int) -> NodeState:
    def lower_is_better(picks: IntArray) -> FloatArray:  # reads only the sampled risks
        return -np.array([candidates[int(i)].risk for i in picks], dtype=np.float64)

    rng = np.random.default_rng(_seed(container))
    index = sample_best(len(candidates), lower_is_better, rng, r=r)
    assert index is not None  # candidates is never empty
    return candidates[index]


def _seed(container: WaitingContainer) -> int:
    digest = hashlib.blake2b(f"{container.id}#{container.retry}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")
