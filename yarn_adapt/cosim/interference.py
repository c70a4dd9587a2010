"""Per-core interference: how batch on a node slows a latency-critical service.

A node-wide batch CPU share cannot tell one batch thread per core on a 16-core node
from sixteen threads on one core, nor a batch group at YARN's weight from one the
node agent has lowered. This model describes what a service's core sees
(:class:`CorePressure`) and inflates the service's **service time**, not its whole
latency, by per-core terms (:class:`CoreInterference`)::

    S' = S * (1 + cpu * weighted + presence * threads + memory * hogs)

* ``weighted``: the CFS weight of the batch that is runnable on the service's core
  over the service's own weight (what fair sharing takes from it: a service thread
  runnable beside batch of weight W gets ``w / (w + W)`` of the core). Under YARN's
  hierarchy (``hadoop-yarn`` at 1024 beside a service at 1024) it is 1 whenever any
  batch thread is runnable there, whatever their number; with every container a
  group of 1024 at the service's level, it is the number of runnable threads; with
  the agent's low weight (2) next to nothing; under an exclusive cpuset, zero.
* ``threads``: runnable batch threads per service core, whatever their weight
  (wake-up latency, context switches and cache pollution that weights do not
  remove).
* ``hogs``: memory-bandwidth-bound batch threads per core of the node (large array
  copies: they slow the service through the shared caches and memory bus, even on
  other cores).

The inflated service time then drives the queueing formula (Sakasegawa's M/M/c
approximation, as :func:`yarn_adapt.cosim.colocation.lc_p95_ms`), so contention
also raises the service's utilisation: P95 = S' (1 + ln 20 Wq/S'), capped at
``ceiling_factor`` x S. The coefficients are fitted to testbed sweeps
(:mod:`yarn_adapt.cosim.core_calibration`, ``docs/calibration/core-model.json``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from yarn_adapt.errors import InputError

LN20 = math.log(20.0)
SATURATED_RHO = 0.99

# The committed fit (``python -m yarn_adapt.cosim.core_calibration fit``); the source
# checkout's (the package is installed editable).
CORE_CALIBRATION = Path(__file__).resolve().parents[2] / "docs" / "calibration" / "core-model.json"


@dataclass(frozen=True)
class CorePressure:
    """What batch does to one service core (see the module docstring)."""

    weighted: float = 0.0
    threads: float = 0.0
    hogs: float = 0.0


@dataclass(frozen=True)
class CoreInterference:
    """The service-time inflation per unit of each pressure term."""

    cpu: float = 0.0
    presence: float = 0.0
    memory: float = 0.0

    def __post_init__(self) -> None:
        for name in ("cpu", "presence", "memory"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"core interference {name} {value!r} is not a number >= 0")

    def inflation(self, pressure: CorePressure) -> float:
        """The factor on the service time."""
        return (
            1.0
            + self.cpu * pressure.weighted
            + self.presence * pressure.threads
            + self.memory * pressure.hogs
        )


def queueing_p95_ms(
    service_ms: float,
    rate_per_s: float,
    cores: float,
    *,
    ceiling_ms: float,
    variability: float = 1.0,
) -> float:
    """P95 of a G/G/c-like server: S (1 + ln 20 Wq/S), Wq/S Sakasegawa's M/M/c
    approximation times ``variability`` (Allen-Cunneen's (ca^2 + cs^2) / 2: 1 for
    Poisson arrivals and exponential service times, 1/2 for fixed ones); at most
    ``ceiling_ms``; saturated (rho >= 0.99) is the ceiling."""
    c = max(cores, 1e-6)
    rho = rate_per_s * service_ms / 1000.0 / c
    if rho >= SATURATED_RHO:
        return ceiling_ms
    waiting = waiting_ratio(rho, c)
    return min(service_ms * (1.0 + LN20 * variability * waiting), ceiling_ms)


def waiting_ratio(rho: float, cores: float) -> float:
    """Wq/S of an M/M/c server at utilisation ``rho`` < 1 (Sakasegawa's
    approximation rho^(sqrt(2(c+1)) - 1) / (c (1 - rho)), c at least one server)."""
    servers = max(cores, 1.0)
    return math.pow(rho, math.sqrt(2.0 * (servers + 1.0)) - 1.0) / (servers * (1.0 - rho))


def contended_p95_ms(
    service_ms: float,
    rate_per_s: float,
    cores: float,
    pressure: CorePressure,
    interference: CoreInterference,
    *,
    ceiling_factor: float = 100.0,
    variability: float = 1.0,
) -> float:
    """A service's P95 with batch beside it: its service time inflated by the
    per-core terms, then queued at its rate on its cores (``variability``: the
    service's, :func:`queueing_p95_ms`)."""
    inflated = service_ms * interference.inflation(pressure)
    return queueing_p95_ms(
        inflated, rate_per_s, cores, ceiling_ms=service_ms * ceiling_factor,
        variability=variability,
    )  # fmt: skip


def load_core_interference(path: Path = CORE_CALIBRATION) -> CoreInterference:
    """The committed fit's coefficients; a missing or broken file is a one-line
    error naming it."""
    try:
        body = json.loads(path.read_text())
        coefficients = body["coefficients"]
        return CoreInterference(
            cpu=float(coefficients["cpu"]),
            presence=float(coefficients["presence"]),
            memory=float(coefficients["memory"]),
        )
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the per-core interference fit ({exc.strerror})"
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a per-core interference fit ({exc})") from None
