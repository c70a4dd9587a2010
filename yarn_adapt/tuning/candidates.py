"""Which of a group's candidates the tuner takes, and why (pure).

Three candidates: the configuration that runs, the search's best, and -- with a
history to replay -- the hindsight static (:mod:`yarn_adapt.tuning.hindsight`). Each
carries its :class:`~yarn_adapt.tuning.group_tuning.Prediction`; they are compared on
``score_s`` (the jobs in progress and, with a forecast, the horizon's jobs).

* Without a hindsight static: the search's best when it beats the running
  configuration by ``min_improvement``, else the running one (AdaptiveConfig §3.3).
* With one: the hindsight static, unless the best of the other two beats it by
  ``gain`` (the larger of ``hindsight_gain`` and ``min_improvement``). A prediction
  for one interval's jobs is optimistic about the configuration it was searched for;
  the static that would have served the last hours is the safer default.
"""

from __future__ import annotations

from dataclasses import dataclass

from yarn_adapt.tuning.group_tuning import Prediction
from yarn_adapt.tuning.proposal import seconds_text, worth_it
from yarn_adapt.tuning.space import GroupSetting

RUNNING = "running"
SEARCH = "search"
HINDSIGHT = "hindsight"


@dataclass(frozen=True)
class Candidate:
    """A candidate configuration of the group: its name, its setting (``None``: the
    running configuration as it is) and its prediction."""

    name: str
    setting: GroupSetting | None
    prediction: Prediction

    @property
    def score_s(self) -> float:
        return self.prediction.score_s


@dataclass(frozen=True)
class Choice:
    """The candidate taken and why, in words for operators."""

    candidate: Candidate
    why: str


def choose(
    running: Candidate, searched: Candidate, hindsight: Candidate | None, gain: float
) -> Choice:
    """The candidate the tuner takes (see the module docstring); ``gain`` is
    ``min_improvement`` without a hindsight static, else the gain needed to leave it."""
    if hindsight is None:
        return _without_hindsight(running, searched, gain)
    challenger = min((searched, running), key=lambda c: c.score_s)
    if worth_it(hindsight.score_s, challenger.score_s, gain):
        return Choice(challenger, _leaves(challenger, hindsight, gain))
    return Choice(hindsight, _holds(hindsight, challenger, gain))


def _without_hindsight(running: Candidate, searched: Candidate, gain: float) -> Choice:
    if worth_it(running.score_s, searched.score_s, gain):
        return Choice(searched, "")
    return Choice(running, "")


def _leaves(challenger: Candidate, hindsight: Candidate, gain: float) -> str:
    who = _named(challenger)
    return (
        f"{who} predicts {seconds_text(challenger.score_s)} against "
        f"{seconds_text(hindsight.score_s)} under the hindsight static "
        f"({_described(hindsight)}): {_better(challenger, hindsight)}, at least the "
        f"{gain:.0%} needed to leave it"
    )


def _holds(hindsight: Candidate, challenger: Candidate, gain: float) -> str:
    who = _named(challenger)
    return (
        f"hindsight static ({_described(hindsight)}) predicts "
        f"{seconds_text(hindsight.score_s)}; {who} "
        f"{seconds_text(challenger.score_s)}: {_better(challenger, hindsight)}, short of "
        f"the {gain:.0%} needed to leave it"
    )


def _named(challenger: Candidate) -> str:
    return "the running configuration" if challenger.name == RUNNING else "the search's best"


def _described(candidate: Candidate) -> str:
    return candidate.setting.describe() if candidate.setting is not None else "as it runs"


def _better(challenger: Candidate, hindsight: Candidate) -> str:
    if not (0 < hindsight.score_s < float("inf")):
        return "the hindsight static never finishes the jobs"
    gain = 1.0 - challenger.score_s / hindsight.score_s
    return f"{gain:.0%} better" if gain >= 0 else f"{-gain:.0%} worse"
