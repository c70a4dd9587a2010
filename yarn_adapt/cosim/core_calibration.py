"""Fit the per-core interference model (:mod:`yarn_adapt.cosim.interference`) to
testbed sweeps (:mod:`yarn_adapt.testbed.sweep`) and report it on held-out windows.

* **Held out**: each sweep's last round (its own request rate, run after the
  others), never seen by the fit.
* **Service time** S: the median per-request CPU time of the service over the fit
  rounds' windows without batch (no burner, no hog).
* **Coefficients** (``cpu``, ``presence``, ``memory``, each >= 0) and the service's
  queueing ``variability`` (Allen-Cunneen's (ca^2 + cs^2)/2; the testbed's service
  does a fixed amount of work, so its own, not the interference's, and not carried
  to the simulator, whose services keep the M/M/c value 1): the least-squares fit of
  the log of the predicted P95 to the log of the measured one over the fit windows,
  the prediction being :func:`~yarn_adapt.cosim.interference.contended_p95_ms` on
  one core (the service's interpreter runs one request at a time) at the window's
  completed request rate. Windows the service could not keep up with (measured P95
  over ``SATURATED_FACTOR`` x S) are counted and left out of fit and error alike:
  the formula only says "saturated" there.
* **Beside it**, the node-wide model it replaces (``(1 + I b)`` on the whole latency,
  b the burners' CPU share of the service's core, the queueing on what batch leaves),
  fitted on the same windows, scored on the same held-out ones.

    python -m yarn_adapt.cosim.core_calibration fit SWEEP.json [SWEEP.json ...] \\
        > docs/calibration/core-model.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from yarn_adapt.cosim.interference import (
    CoreInterference,
    CorePressure,
    contended_p95_ms,
    queueing_p95_ms,
)
from yarn_adapt.errors import InputError

SATURATED_FACTOR = 30.0
MIN_REQUESTS = 20
BOUND = 50.0


@dataclass(frozen=True)
class SweepWindow:
    source: str
    round: int
    held_out: bool
    cell: str
    pressure: CorePressure
    rate_rps: float
    p95_ms: float
    cpu_ms: float
    burner_share: float

    @property
    def alone(self) -> bool:
        return self.pressure.threads == 0 and self.pressure.hogs == 0


def windows_of(body: Mapping[str, Any], source: str) -> list[SweepWindow]:
    """The usable windows of one sweep (enough requests, every figure present)."""
    try:
        rows = list(body["windows"])
        last = max(int(row["round"]) for row in rows)
        found = []
        for row in rows:
            if row.get("p95_ms") is None or int(row.get("requests", 0)) < MIN_REQUESTS:
                continue
            cell = row["cell"]
            pressure = row["pressure"]
            found.append(
                SweepWindow(
                    source=source,
                    round=int(row["round"]),
                    held_out=int(row["round"]) == last,
                    cell=f"{cell['threads']}x{cell['weights']}+{cell['hogs']}hog",
                    pressure=CorePressure(
                        weighted=float(pressure["weighted"]),
                        threads=float(pressure["threads"]),
                        hogs=float(pressure["hogs"]),
                    ),
                    rate_rps=float(row["rate_rps"]),
                    p95_ms=float(row["p95_ms"]),
                    cpu_ms=float(row["cpu_ms_median"]),
                    burner_share=float(row["burner_cpu_share"]),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{source}: not a testbed sweep ({exc})") from None
    return found


def service_ms(windows: Sequence[SweepWindow]) -> float:
    alone = [w.cpu_ms for w in windows if w.alone and not w.held_out]
    if not alone:
        raise InputError("the sweeps have no fit window without batch: no service time")
    return statistics.median(alone)


Predict = Callable[[SweepWindow, Sequence[float]], float]


def per_core(s_ms: float) -> Predict:
    """The per-core model at service time ``s_ms``; x = (cpu, presence, memory,
    variability)."""

    def predict(window: SweepWindow, x: Sequence[float]) -> float:
        model = CoreInterference(cpu=x[0], presence=x[1], memory=x[2])
        return contended_p95_ms(
            s_ms, window.rate_rps, 1.0, window.pressure, model, variability=x[3]
        )

    return predict


def node_wide(s_ms: float) -> Predict:
    """The model it replaces: queueing on what batch leaves of the core, the whole
    latency times (1 + I b); x = (I, variability)."""

    def predict(window: SweepWindow, x: Sequence[float]) -> float:
        share = min(window.burner_share, 0.95)
        queued = queueing_p95_ms(
            s_ms, window.rate_rps, 1.0 - share, ceiling_ms=100 * s_ms, variability=x[1]
        )
        return min(queued * (1.0 + x[0] * share), 100 * s_ms)

    return predict


def fit_coefficients(
    predict: Predict,
    windows: Sequence[SweepWindow],
    start: Sequence[float],
) -> list[float]:
    def residuals(x: np.ndarray) -> np.ndarray:
        values = [float(v) for v in x]
        return np.array([math.log(predict(w, values) / w.p95_ms) for w in windows])

    solved = least_squares(residuals, np.array(start), bounds=(0.0, BOUND))
    return [round(float(v), 4) for v in solved.x]


def errors(
    predict: Predict,
    windows: Sequence[SweepWindow],
    x: Sequence[float],
) -> dict[str, float | int]:
    relative = [abs(predict(w, x) - w.p95_ms) / w.p95_ms for w in windows]
    logs = [math.log(predict(w, x) / w.p95_ms) for w in windows]
    if not relative:
        return {"windows": 0}
    return {
        "windows": len(relative),
        "median": round(statistics.median(relative), 3),
        "mean": round(statistics.fmean(relative), 3),
        "worst": round(max(relative), 3),
        "rms_log": round(math.sqrt(statistics.fmean(v * v for v in logs)), 3),
    }


def by_cell(
    predict: Predict,
    windows: Sequence[SweepWindow],
    x: Sequence[float],
) -> dict[str, dict[str, float]]:
    """Per cell, the held-out windows' median measured and predicted P95."""
    cells: dict[str, list[SweepWindow]] = {}
    for window in windows:
        cells.setdefault(window.cell, []).append(window)
    return {
        cell: {
            "measured_ms": round(statistics.median(w.p95_ms for w in group), 2),
            "predicted_ms": round(statistics.median(predict(w, x) for w in group), 2),
        }
        for cell, group in sorted(cells.items())
    }


