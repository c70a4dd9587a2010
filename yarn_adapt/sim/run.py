"""``simulate``: replay a workload on a simulated YARN cluster under one scheduler
configuration."""

from __future__ import annotations

from yarn_adapt.errors import ConfigValidationError, ValidationIssue
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig, SchedulerConfig
from yarn_adapt.model.workload import Workload
from yarn_adapt.sim.capacity import CapacityModel
from yarn_adapt.sim.engine import Engine
from yarn_adapt.sim.fair import FairModel
from yarn_adapt.sim.results import SimulationResult
from yarn_adapt.sim.spec import ClusterSpec, SimulationOptions
from yarn_adapt.sim.start import SimulationStart
from yarn_adapt.sim.state import SchedulerModel


def simulate(
    workload: Workload,
    config: SchedulerConfig,
    cluster: ClusterSpec,
    options: SimulationOptions | None = None,
    *,
    start: SimulationStart | None = None,
) -> SimulationResult:
    """Run ``workload`` on ``cluster`` under ``config`` (Capacity or Fair) and report
    every job, queue usage over time and cluster utilisation. Deterministic for a
    given ``options.seed``. ``start`` begins from an observed state instead of an
    empty cluster (see :mod:`yarn_adapt.sim.start`)."""
    options = options or SimulationOptions()
    model = scheduler_model(config, cluster, options)
    return Engine(workload, model, cluster, options, start).run()


def scheduler_model(
    config: SchedulerConfig, cluster: ClusterSpec, options: SimulationOptions
) -> SchedulerModel:
    if isinstance(config, CapacitySchedulerConfig):
        if config.root.is_leaf:
            raise ConfigValidationError(
                [ValidationIssue("root", "queues", "the simulator needs at least one leaf queue")]
            )
        return CapacityModel(config, cluster.minimum_allocation, options)
    if isinstance(config, FairSchedulerConfig):
        return FairModel(config, options)
    raise TypeError(f"not a scheduler configuration: {type(config).__name__}")
