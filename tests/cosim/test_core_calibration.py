"""The per-core fit: it recovers known coefficients from a sweep-shaped JSON, holds
the last round out, leaves saturated windows aside, refuses a broken sweep in one
line, and the committed fit is what its committed sweeps give."""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from yarn_adapt.cosim.core_calibration import calibrate, load_sweep, main, windows_of
from yarn_adapt.cosim.interference import (
    CORE_CALIBRATION,
    CoreInterference,
    CorePressure,
    contended_p95_ms,
)
from yarn_adapt.errors import InputError
from yarn_adapt.testbed.sweep import cells, pressure_of

TRUTH = CoreInterference(cpu=0.7, presence=0.08, memory=0.5)


def synthetic_sweep(noise: float = 0.03, seed: int = 3) -> dict[str, Any]:
    rng = random.Random(seed)
    windows = []
    for number, rate in enumerate((30.0, 60.0, 45.0)):
        for cell in cells():
            pressure = pressure_of(cell)
            truth = contended_p95_ms(3.0, rate, 1.0, CorePressure(**pressure), TRUTH)
            windows.append(
                {
                    "round": number,
                    "cell": asdict(cell),
                    "pressure": pressure,
                    "rate_rps": rate,
                    "requests": int(rate * 5),
                    "cpu_ms_median": 3.0 * math.exp(rng.gauss(0, noise)),
                    "p95_ms": truth * math.exp(rng.gauss(0, noise)),
                    "burner_cpu_share": min(0.9, 0.45 * cell.threads),
                }
            )
    return {"windows": windows}


def test_the_fit_recovers_known_coefficients_and_scores_the_held_out_round() -> None:
    result = calibrate([("synthetic", synthetic_sweep())])
    fitted = result["coefficients"]
    assert fitted["cpu"] == pytest.approx(TRUTH.cpu, rel=0.15)
    assert fitted["memory"] == pytest.approx(TRUTH.memory, rel=0.25)
    assert fitted["presence"] == pytest.approx(TRUTH.presence, abs=0.05)
    assert result["variability"] == pytest.approx(1.0, rel=0.25)  # generated at M/M/1
    assert result["error"]["held_out"]["windows"] == len(cells())
    assert result["error"]["held_out"]["median"] < 0.05
    # the node-wide model cannot tell weights apart: it misses more on the same windows
    wide = result["node_wide"]["error"]["held_out"]
    assert wide["median"] > result["error"]["held_out"]["median"]


def test_the_held_out_round_is_the_last_and_never_fitted() -> None:
    found = windows_of(synthetic_sweep(), "s")
    assert {w.round for w in found if w.held_out} == {2}
    assert all(not w.held_out for w in found if w.round < 2)


def test_saturated_windows_are_left_out_and_counted() -> None:
    before = calibrate([("s", synthetic_sweep())])["saturated_windows"]["count"]
    sweep = synthetic_sweep()
    light = next(w for w in sweep["windows"] if w["cell"]["threads"] == 0)
    light["p95_ms"] = 10_000.0  # a window without batch, far from saturation
    result = calibrate([("s", sweep)])
    assert result["saturated_windows"]["count"] == before + 1
    assert f"0xnone+{light['cell']['hogs']}hog" in result["saturated_windows"]["cells"]


def test_a_broken_sweep_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InputError, match=r"^bad: not a testbed sweep \('windows'\)$"):
        windows_of({"rounds": []}, "bad")
    path = tmp_path / "sweep.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match=r"sweep.json: not JSON"):
        load_sweep(path)
    assert main(["fit", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_committed_fit_is_what_its_sweeps_give() -> None:
    committed = json.loads(CORE_CALIBRATION.read_text())
    root = CORE_CALIBRATION.parents[2]
    bodies = [(source, load_sweep(root / source)) for source in committed["sources"]]
    refit = calibrate(bodies)
    for name, value in committed["coefficients"].items():  # to the solver's tolerance
        assert refit["coefficients"][name] == pytest.approx(value, abs=0.01)
    assert refit["error"]["held_out"]["median"] == pytest.approx(
        committed["error"]["held_out"]["median"], abs=0.01
    )
