"""A fast discrete-event simulator of a YARN cluster under the Capacity or the Fair
Scheduler: ground truth for the benchmarks, the demo's cluster and ``yarn-adapt sim``
(the tuner itself scores candidates with the rules comparator).

Entry points: :func:`simulate` and :func:`latency_stats_by_queue`;
:func:`run_speed_benchmark` for the speed figure. Semantics and simplifications are
documented in :mod:`yarn_adapt.sim.engine` (time, heartbeats, containers),
:mod:`yarn_adapt.sim.capacity`, :mod:`yarn_adapt.sim.fair`,
:mod:`yarn_adapt.sim.preemption`, :mod:`yarn_adapt.sim.hooks` and
:mod:`yarn_adapt.sim.start`. :mod:`yarn_adapt.sim.calibration` holds YARN's measured
overheads around a distributed-shell app and the options that make a simulation
follow a real cluster (``yarn-adapt bench sim-fidelity``).
"""

from yarn_adapt.sim.bench import run_speed_benchmark, synthetic_fb_workload
from yarn_adapt.sim.hooks import (
    CapacityChange,
    ClusterView,
    FixedLongRunning,
    HeartbeatNodePlacement,
    LongRunningContainer,
    LongRunningWorkload,
    NodeCapacityProvider,
    PlacementPolicy,
    PlacementRequest,
    ScheduledNodeCapacity,
    StaticNodeCapacity,
)
from yarn_adapt.sim.results import (
    Allocation,
    JobResult,
    JobStatus,
    LatencyStats,
    SimulationResult,
    UsageSeries,
    Utilisation,
    latency_stats,
    latency_stats_by_queue,
)
from yarn_adapt.sim.run import simulate
from yarn_adapt.sim.spec import (
    ClusterSpec,
    HeartbeatMode,
    NodeSpec,
    PreemptionOptions,
    SimulationHooks,
    SimulationOptions,
)
from yarn_adapt.sim.start import JobInProgress, RunningContainer, SimulationStart

__all__ = [
    "Allocation",
    "CapacityChange",
    "ClusterSpec",
    "ClusterView",
    "FixedLongRunning",
    "HeartbeatMode",
    "HeartbeatNodePlacement",
    "JobInProgress",
    "JobResult",
    "JobStatus",
    "LatencyStats",
    "LongRunningContainer",
    "LongRunningWorkload",
    "NodeCapacityProvider",
    "NodeSpec",
    "PlacementPolicy",
    "PlacementRequest",
    "PreemptionOptions",
    "RunningContainer",
    "ScheduledNodeCapacity",
    "SimulationHooks",
    "SimulationOptions",
    "SimulationResult",
    "SimulationStart",
    "StaticNodeCapacity",
    "UsageSeries",
    "Utilisation",
    "latency_stats",
    "latency_stats_by_queue",
    "run_speed_benchmark",
    "simulate",
    "synthetic_fb_workload",
]
