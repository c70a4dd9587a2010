"""``yarn-adapt bench testbed``: the live co-location testbed (quick form ~9 min).

A latency-critical application (three instrumented services, two frontends) beside
distributed-shell batch work (CPU burners and memory-bandwidth hogs) on a real
two-node YARN on this host, each NodeManager and its containers pinned to one CPU,
under a load of steps and bursts; the policies -- ``off``, ``static``, ``slack-only``,
``toposch-paper``, ``yarn-adapt`` and ``yarn-adapt-no-agents`` -- in counterbalanced
phases, each repeated; then a fixed batch job under each. See
:mod:`yarn_adapt.testbed.run`.

Figures: ``policies`` (per policy: the P95 and P99 vs alone, median and worst; the
SLO-violation seconds; the batch work, CPU seconds per wall second; the makespan),
``batch_work_vs_static`` (target >= 1.3), ``p95_on_vs_alone`` (yarn-adapt's median run
over the alone mean, target <= 1.2), ``targets``; beside them ``p95_alone_ms``,
``p95_off_ms``, ``p95_on_ms`` (means over the repeats, with ``*_spread_ms`` = max -
min, ``*_median_ms``, ``*_worst_ms`` and the runs), the makespans,
``preempted_containers`` (0: the guard never kills), ``demand`` (the guard's, and
``learned_demand``: how often its learner decided), ``policy`` (the guard's in
``yarn-adapt``). ``--quick`` is the short form; ``--set KEY=VALUE`` sets any
:class:`~yarn_adapt.testbed.options.TestbedOptions` field; ``--seed`` the load's.
The host is shared: absolute latencies move with its load; compare within a run.
The table adds each window's batch CPU share per node; ``--set windows=true`` adds
every window's CPU and per-service figures (``windows``) to the JSON. The simulator's
interference model is fitted to sweeps of the testbed's service and burners instead
(:mod:`yarn_adapt.testbed.sweep`, :mod:`yarn_adapt.cosim.core_calibration`).
"""

from __future__ import annotations

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.errors import SettingsError
from yarn_adapt.set_keys import SetSpec, flag

WINDOWS = flag("windows", False)


def set_keys() -> SetSpec:
    """The testbed's keys and ``windows`` (imported when asked: the testbed is slow
    to import)."""
    from yarn_adapt.testbed.options import SET_KEYS

    return SET_KEYS.with_keys(WINDOWS)


@benchmark(
    "testbed", "live testbed: the policies side by side (P95, SLO seconds, batch work)", set_keys
)
def run(options: BenchOptions) -> BenchResult:
    from yarn_adapt.testbed.options import options_from
    from yarn_adapt.testbed.results import window_json
    from yarn_adapt.testbed.run import run_on_new_cluster

    windows = set_keys().read(options.extra, quick=options.quick)[WINDOWS]
    if options.trace is not None:
        raise SettingsError("bench testbed: --trace does not apply (the load is generated)")
    settings = {k: v for k, v in options.extra.items() if k != WINDOWS.name}
    chosen = options_from(options.quick, options.seed, settings)
    result = run_on_new_cluster(chosen)
    rows = [
        {"window": w.name, "requests": f.requests, "failed": f.failed, "p50_ms": f.p50_ms,
         "p95_ms": f.p95_ms, "p99_ms": f.p99_ms,
         "batch_vcores_risky_node": w.risky_node_batch_vcores,
         "batch_vcores_other_node": w.other_node_batch_vcores,
         "batch_cpu_risky_node": _share(w.batch_cpu_share, 0),
         "batch_cpu_other_node": _share(w.batch_cpu_share, 1)}
        for w, f in result.windows
    ]  # fmt: skip
    figures = result.summary()
    if windows:
        figures["windows"] = [window_json(w, f) for w, f in result.windows]
    return BenchResult(figures=figures, rows=rows)


def _share(shares: tuple[float, ...], node: int) -> float:
    return round(shares[node], 3) if len(shares) > node else float("nan")
