"""Fit the co-location model's service time and interference to the live testbed.

The model (:func:`yarn_adapt.cosim.colocation.lc_p95_ms`, used per service by
:mod:`yarn_adapt.cosim.lra_model`) says a service's P95 is
``S (1 + ln 20 Wq/S) (1 + interference * b)``: S its CPU time per request, Wq the
queueing (Sakasegawa M/M/c) at its load ``rate * S`` on the CPU batch leaves it,
``b`` the batch CPU share of its node. The testbed (``yarn-adapt testbed --json``)
measures each of those per window (:func:`yarn_adapt.testbed.results.window_json`): per
node the batch and services' CPU shares (cpuacct), per service replica its request
rate, the thread CPU time of its own work per request and the P95 of that work's
wall time. So:

* **service time** S of each replica: the median over the ``alone`` windows of its
  per-request CPU time (measured, not inferred); beside it, for comparison, the S
  that makes the queueing formula reproduce its alone P95 (``service_ms_from_p95``);
* **queueing**: per window, the replica's load is ``rate * S`` and its CPU is what
  batch leaves of the node (``1 - b``) in proportion to its load among the node's
  services (as the simulator shares it);
* **interference**: the one coefficient that minimises the squared log error of
  the predicted against the measured P95 over the windows with batch
  (``b >= min_batch_share``) that are not saturated (``rho < 0.99``), of the
  replicas whose service time is at least ``min_service_ms`` (1 ms: the simulated
  application's services take 1.5-6 ms; a request much shorter than the kernel's
  time slice mostly escapes batch, one of a few ms is sliced between batch tasks,
  so the coefficient depends on the scale, see ``own_interference`` per replica).
  ``interference_all_replicas`` is the same fit over every replica,
  ``interference_per_source`` over each testbed run alone (the run-to-run spread).

The fit's error (relative error of the predicted P95, mean / median / worst, and the
RMS log error) is reported for the contended windows with the fitted and with the
model's former default coefficient, and for the alone windows (queueing alone); per
replica, the coefficient its own windows would give (one coefficient for all
services is a simplification the spread shows); and ``end_to_end``: the testbed's
measured end-to-end P95 over the sum of its services' own P95s (what the per-service
model does not represent: HTTP, tracing, wake-ups, the shared host).

    python -m yarn_adapt.cosim.lra_calibration fit RESULT.json [RESULT.json ...] \\
        > docs/calibration/lra-model.json

:func:`fit` (two points: a run-alone and a contended P95) is the same fit by hand.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yarn_adapt.cosim.colocation import NodeModel, lc_p95_ms
from yarn_adapt.errors import InputError

FORMER_INTERFERENCE = 0.2  # NodeModel's default before the calibration
SATURATED_RHO = 0.99
INTERFERENCE_RANGE = (0.0, 50.0)


@dataclass(frozen=True)
class Fit:
    service_ms: float
    interference: float


def fit(
    alone_ms: float,
    contended_ms: float,
    *,
    rate_rps: float,
    cores_alone: float,
    cores_contended: float,
    batch_share: float,
) -> Fit:
    """S from the run-alone P95, then ``interference`` from the contended one."""
    if not all(
        math.isfinite(v) and v > 0
        for v in (alone_ms, contended_ms, rate_rps, cores_alone, cores_contended, batch_share)
    ):
        raise InputError("calibration: every measurement must be a number > 0")
    service_ms = service_from_p95(alone_ms, rate_rps, cores_alone)
    if rate_rps * service_ms / 1000.0 >= SATURATED_RHO * cores_contended:
        raise InputError("calibration: the contended run is saturated; interference unidentifiable")
    queued = _queueing_ms(service_ms, rate_rps, cores_contended)
    return Fit(service_ms, max(0.0, (contended_ms / queued - 1.0) / batch_share))


def service_from_p95(p95_ms: float, rate_rps: float, cores: float) -> float:
    """The service time whose queueing P95 (no interference) at ``rate_rps`` on
    ``cores`` is ``p95_ms`` (P95 grows with S: bisection)."""
    low, high = 1e-6, p95_ms
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if _queueing_ms(mid, rate_rps, cores) < p95_ms else (low, mid)
    return (low + high) / 2


def _queueing_ms(service_ms: float, rate_rps: float, cores: float) -> float:
    model = NodeModel(lc_service_ms=service_ms, interference=0.0, max_latency_factor=1e9)
    return lc_p95_ms(rate_rps * service_ms / 1000.0, cores, 0.0, model)


# --------------------------------------------------------------------------- windows


@dataclass(frozen=True)
class Observation:
    """One service replica in one testbed window."""

    source: str  # file#window index
    window: str
    replica: str  # service@node
    node: int
    requests: int
    rate_rps: float
    cpu_ms: float
    p95_ms: float
    batch_share: float


@dataclass(frozen=True)
class Point:
    """An observation with its model inputs: load and CPU in cores."""

    observation: Observation
    service_ms: float
    load_cores: float
    capacity_cores: float

    @property
    def rho(self) -> float:
        return self.load_cores / max(self.capacity_cores, 1e-9)

    def predicted_ms(self, interference: float) -> float:
        model = NodeModel(
            lc_service_ms=self.service_ms, interference=interference, max_latency_factor=1e9
        )
        b = self.observation.batch_share
        return lc_p95_ms(self.load_cores, self.capacity_cores, b, model)


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    min_requests: int = 20  # a replica's window with fewer has no usable P95
    min_batch_share: float = 0.05  # a window with less batch on the node is "alone"
    min_service_ms: float = 1.0  # replicas the coefficient is fitted on (the sim's scale)


def observations(body: Mapping[str, Any], source: str) -> list[Observation]:
    """The replicas' observations of one testbed result (``result_json``)."""
    windows = body.get("windows")
    if not isinstance(windows, list) or not windows:
        raise InputError(
            f"{source}: no 'windows' (a testbed result from `yarn-adapt testbed --json`)"
        )
    found = []
    for index, window in enumerate(windows):
        where = f"{source}: windows[{index}]"
        try:
            shares = [float(v) for v in window["batch_cpu_share"]]
            for replica in window["services"]:
                node = int(replica["node"])
                found.append(
                    Observation(
                        source=f"{source}#{index}",
                        window=str(window["name"]),
                        replica=f"{replica['service']}@{node}",
                        node=node,
                        requests=int(replica["requests"]),
                        rate_rps=float(replica["rate_rps"]),
                        cpu_ms=_number(replica["cpu_ms_median"]),
                        p95_ms=_number(replica["self_p95_ms"]),
                        batch_share=shares[node],
                    )
                )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(
                f"{where}: not a testbed window ({type(exc).__name__}: {exc})"
            ) from None
    return found


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def service_times(found: Sequence[Observation], settings: FitSettings) -> dict[str, float]:
    """Each replica's CPU time per request: the median over its alone windows."""
    by_replica: dict[str, list[float]] = {}
    for o in found:
        if o.window == "alone" and o.requests >= settings.min_requests and math.isfinite(o.cpu_ms):
            by_replica.setdefault(o.replica, []).append(o.cpu_ms)
    missing = {o.replica for o in found} - set(by_replica)
    if missing:
        raise InputError(f"calibration: no alone window with requests for {sorted(missing)}")
    return {replica: statistics.median(values) for replica, values in by_replica.items()}


