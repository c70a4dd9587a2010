"""``simulate``: replay a workload on a simulated YARN cluster under one scheduler
configuration."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from yarn_adapt.errors import ConfigValidationError, ValidationIssue
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig, SchedulerConfig
from yarn_adapt.model.workload import Workload
from yarn_adapt.sim.native import Core, select_core
from yarn_adapt.sim.results import SimulationResult
from yarn_adapt.sim.spec import ClusterSpec, SimulationOptions
from yarn_adapt.sim.start import SimulationStart


def simulate(
    workload: Workload,
    config: SchedulerConfig,
    cluster: ClusterSpec,
    options: SimulationOptions | None = None,
    *,
    start: SimulationStart | None = None,
    engine: str | None = None,
) -> SimulationResult:
    """Run ``workload`` on ``cluster`` under ``config`` (Capacity or Fair) and report
    every job, queue usage over time and cluster utilisation. Deterministic for a
    given ``options.seed``. ``start`` begins from an observed state instead of an
    empty cluster (see :mod:`yarn_adapt.sim.start`). ``engine`` picks the core
    (``auto``, ``python`` or ``native``; :mod:`yarn_adapt.sim.native`): every core
    gives the same result."""
    options = options or SimulationOptions()
    core = select_core(engine)
    with _collector_paused():
        model = scheduler_model(core, config, cluster, options)
        engine_ = core.engine.Engine(workload, model, cluster, options, start)
        result: SimulationResult = engine_.run()
    return result


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector is off during a run: a run makes millions of
    short-lived objects but no cyclic garbage until it ends (a few objects per job:
    its own structures, collected afterwards), and each collection would walk the
    whole workload."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def scheduler_model(
    core: Core, config: SchedulerConfig, cluster: ClusterSpec, options: SimulationOptions
) -> Any:
    """The core's model of ``config`` (a ``SchedulerModel`` of that core)."""
    if isinstance(config, CapacitySchedulerConfig):
        if config.root.is_leaf:
            raise ConfigValidationError(
                [ValidationIssue("root", "queues", "the simulator needs at least one leaf queue")]
            )
        return core.capacity.CapacityModel(config, cluster.minimum_allocation, options)
    if isinstance(config, FairSchedulerConfig):
        return core.fair.FairModel(config, options)
    raise TypeError(f"not a scheduler configuration: {type(config).__name__}")
