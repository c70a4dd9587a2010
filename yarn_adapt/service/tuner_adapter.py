"""Adapters from the tuner (:mod:`yarn_adapt.tuning.tuner`) to the service's
:class:`~yarn_adapt.service.proposer.Proposer`: the tuner's proposal becomes a
:class:`~yarn_adapt.service.records.Suggestion`."""

from __future__ import annotations

from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.service.backend import Observed
from yarn_adapt.service.records import Suggestion
from yarn_adapt.service.settings import Settings


class TunerUnavailable(YarnAdaptError):
    """This build has no tuner."""


def _missing() -> TunerUnavailable:
    return TunerUnavailable("the tuner (yarn_adapt.tuning.tuner) is not part of this build")


class SnapshotProposer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        raise _missing()

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        raise _missing()


class SimulationProposer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        raise _missing()

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        raise _missing()
