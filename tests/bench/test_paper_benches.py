"""The AdaptiveConfig benchmarks end to end on a SWIM trace none of them was built on:
the bundled FB-2009 day with its gaps and byte sizes redrawn (same format, other
numbers). Each must finish and end with its JSON figures."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from yarn_adapt.cli import main
from yarn_adapt.workload.bundled import bundled_trace

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def unseen_swim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3000 jobs: each gap and byte count of the bundled day scaled by a random factor."""
    rng = random.Random(7)
    rows, submit = [], 0
    source = bundled_trace().read_text().splitlines()
    for index, line in enumerate(source[:3000]):
        _, _, gap, *sizes = line.split("\t")
        submit += int(int(gap) * rng.uniform(0.5, 1.5))
        scaled = [str(int(int(size) * rng.uniform(0.3, 3.0))) for size in sizes]
        rows.append("\t".join([f"job{index}", str(submit), gap, *scaled]))
    path = tmp_path_factory.mktemp("unseen") / "swim.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


def figures(
    name: str, trace: Path, capsys: pytest.CaptureFixture[str], *settings: str
) -> dict[str, object]:
    extra = [arg for setting in settings for arg in ("--set", setting)]
    assert main(["bench", name, "--quick", "--trace", str(trace), *extra]) == 0
    parsed: dict[str, object] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert parsed["bench"] == name
    return parsed


def test_comparator_accuracy_on_an_unseen_trace(
    unseen_swim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the protocol on fewer samples and truth seeds: the same code, a third of the time
    found = figures("comparator-accuracy", unseen_swim, capsys, "samples=2", "truth_seeds=1")
    for key in ("best_share", "best_share_capacity", "best_share_fair"):
        value = found[key]
        assert isinstance(value, float | int) and 0 <= value <= 100, (key, value)
    excess, mixes = found["mean_excess_nonbest"], found["mixes"]
    assert isinstance(excess, float | int) and excess >= 0
    assert isinstance(mixes, int) and mixes >= 2


def test_adaptive_latency_on_an_unseen_trace(
    unseen_swim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = figures("adaptive-latency", unseen_swim, capsys)
    ratios = [value for key, value in found.items() if key.startswith("ratio_") and "min" in key]
    assert ratios and all(isinstance(r, float | int) and r > 0 for r in ratios), found
    assert found["forecast_intervals"] == 0, found  # the service's tuner does not forecast


def test_search_scale_on_an_unseen_trace(
    unseen_swim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the full (unpruned) search's loss is tested in tests/tuning/test_search_scale.py;
    # here the production path alone, one round per scheduler
    found = figures("search-scale", unseen_swim, capsys, "full=no")
    rows = found["rows"]
    assert isinstance(rows, list) and len(rows) == 2
    assert {row["scheduler"] for row in rows} == {"capacity", "fair"}
    assert found["path"] == "tuner.propose"
    wall = found["max_wall_s"]
    assert isinstance(wall, float) and wall == max(row["wall_s"] for row in rows) > 0
    assert found["max_cpu_s"] == max(row["cpu_s"] for row in rows) > 0
    assert all(0 <= row["indifferent_groups"] <= row["groups"] for row in rows)
    # one worker per group: the slowest group's span and the DP after it, both parts
    # of the in-process wall
    for row in rows:
        assert 0 < row["slowest_group_s"] + row["after_groups_s"] <= row["wall_s"], row
    per_worker = found["max_one_worker_per_group_s"]
    expected = max(r["slowest_group_s"] + r["after_groups_s"] for r in rows)
    assert per_worker == pytest.approx(expected, abs=0.002)
