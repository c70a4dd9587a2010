"""Latency-critical services sharing a node: the pool split by a Cilantro policy
(``yarn_adapt/demand/shared.py``), not a sum of independent upper bounds."""

from __future__ import annotations

import pytest

from yarn_adapt.demand.learner import ProfiledCurve, demand_bounds
from yarn_adapt.demand.model import Demand
from yarn_adapt.demand.policies import DEFAULT_BETA
from yarn_adapt.demand.shared import Claim, NodeSplit, SharePolicy, split_node

GOAL = 0.95


def curve(reach: float, *, optimistic: bool = False) -> ProfiledCurve:
    """Performance against vcores per request/s: the estimate reaches the goal at
    ``reach``, the lower bound at 1.5 x ``reach``, the upper bound at 0.75 x ``reach``
    (``optimistic``: the upper bound is the estimate)."""
    grid = [0.0, 0.5 * reach, 0.75 * reach, reach, 1.5 * reach, 2.0 * reach]
    estimate = [0.0, 0.5, 0.8, GOAL, 1.0, 1.0]
    lower = [0.0, 0.3, 0.6, 0.8, GOAL, 1.0]
    upper = estimate if optimistic else [0.0, 0.7, GOAL, 1.0, 1.0, 1.0]
    return ProfiledCurve.of(grid, estimate, lower, upper)


def claim(name: str, reach: float, load: float, *, optimistic: bool = False) -> Claim:
    model = curve(reach, optimistic=optimistic)
    bounds = demand_bounds(model, GOAL)
    recommended = min(max(bounds.recommendation(DEFAULT_BETA), bounds.lower), bounds.upper)
    demand = Demand(name, load, recommended * load, bounds.lower * load, bounds.upper * load)
    return Claim(name, load, demand, GOAL, model)


# shop: estimate 2.0 vcores at 100 req/s, bound 3.0; ads: the same at 50 req/s.
SHOP, ADS = claim("shop", 0.02, 100.0), claim("ads", 0.04, 50.0)
TIGHT_SHOP = claim("shop", 0.02, 100.0, optimistic=True)
TIGHT_ADS = claim("ads", 0.04, 50.0, optimistic=True)


@pytest.mark.parametrize(
    ("claims", "pool", "policy", "chosen", "shares", "met"),
    [
        # room for both upper bounds: NJC keeps each recommendation (eq. 6), below the bound
        ((SHOP, ADS), 6.0, SharePolicy.NJC, SharePolicy.NJC, (2.8, 2.8), True),
        # welfare of the optimistic bounds: each trimmed to where its upper bound meets the
        # SLO, which the learned estimate does not: not every SLO met
        ((SHOP, ADS), 6.0, SharePolicy.SW, SharePolicy.SW, (1.5, 1.5), False),
        ((SHOP, ADS), 6.0, SharePolicy.EW, SharePolicy.EW, (1.5, 1.5), False),
        # the default: the policy that keeps every SLO met with the least reserved
        ((SHOP, ADS), 6.0, SharePolicy.LEAST, SharePolicy.NJC, (2.8, 2.8), True),
        # a pool short of both recommendations: NJC's equal shares still meet both
        ((SHOP, ADS), 4.0, SharePolicy.LEAST, SharePolicy.NJC, (2.0, 2.0), True),
        # bands whose optimistic side is the estimate: the welfare policies meet every
        # SLO with less than NJC, so the default takes the first of them
        ((TIGHT_SHOP, TIGHT_ADS), 6.0, SharePolicy.LEAST, SharePolicy.SW, (2.0, 2.0), True),
        # too small a pool for anyone: the one whose worst-off service is best off
        ((SHOP, ADS), 2.5, SharePolicy.LEAST, SharePolicy.NJC, (1.3, 1.2), False),
        ((SHOP, ADS), 2.5, SharePolicy.SW, SharePolicy.SW, (1.5, 1.0), False),
    ],
)
def test_a_shared_node_is_split_by_the_policy(
    claims: tuple[Claim, ...],
    pool: float,
    policy: SharePolicy,
    chosen: SharePolicy,
    shares: tuple[float, ...],
    met: bool,
) -> None:
    split = split_node(claims, pool, policy)
    assert split.requested is policy and split.policy is chosen
    assert [share for _, share in split.shares] == pytest.approx(shares)
    assert split.slo_met is met
    assert split.reserved <= pool + 1e-9


def test_the_split_keeps_less_than_the_sum_of_independent_upper_bounds() -> None:
    independent = SHOP.demand.upper + ADS.demand.upper
    split = split_node((SHOP, ADS), independent)
    assert split.slo_met and split.reserved < independent


@pytest.mark.parametrize(
    ("split", "words"),
    [
        (NodeSplit(SharePolicy.LEAST, SharePolicy.NJC, 6.0, (("shop", 2.8), ("ads", 2.75)), True),
         "policy least -> njc (every SLO met by the learned curves): shop 2.80 + ads 2.75 of "
         "6.00 vcores pooled"),
        (NodeSplit(SharePolicy.EW, SharePolicy.EW, 2.5, (("shop", 1.3), ("ads", 1.2)), False),
         "policy ew (not every SLO met): shop 1.30 + ads 1.20 of 2.50 vcores pooled"),
    ],
)  # fmt: skip
def test_the_reason_names_the_policy_and_each_share(split: NodeSplit, words: str) -> None:
    assert split.describe() == words
