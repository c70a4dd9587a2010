"""Which candidate to pick, given each candidate's mean latency on the same samples
(common random numbers, :mod:`rules.uncertainty`).

* ``expected``: the lowest mean over the samples (the expected latency).
* ``most-likely-best``: the candidate that is best in the most samples. In each
  sample every candidate within ``tie`` (relative) of that sample's best counts as
  best (candidates that behave alike must not split their wins, or a
  configuration with many equivalents would lose to a lone one); the most wins
  wins, the lower expected latency breaks ties. What an operator
  asks -- "which configuration is best?" -- rather than "which is best on average":
  a candidate that is a little better in most situations beats one that is much
  better in a few.

With one sample both are the point estimate's choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

TIE = 0.005


class DecisionRule(StrEnum):
    EXPECTED = "expected"
    MOST_LIKELY_BEST = "most-likely-best"


@dataclass(frozen=True)
class Choice:
    """The chosen candidate (its index), and per candidate its expected latency and
    its share of the samples in which it was best."""

    index: int
    expected: tuple[float, ...]
    win_share: tuple[float, ...]

    def scores(self, rule: DecisionRule) -> tuple[float, ...]:
        """What ``rule`` minimises, per candidate (ties as the rule breaks them)."""
        if rule is DecisionRule.EXPECTED:
            return self.expected
        return tuple(-w for w in self.win_share)


def choose(
    sample_latencies: Sequence[Sequence[float]],
    rule: DecisionRule = DecisionRule.MOST_LIKELY_BEST,
    tie: float = TIE,
) -> Choice:
    """``sample_latencies[c][k]``: candidate ``c``'s mean latency in sample ``k``."""
    table = np.asarray(sample_latencies, dtype=float)
    if table.ndim != 2 or table.shape[0] == 0:
        raise ValueError("choose: need at least one candidate and one sample")
    expected = _mean(table)
    wins = win_shares(table, tie)
    if rule is DecisionRule.EXPECTED:
        index = int(np.argmin(expected))
    else:
        index = min(range(len(wins)), key=lambda c: (-wins[c], expected[c], c))
    return Choice(index, tuple(expected.tolist()), tuple(wins))


def win_shares(table: np.ndarray, tie: float = TIE) -> list[float]:
    """Per candidate, the share of samples in which it is within ``tie`` of the best."""
    candidates, samples = table.shape
    wins = np.zeros(candidates)
    for k in range(samples):
        column = table[:, k]
        best = float(np.min(column))
        # every candidate starves some job in this sample: all tie
        tied = np.isinf(column) if np.isinf(best) else column <= best * (1.0 + tie)
        wins[tied] += 1.0
    shares: list[float] = (wins / samples).tolist()
    return shares


def _mean(table: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        mean: np.ndarray = table.mean(axis=1)
    return mean
