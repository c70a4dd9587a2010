"""``yarn-adapt bench sim-speed``: the simulator on a whole trace (issues 3 and 15).

Default workload: the bundled FB-2009 24-hour SWIM sample (5,894 jobs) on 600 nodes
x 8 containers, one equal-share Capacity leaf per queue. YARN's own SLS replays such
a trace in wall-clock time (24 h).

``--quick``: the first 2 hours. ``--set nodes=N``, ``--set containers=K``.
``--set replicate=K``: the trace's jobs K times with fresh ids, interleaved over the
same day (copy k shifted by k/K of the mean gap between submissions), to reach a
datacenter-sized day without a new file; scale ``nodes`` with K to keep the load of
the original (``--set replicate=30 --set nodes=3000`` is a 20-million-event day).

Figures: ``wall_s`` and ``cpu_s`` (user + system time of the process) of the
simulation alone, ``events`` and ``events_per_s`` (per wall second; the machine may
be shared, so ``events_per_cpu_s`` beside it), ``peak_rss_mb`` (the process's peak
resident set, loading the trace included), ``load_s`` (reading the trace).
"""

from __future__ import annotations

import time

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, whole
from yarn_adapt.sim import run_speed_benchmark
from yarn_adapt.sim.bench import replicate_workload
from yarn_adapt.workload import load_trace
from yarn_adapt.workload.bundled import bundled_trace
from yarn_adapt.workload.window import within_hours


class Knobs:
    nodes = whole("nodes", 600, low=1)
    containers = whole("containers", 8, low=1)
    replicate = whole("replicate", 1, low=1)


SET_KEYS = SetSpec.of("sim-speed", Knobs)


@benchmark("sim-speed", "Simulate a whole trace (FB-2009 day, 600 nodes x 8 containers)", SET_KEYS)
def sim_speed(options: BenchOptions) -> BenchResult:
    values = SET_KEYS.read(options.extra, quick=options.quick)
    nodes, containers = values[Knobs.nodes], values[Knobs.containers]
    copies = values[Knobs.replicate]
    began = time.perf_counter()
    workload = load_trace(options.trace or bundled_trace(), seed=options.seed)
    workload = within_hours(workload, 2.0 if options.quick else None)
    workload = replicate_workload(workload, copies)
    load_s = time.perf_counter() - began
    report("bench sim-speed step", 1, 2, f"{len(workload.jobs)} jobs loaded")
    figures = run_speed_benchmark(workload, nodes=nodes, containers_per_node=containers)
    report("bench sim-speed step", 2, 2, "simulated")
    figures = {
        "trace": str(options.trace or "bundled FB-2009"),
        "nodes": nodes,
        "containers_per_node": containers,
        "replicate": copies,
        **figures,
        "load_s": round(load_s, 3),
    }
    return BenchResult(figures=figures, rows=[figures])
