"""``yarn-adapt bench sim-speed``: the simulator on a whole trace (issue 3 item 5).

Default workload: the bundled FB-2009 24-hour SWIM sample (5,894 jobs) on 600 nodes
x 8 containers, one equal-share Capacity leaf per queue. YARN's own SLS replays such
a trace in wall-clock time (24 h); the target here is <= 10 s on 2 cores.
``--quick``: the first 2 hours. ``--set nodes=N``, ``--set containers=K``.
"""

from __future__ import annotations

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.cli.sim import within_hours
from yarn_adapt.sim import run_speed_benchmark
from yarn_adapt.workload import load_trace
from yarn_adapt.workload.bundled import bundled_trace


@benchmark("sim-speed", "Simulate a whole trace (FB-2009 day, 600 nodes x 8 containers)")
def sim_speed(options: BenchOptions) -> BenchResult:
    nodes = int(options.extra.get("nodes", 600))
    containers = int(options.extra.get("containers", 8))
    workload = load_trace(options.trace or bundled_trace(), seed=options.seed)
    workload = within_hours(workload, 2.0 if options.quick else None)
    figures = run_speed_benchmark(workload, nodes=nodes, containers_per_node=containers)
    figures = {
        "trace": str(options.trace or "bundled FB-2009"),
        "nodes": nodes,
        "containers_per_node": containers,
        **figures,
    }
    return BenchResult(figures=figures, rows=[figures])