def points(
    found: Sequence[Observation], service_ms: Mapping[str, float], settings: FitSettings
) -> list[Point]:
    """Usable observations with their load and CPU (the node's CPU batch leaves,
    shared among its services in proportion to their load, as the simulator does)."""
    node_load: dict[tuple[str, int], float] = {}
    for o in found:
        key = (o.source, o.node)
        node_load[key] = node_load.get(key, 0.0) + o.rate_rps * service_ms[o.replica] / 1000.0
    usable = []
    for o in found:
        if o.requests < settings.min_requests or not math.isfinite(o.p95_ms) or o.p95_ms <= 0:
            continue
        load = o.rate_rps * service_ms[o.replica] / 1000.0
        share = load / node_load[(o.source, o.node)]
        usable.append(Point(o, service_ms[o.replica], load, (1.0 - o.batch_share) * share))
    return usable


def fit_interference(contended: Sequence[Point]) -> float:
    """The coefficient minimising the squared log error (golden section on a
    convex one-dimensional loss)."""
    if not contended:
        raise InputError(
            "calibration: no unsaturated window with batch on the node (of a replica whose "
            "service time is in range)"
        )

    def loss(value: float) -> float:
        return sum(math.log(p.predicted_ms(value) / p.observation.p95_ms) ** 2 for p in contended)

    low, high = INTERFERENCE_RANGE
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(90):  # 0.618^90 of the range: far below the rounding
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        low, high = (low, b) if loss(a) <= loss(b) else (a, high)
    return (low + high) / 2


def errors(group: Sequence[Point], interference: float) -> dict[str, float | int]:
    """How far the model's P95 is from the measured one over ``group``."""
    if not group:
        return {"windows": 0}
    relative = [abs(p.predicted_ms(interference) / p.observation.p95_ms - 1.0) for p in group]
    logs = [math.log(p.predicted_ms(interference) / p.observation.p95_ms) for p in group]
    return {
        "windows": len(group),
        "mean_abs_rel": round(statistics.fmean(relative), 4),
        "median_abs_rel": round(statistics.median(relative), 4),
        "worst_abs_rel": round(max(relative), 4),
        "log_rmse": round(math.sqrt(statistics.fmean(v * v for v in logs)), 4),
        "bias_log_mean": round(statistics.fmean(logs), 4),
    }


