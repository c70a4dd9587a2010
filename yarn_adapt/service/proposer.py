"""The service's seam to the tuner.

A :class:`Proposer` turns an observation into a :class:`~yarn_adapt.service.records.Suggestion`
(the proposed configuration, predicted latency per group and for the cluster, the
reason for each change), or ``None`` when no group was triggered. The adapters to
the tuner of :mod:`yarn_adapt.tuning.tuner` are in
:mod:`yarn_adapt.service.tuner_adapter`, imported only through the factories here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from yarn_adapt.service.backend import Observed
from yarn_adapt.service.records import Suggestion
from yarn_adapt.service.settings import Settings


class Proposer(Protocol):
    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        """A suggestion for the groups triggered in ``observed``, leaving the groups
        in ``frozen`` (cooling down) as they are; ``None`` when nothing triggered."""
        ...


def snapshot_proposer(settings: Settings) -> Proposer:
    """The proposer ``[tuning] proposer`` names, reading a real RM's snapshot
    (``yarn-adapt serve``): the AdaptiveConfig tuner, or Cilantro's policies. With the
    co-location guard on, either plans on the nodes' real capacity, not on totals the
    guard lowered (:mod:`yarn_adapt.service.planning`)."""
    proposer = _tuner_proposer(settings)
    if not settings.colocation.enabled:
        return proposer
    from yarn_adapt.service.planning import GuardCapacity, OnRealCapacity

    return OnRealCapacity(proposer, GuardCapacity(Path(settings.state.dir) / "guard"))


def _tuner_proposer(settings: Settings) -> Proposer:
    if settings.tuning.proposer == "cilantro":
        return cilantro_proposer(settings)
    from yarn_adapt.service.tuner_adapter import SnapshotProposer

    return SnapshotProposer(settings)


def cilantro_proposer(settings: Settings) -> Proposer:
    """Cilantro's learners and policy (:mod:`yarn_adapt.service.cilantro_adapter`);
    reads a real RM's snapshot or a simulated cluster's view."""
    from yarn_adapt.service.cilantro_adapter import CilantroProposer

    return CilantroProposer(settings)
