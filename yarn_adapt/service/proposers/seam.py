"""The service's seam to the tuner.

A :class:`Proposer` turns an observation into a
:class:`~yarn_adapt.service.state.records.Suggestion` (the proposed configuration,
predicted latency per group and for the cluster, the reason for each change), or
``None`` when no group was triggered. Which one the
service runs: :mod:`yarn_adapt.service.proposers.choose`.
"""

from __future__ import annotations

from typing import Protocol

from yarn_adapt.service.backend import Observed
from yarn_adapt.service.state.records import Suggestion


class Proposer(Protocol):
    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        """A suggestion for the groups triggered in ``observed``, leaving the groups
        in ``frozen`` (cooling down) as they are; ``None`` when nothing triggered."""
        ...
