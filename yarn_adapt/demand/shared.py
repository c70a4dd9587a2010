"""Latency-critical services sharing a node: how much CPU each keeps there, by one
of Cilantro's policies (§4.1) instead of a sum of independent upper bounds.

Each service on the node is a tenant (:class:`Claim`): its load served from the
node, its demand there (lower, eq. 6's recommendation, upper; vcores), its SLO goal
(the fraction of requests within target) and its learned performance model
(performance against vcores per request/s). The tenants share a *pool*: what they
would reserve independently, at most the node's capacity (the caller's choice). The
pool is cut into units of ``unit`` vcores and split by

- ``njc``: the NJC water-filling (:func:`~yarn_adapt.demand.policies.njc_allocation`)
  of the services' recommended demands -- Cilantro-NJC;
- ``sw`` / ``ew``: the social / egalitarian welfare of the utilities of the
  performance *upper* bounds (eq. 4, optimism), maximised by
  :func:`~yarn_adapt.demand.policies.solve` -- Cilantro-SW / -EW. A welfare policy
  hands out the whole pool, but a unit that raises no utility protects nothing:
  each share is trimmed to the least that gives the same utility, and the rest goes
  back to batch;
- ``least`` (the default): all three, and the one whose shares keep every SLO met
  by the learned curves' estimates with the least reserved; when none does, the
  one whose worst-off service is best off (the egalitarian view), then the least
  reserved.

The resulting :class:`NodeSplit` names the policy that decided and each service's
share: the guard's reason. Pure decision code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from yarn_adapt.demand.learner import PerformanceModel
from yarn_adapt.demand.model import Demand
from yarn_adapt.demand.policies import (
    IntArray,
    Objective,
    Tenant,
    njc_allocation,
    solve,
    utility_table,
)
from yarn_adapt.demand.solvers import Box
from yarn_adapt.demand.utility import Utility

UNIT_VCORES = 0.1
"""The grain of a split: a tenth of a vcore (a node's 8 vcores are 80 units)."""
MET = 1.0 - 1e-6  # a utility this high is the SLO met


class SharePolicy(StrEnum):
    LEAST = "least"
    NJC = "njc"
    SW = "sw"
    EW = "ew"


CANDIDATES = (SharePolicy.NJC, SharePolicy.SW, SharePolicy.EW)
WELFARE = {SharePolicy.SW: Objective.SOCIAL, SharePolicy.EW: Objective.EGALITARIAN}


@dataclass(frozen=True, eq=False)
class Claim:
    """One service's claim on a node's pool (see the module docstring)."""

    application: str
    load: float
    demand: Demand
    goal: float
    model: PerformanceModel


@dataclass(frozen=True)
class NodeSplit:
    """How a node's pool was split: by ``policy`` (``requested`` is what the
    settings name; they differ under ``least``), each service's share in vcores,
    and whether every service's learned estimate meets its SLO at its share."""

    requested: SharePolicy
    policy: SharePolicy
    pool_vcores: float
    shares: tuple[tuple[str, float], ...]
    slo_met: bool

    @property
    def reserved(self) -> float:
        return sum(share for _, share in self.shares)

    def share_of(self, application: str) -> float:
        return dict(self.shares).get(application, 0.0)

    def describe(self) -> str:
        chosen = (
            str(self.policy)
            if self.requested is self.policy
            else f"{self.requested} -> {self.policy}"
        )
        met = "every SLO met by the learned curves" if self.slo_met else "not every SLO met"
        parts = " + ".join(f"{app} {share:.2f}" for app, share in self.shares)
        return f"policy {chosen} ({met}): {parts} of {self.pool_vcores:.2f} vcores pooled"


def split_node(
    claims: Sequence[Claim],
    pool_vcores: float,
    policy: SharePolicy = SharePolicy.LEAST,
    unit: float = UNIT_VCORES,
) -> NodeSplit:
    """The node's pool split among ``claims`` by ``policy``."""
    units = max(0, math.floor(pool_vcores / unit + 1e-9))
    tenants = tuple(Tenant(c.application, Utility(c.goal)) for c in claims)
    loads = np.array([max(c.load, 1e-9) / unit for c in claims])
    models = [c.model for c in claims]
    estimated = utility_table(models, tenants, loads, units, "estimate")
    tried = CANDIDATES if policy is SharePolicy.LEAST else (policy,)
    allocations = {
        p: _allocate(p, claims, models, tenants, loads, units, unit) for p in tried
    }  # fmt: skip
    chosen = _least(allocations, estimated) if policy is SharePolicy.LEAST else policy
    allocation = allocations[chosen]
    shares = tuple(
        (c.application, float(a) * unit) for c, a in zip(claims, allocation, strict=True)
    )
    return NodeSplit(policy, chosen, units * unit, shares, _met(estimated, allocation))


def _allocate(
    policy: SharePolicy,
    claims: Sequence[Claim],
    models: Sequence[PerformanceModel],
    tenants: Sequence[Tenant],
    loads: np.ndarray,
    units: int,
    unit: float,
) -> IntArray:
    if policy is SharePolicy.NJC:
        return njc_allocation([c.demand.estimate / unit for c in claims], units)
    table = utility_table(models, tenants, loads, units, "upper")
    found = solve(WELFARE[policy], table, units, Box.unbounded(len(claims), units))
    return trimmed(table, found)


def trimmed(table: np.ndarray, allocation: IntArray) -> IntArray:
    """Each share cut to the least allocation with the same utility in ``table``."""
    rows = np.arange(len(table))
    reached = table[rows, allocation]
    return np.array([int(np.argmax(table[i] >= reached[i] - 1e-9)) for i in rows], dtype=np.int64)


def _met(estimated: np.ndarray, allocation: IntArray) -> bool:
    rows = np.arange(len(estimated))
    return bool(np.all(estimated[rows, allocation] >= MET))


def _least(allocations: Mapping[SharePolicy, IntArray], estimated: np.ndarray) -> SharePolicy:
    """The policy keeping every SLO met with the least reserved; else the one whose
    worst-off service is best off, then the least reserved (ties: the order of
    :data:`CANDIDATES`)."""
    rows = np.arange(len(estimated))

    def rank(policy: SharePolicy) -> tuple[bool, float, int, int]:
        allocation = allocations[policy]
        worst = float(estimated[rows, allocation].min()) if len(rows) else 1.0
        met = _met(estimated, allocation)
        return (not met, 0.0 if met else -worst, int(allocation.sum()), CANDIDATES.index(policy))

    return min(allocations, key=rank)