def calibrate(
    bodies: Sequence[tuple[str, Mapping[str, Any]]], settings: FitSettings | None = None
) -> dict[str, Any]:
    """The calibration document from testbed results ((source, result_json) pairs)."""
    settings = settings or FitSettings()
    found = [o for source, body in bodies for o in observations(body, source)]
    service_ms = service_times(found, settings)
    usable = points(found, service_ms, settings)
    alone = [p for p in usable if p.observation.batch_share < settings.min_batch_share]
    loaded = [p for p in usable if p.observation.batch_share >= settings.min_batch_share]
    contended = [p for p in loaded if p.rho < SATURATED_RHO]
    scaled = [p for p in contended if p.service_ms >= settings.min_service_ms]
    interference = fit_interference(scaled)
    overall = fit_interference(contended)
    return {
        "model": "yarn_adapt.cosim.colocation.lc_p95_ms",
        "sources": [source for source, _ in bodies],
        "interference": round(interference, 4),
        "interference_all_replicas": round(overall, 4),
        "interference_per_source": _per_source(scaled, [source for source, _ in bodies]),
        "services": [
            _replica(
                replica,
                ms,
                [p for p in alone if p.observation.replica == replica],
                [p for p in contended if p.observation.replica == replica],
            )
            for replica, ms in sorted(service_ms.items())
        ],
        "end_to_end": _end_to_end(bodies, settings),
        "error": {
            "contended": errors(scaled, interference),
            "contended_former_interference": errors(scaled, FORMER_INTERFERENCE),
            "contended_all_replicas": errors(contended, overall),
            "alone": errors(alone, interference),
        },
        "windows": {
            "observations": len(found),
            "usable": len(usable),
            "alone": len(alone),
            "contended": len(contended),
            "contended_fitted": len(scaled),
            "saturated": len(loaded) - len(contended),
            "too_few_requests": len(found) - len(usable),
        },
        "settings": {
            "min_requests": settings.min_requests,
            "min_batch_share": settings.min_batch_share,
            "min_service_ms": settings.min_service_ms,
            "former_interference": FORMER_INTERFERENCE,
        },
    }


def _replica(
    replica: str, service_ms: float, alone: Sequence[Point], contended: Sequence[Point]
) -> dict[str, Any]:
    """A replica's service time (measured, and as its alone P95 implies) and the
    interference its contended windows alone would give: how far one coefficient
    for every service is from each."""
    from_p95 = [
        service_from_p95(p.observation.p95_ms, p.observation.rate_rps, p.capacity_cores)
        for p in alone
    ]
    own = round(fit_interference(contended), 4) if contended else None
    return {
        "replica": replica,
        "service_ms": round(service_ms, 3),
        "service_ms_from_p95": round(statistics.median(from_p95), 3) if from_p95 else None,
        "alone_windows": len(alone),
        "contended_windows": len(contended),
        "own_interference": own,
    }


def _per_source(scaled: Sequence[Point], sources: Sequence[str]) -> dict[str, float | None]:
    """The coefficient each testbed run alone gives (the run-to-run spread)."""
    found: dict[str, float | None] = {}
    for source in sources:
        mine = [p for p in scaled if p.observation.source.rsplit("#", 1)[0] == source]
        found[source] = round(fit_interference(mine), 4) if mine else None
    return found


def _end_to_end(
    bodies: Sequence[tuple[str, Mapping[str, Any]]], settings: FitSettings
) -> dict[str, Any]:
    """The application's measured end-to-end P95 over the sum of its replicas'
    own-work P95s (the entry's slowest replica plus every other service): what the
    per-service model leaves out (HTTP, tracing, scheduling wake-ups, the load
    generator on the shared host), for the alone windows and those with batch."""
    ratios: dict[str, list[float]] = {"alone": [], "batch": []}
    for _, body in bodies:
        for window in body["windows"]:
            slowest: dict[str, float] = {}
            for r in window["services"]:
                value = _number(r["self_p95_ms"])
                if int(r["requests"]) >= settings.min_requests and math.isfinite(value):
                    slowest[r["service"]] = max(slowest.get(r["service"], 0.0), value)
            e2e = _number(window.get("p95_ms"))
            if not slowest or not math.isfinite(e2e):
                continue
            batch = max(float(v) for v in window["batch_cpu_share"]) >= settings.min_batch_share
            ratios["batch" if batch else "alone"].append(e2e / sum(slowest.values()))
    return {
        group: {
            "windows": len(values),
            "median": round(statistics.median(values), 2) if values else None,
            "worst": round(max(values), 2) if values else None,
        }
        for group, values in ratios.items()
    }


def load_result(path: Path) -> dict[str, Any]:
    try:
        body = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise InputError(f"{path}: not a testbed result (a JSON object)")
    return body


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m yarn_adapt.cosim.lra_calibration",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fit_parser = commands.add_parser("fit", help="fit from testbed results (--json output)")
    fit_parser.add_argument("results", type=Path, nargs="+")
    fit_parser.add_argument("--min-requests", type=int, default=FitSettings().min_requests)
    fit_parser.add_argument("--min-batch-share", type=float, default=FitSettings().min_batch_share)
    fit_parser.add_argument("--min-service-ms", type=float, default=FitSettings().min_service_ms)
    args = parser.parse_args(argv)
    settings = FitSettings(
        min_requests=args.min_requests,
        min_batch_share=args.min_batch_share,
        min_service_ms=args.min_service_ms,
    )
    try:
        bodies = [(str(path), load_result(path)) for path in args.results]
        document = calibrate(bodies, settings)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
