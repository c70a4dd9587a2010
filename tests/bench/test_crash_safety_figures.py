"""The crash-safety bench's figures from trial results (the trials themselves run on
the mini clusters in tests/apply/test_crash_safety.py and in the bench)."""

from __future__ import annotations

import json

from yarn_adapt.bench.crash_harness import Trial, TrialResult, summarize
from yarn_adapt.bench.crash_safety import _rows
from yarn_adapt.yarn.apply import ApplyStep


def result(path: str, by_step: str, outcome: str, seconds: float, *problems: str) -> TrialResult:
    truth = "new" if outcome == "applied" else "old"
    trial = Trial("normal", kill_after=ApplyStep.WRITTEN)
    return TrialResult(path, "normal", trial, by_step, truth, outcome, problems, seconds, 0.1)


def test_the_figures_count_trials_disagreements_and_where_kills_landed() -> None:
    results = [
        result("file+refresh", "after:written", "applied", 2.0),
        result("file+refresh", "random:planned", "approved", 1.0),
        result("file+refresh", "after:written", "applied", 9.0, "the RM does not report it"),
        result("mutation", "random:finished", "failed", 0.5),
    ]
    figures = summarize(results, wall_s=12.34)
    assert json.loads(json.dumps(figures)) == figures  # one JSON line
    assert figures["trials"] == 4 and figures["inconsistent"] == 1
    assert figures["by_step"] == {"after:written": 2, "random:finished": 1, "random:planned": 1}
    assert figures["wall_s"] == 12.3
    paths = figures["paths"]
    assert isinstance(paths, dict)
    assert paths["file+refresh"] == {
        "trials": 3,
        "inconsistent": 1,
        "outcomes": {"applied": 2, "approved": 1},
        "runs": {"new": 2, "old": 1},
        "trial_s_mean": 4.0,
        "trial_s_median": 2.0,
        "trial_s_worst": 9.0,
    }
    assert _rows(results)[0] == {
        "path": "file+refresh", "kind": "normal", "kill": "after:written",
        "trials": 2, "inconsistent": 1, "applied": 2,
    }  # fmt: skip