def calibrate(bodies: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    every = [w for source, body in bodies for w in windows_of(body, source)]
    s_ms = service_ms(every)
    saturated = [w for w in every if w.p95_ms > SATURATED_FACTOR * s_ms]
    usable = [w for w in every if w.p95_ms <= SATURATED_FACTOR * s_ms]
    fitting = [w for w in usable if not w.held_out]
    held = [w for w in usable if w.held_out]
    if not fitting or not held:
        raise InputError("the sweeps need fit rounds and a held-out last round")
    cores, wide = per_core(s_ms), node_wide(s_ms)
    x = fit_coefficients(cores, fitting, (1.0, 0.05, 0.5, 0.5))
    i = fit_coefficients(wide, fitting, (1.0, 0.5))
    return {
        "model": "yarn_adapt.cosim.interference.contended_p95_ms",
        "sources": [source for source, _ in bodies],
        "service_ms": round(s_ms, 4),
        "coefficients": {"cpu": x[0], "presence": x[1], "memory": x[2]},
        "variability": x[3],
        "saturated_windows": {
            "count": len(saturated),
            "cells": sorted({w.cell for w in saturated}),
        },
        "error": {"fit": errors(cores, fitting, x), "held_out": errors(cores, held, x)},
        "held_out_by_cell": by_cell(cores, held, x),
        "node_wide": {
            "interference": i[0],
            "variability": i[1],
            "error": {"fit": errors(wide, fitting, i), "held_out": errors(wide, held, i)},
        },
    }


def load_sweep(path: Path) -> dict[str, Any]:
    try:
        body = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the sweep ({exc.strerror})") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise InputError(f"{path}: not a testbed sweep (not an object)")
    return body


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m yarn_adapt.cosim.core_calibration")
    sub = parser.add_subparsers(dest="command", required=True)
    fit_parser = sub.add_parser("fit")
    fit_parser.add_argument("sweeps", nargs="+", type=Path)
    args = parser.parse_args(argv)
    try:
        result = calibrate([(str(p), load_sweep(p)) for p in args.sweeps])
    except InputError as exc:
        print(f"core_calibration: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
