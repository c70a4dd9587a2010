"""Fit the co-location model's service time and interference to live measurements.

The model (:func:`yarn_adapt.sim.colocation.lc_p95_ms`) says
``P95 = S (1 + ln 20 Wq/S) (1 + interference * batch_share)`` with the queueing term
from the request rate, S and the CPU the service gets. From a run-alone P95 (no batch)
the service time S is the one that reproduces it at the measured rate; from a
contended P95 below saturation, with the CPU the service got and the batch share of
the node, ``interference`` is what is left after queueing.

    python -m yarn_adapt.sim.lra_calibration TESTBED.json --rate-rps 20 \\
        --cores-alone 1 --cores-contended 0.5 --batch-share 0.5 [--contended-key p95_on_ms]

The testbed's JSON (``yarn-adapt testbed --json``) gives the P95s; the CPU the
service got and the batch share must come from the kept cluster directory's cgroup
accounting (the testbed does not report them yet).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from yarn_adapt.errors import InputError
from yarn_adapt.sim.colocation import NodeModel, lc_p95_ms


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
    base = NodeModel(interference=0.0, max_latency_factor=1e9)

    def queueing(service_ms: float, cores: float) -> float:
        model = replace(base, lc_service_ms=service_ms)
        return lc_p95_ms(rate_rps * service_ms / 1000.0, cores, 0.0, model)

    low, high = 1e-6, alone_ms
    for _ in range(100):  # P95 grows with S: bisection
        mid = (low + high) / 2
        low, high = (mid, high) if queueing(mid, cores_alone) < alone_ms else (low, mid)
    service_ms = (low + high) / 2
    if rate_rps * service_ms / 1000.0 >= 0.99 * cores_contended:
        raise InputError("calibration: the contended run is saturated; interference unidentifiable")
    queued = queueing(service_ms, cores_contended)
    return Fit(service_ms, max(0.0, (contended_ms / queued - 1.0) / batch_share))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("testbed_json", type=Path)
    parser.add_argument("--rate-rps", type=float, required=True)
    parser.add_argument("--cores-alone", type=float, required=True)
    parser.add_argument("--cores-contended", type=float, required=True)
    parser.add_argument("--batch-share", type=float, required=True)
    parser.add_argument("--contended-key", default="p95_on_ms")
    args = parser.parse_args(argv)
    try:
        figures = json.loads(args.testbed_json.read_text())
        contended = float(figures[args.contended_key])
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"{args.testbed_json}: not a testbed JSON ({exc})") from None
    try:
        result = fit(
            float(figures.get("p95_alone_ms", "nan")),
            contended,
            rate_rps=args.rate_rps,
            cores_alone=args.cores_alone,
            cores_contended=args.cores_contended,
            batch_share=args.batch_share,
        )
    except InputError as exc:
        raise SystemExit(str(exc)) from None
    print(json.dumps({"lc_service_ms": result.service_ms, "interference": result.interference}))


if __name__ == "__main__":
    main()
