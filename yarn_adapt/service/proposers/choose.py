"""Which :class:`~yarn_adapt.service.proposers.seam.Proposer` the service runs, from its
settings. The adapters to the tuner (:mod:`yarn_adapt.service.proposers.tuner_adapter`) and to
Cilantro's policies (:mod:`yarn_adapt.service.proposers.cilantro_adapter`) are imported only
when chosen: each pulls in its whole engine.
"""

from __future__ import annotations

from pathlib import Path

from yarn_adapt.service.proposers.planning import GuardCapacity, OnRealCapacity
from yarn_adapt.service.proposers.seam import Proposer
from yarn_adapt.service.settings import Settings


def snapshot_proposer(settings: Settings) -> Proposer:
    """The proposer ``[tuning] proposer`` names, reading a real RM's snapshot
    (``yarn-adapt serve``): the AdaptiveConfig tuner, or Cilantro's policies. With the
    co-location guard on, either plans on the nodes' real capacity, not on totals the
    guard lowered (:mod:`yarn_adapt.service.proposers.planning`)."""
    proposer = _tuner_proposer(settings)
    if not settings.colocation.enabled:
        return proposer
    return OnRealCapacity(proposer, GuardCapacity(Path(settings.state.dir) / "guard"))


def _tuner_proposer(settings: Settings) -> Proposer:
    if settings.tuning.proposer == "cilantro":
        return cilantro_proposer(settings)
    from yarn_adapt.service.proposers.tuner_adapter import rm_proposer

    return rm_proposer(settings)


def cilantro_proposer(settings: Settings) -> Proposer:
    """Cilantro's learners and policy (:mod:`yarn_adapt.service.proposers.cilantro_adapter`);
    reads a real RM's snapshot or a simulated cluster's view."""
    from yarn_adapt.service.proposers.cilantro_adapter import CilantroProposer

    return CilantroProposer(settings)
