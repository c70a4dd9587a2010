"""The interference sweep: its cells and pressure terms (plain), and a short live
sweep on real cgroups (root) whose direction the model's terms stand on."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest

from yarn_adapt.testbed.sweep import Cell, SweepSettings, cells, pressure_of, run


def test_every_weighting_is_swept_only_with_burners_on_the_core() -> None:
    grid = cells((0, 2), (0, 1))
    assert Cell(0, "none", 0) in grid and Cell(0, "none", 1) in grid
    assert {c.weights for c in grid if c.threads} == {"yarn", "flat", "low"}
    assert len(grid) == 2 * (1 + 3)


def test_the_pressure_follows_the_weights_in_force() -> None:
    # YARN's hierarchy weighs as one group whatever the number of containers
    assert pressure_of(Cell(4, "yarn", 0))["weighted"] == 1.0
    assert pressure_of(Cell(4, "flat", 0))["weighted"] == 4.0
    assert pressure_of(Cell(4, "low", 0))["weighted"] < 0.01
    assert pressure_of(Cell(4, "low", 1)) == {"weighted": 2 / 1024, "threads": 4.0, "hogs": 0.5}


@pytest.mark.alone  # latency under CPU contention on this machine's two CPUs
@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root")
def test_a_short_sweep_shows_weights_decide_what_burners_cost(tmp_path: Path) -> None:
    settings = SweepSettings(rates=(40.0,), window_s=3.0, settle_s=1.0, threads=(0, 2), hogs=(0,))
    result = run(settings, tmp_path)
    rows = {(w["cell"]["threads"], w["cell"]["weights"]): w for w in result["windows"]}  # type: ignore[union-attr,index]
    assert set(rows) == {(0, "none"), (2, "yarn"), (2, "flat"), (2, "low")}
    assert all(w["requests"] >= 60 for w in rows.values())
    alone, flat, low = rows[0, "none"], rows[2, "flat"], rows[2, "low"]
    # two burners at the service's weight each take two thirds of its core
    assert flat["p95_ms"] > 2.0 * alone["p95_ms"]
    assert flat["p95_ms"] > 2.0 * low["p95_ms"]
    assert flat["burner_cpu_share"] > 0.4
    assert statistics.median([alone["cpu_ms_median"], low["cpu_ms_median"]]) > 0
    assert not list(Path("/sys/fs/cgroup/cpu").glob("yarn-adapt-sweep-*"))
