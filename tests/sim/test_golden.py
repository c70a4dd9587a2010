"""The simulator's results are pinned: the quick scenarios of
:mod:`tests.sim.golden` give, to the last bit, what the engine gave before it was
reworked for scale (fixtures/golden.json, recorded at that commit), on every core
(:mod:`yarn_adapt.sim.native`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sim.golden import SCENARIOS, fingerprint
from tests.sim.test_native import engines

PINNED = json.loads((Path(__file__).parent / "fixtures" / "golden.json").read_text())
QUICK = [s for s in SCENARIOS if s.quick]


def test_every_quick_scenario_is_pinned() -> None:
    assert sorted(PINNED) == sorted(s.name for s in QUICK)


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("scenario", QUICK, ids=lambda s: s.name)
def test_results_are_the_pinned_ones(scenario: object, engine: str) -> None:
    figures = fingerprint(scenario.run(engine))  # type: ignore[attr-defined]
    figures.pop("job_rows")
    assert figures == PINNED[scenario.name]  # type: ignore[attr-defined]
