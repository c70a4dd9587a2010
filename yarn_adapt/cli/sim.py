"""``yarn-adapt sim``: replay a trace on a simulated cluster under a scheduler file."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path

import click

from yarn_adapt.durations import duration
from yarn_adapt.errors import InputError
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    FairSchedulerConfig,
    Resources,
    SchedulerConfig,
    Workload,
)
from yarn_adapt.sim import (
    ClusterSpec,
    LatencyStats,
    PlacementPolicy,
    SimulationHooks,
    SimulationOptions,
    SimulationResult,
    latency_stats,
    latency_stats_by_queue,
    simulate,
)
from yarn_adapt.workload import load_trace
from yarn_adapt.workload.bundled import bundled_trace
from yarn_adapt.workload.queues import QueueMapping, spread_over
from yarn_adapt.workload.window import within_hours
from yarn_adapt.yarn.confxml import load_scheduler_config

CONTAINER = Resources(2048, 1)  # AdaptiveConfig §4.2: 1 core and 2 GB per container


def leaf_names(config: SchedulerConfig) -> list[str]:
    return [queue.name for queue in config.leaves()]


def load_for_config(
    trace: Path, config: SchedulerConfig, queues: str | None, *, lenient: bool, seed: int
) -> Workload:
    """The trace with its jobs sent to the config's leaves: by ``queues`` when given,
    else priorities 2..8 spread over the leaves as the paper does."""
    mapping = QueueMapping.parse(queues) if queues else spread_over(leaf_names(config))
    return load_trace(trace, lenient=lenient, seed=seed, queues=mapping)


@click.command("sim")
@click.option(
    "--trace",
    type=click.Path(dir_okay=True, path_type=Path),
    default=None,
    help="SWIM .tsv, Google 2011 dir, SLS or Rumen JSON.  [default: the bundled FB-2009 day]",
)
@click.option(
    "--scheduler-file",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    metavar="XML",
    help="capacity-scheduler.xml or fair-scheduler.xml",
)
@click.option("--nodes", type=int, default=600, show_default=True)
@click.option(
    "--containers-per-node",
    type=int,
    default=8,
    show_default=True,
    help="Node size in 2 GB / 1 vcore containers.",
)
@click.option(
    "--queues",
    help="Priority ranges to leaves, e.g. '2-5:q1,6-8:q2'.  [default: spread 2..8 over the leaves]",
)
@click.option(
    "--until",
    "until_s",
    type=float,
    metavar="SECONDS",
    help="Only the jobs submitted in the trace's first SECONDS.",
)
@click.option(
    "--lenient", is_flag=True, help="Skip malformed trace rows (counted) instead of failing."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--placement",
    type=click.Choice(["yarn", "tarcil", "random", "least-loaded", "greedy"]),
    default="yarn",
    show_default=True,
    help="Where granted containers go: yarn (the heartbeating node), tarcil "
    "(quality-aware sampling), random (2 samples), least-loaded, greedy (every node).",
)
@click.option("--json", "as_json", is_flag=True)
def sim_command(
    trace: Path | None, config_path: Path, nodes: int, containers_per_node: int, queues: str | None,
    until_s: float | None, lenient: bool, seed: int, placement: str, as_json: bool,
) -> None:  # fmt: skip
    """Replay a trace (--trace, default the bundled FB-2009 day) on a simulated
    cluster running --scheduler-file; print job latency per queue."""
    if nodes <= 0 or containers_per_node <= 0:
        raise InputError("--nodes and --containers-per-node must be positive")
    if until_s is not None and not until_s > 0:
        raise InputError(f"--until must be a positive number of seconds, got {until_s:g}")
    config = load_scheduler_config(config_path)
    workload = within_hours(
        load_for_config(trace or bundled_trace(), config, queues, lenient=lenient, seed=seed),
        None if until_s is None else until_s / 3600.0,
    )
    cluster = ClusterSpec.uniform(nodes, CONTAINER * containers_per_node)
    hook = placement_hook(placement, cluster, seed)
    began = time.perf_counter()
    result = simulate(
        workload, config, cluster, SimulationOptions(hooks=SimulationHooks(placement=hook))
    )
    summary = summarize(result, workload, time.perf_counter() - began)
    summary["placement"] = placement_summary(placement, hook)
    click.echo(json.dumps(summary) if as_json else render_summary(summary, config))


def placement_hook(name: str, cluster: ClusterSpec, seed: int) -> PlacementPolicy:
    """The placement policy (:func:`yarn_adapt.placement.sim_hook.sim_placement`)."""
    from yarn_adapt.placement.sim_hook import sim_placement

    return sim_placement(name, cluster, seed=seed)


PLACEMENT_KEYS = {
    "decision_ms_mean": "decision_mean_ms",
    "decision_ms_median": "decision_median_ms",
    "decision_ms_p99": "decision_p99_ms",
    "mean_quality": "mean_quality_ratio",
}
"""The placement statistics' names as the JSON rule wants them (unit last)."""


def placement_summary(name: str, hook: PlacementPolicy) -> dict[str, object]:
    stats = getattr(hook, "stats", None)
    summary: dict[str, object] = {"policy": name}
    if stats is not None:
        summary.update({PLACEMENT_KEYS.get(k, k): v for k, v in stats.summary().items()})
    return summary


def summarize(result: SimulationResult, workload: Workload, wall_s: float) -> dict[str, object]:
    return {
        "jobs": len(workload.jobs),
        "skipped_rows": workload.skipped_rows,
        "simulated_s": round(result.end_s, 1),
        "wall_s": round(wall_s, 3),
        "memory_utilisation_ratio": round(result.utilisation.memory, 4),
        "queues": {q: _stats(s) for q, s in latency_stats_by_queue(result).items()},
        "all": _stats(latency_stats(result.jobs)),
    }


def _stats(stats: LatencyStats) -> dict[str, float | int | None]:
    def clean(value: float) -> float | None:
        return None if math.isnan(value) else round(value, 2)

    return {
        "jobs": stats.count,
        "mean_latency_s": clean(stats.mean_s),
        "median_latency_s": clean(stats.median_s),
        "p95_latency_s": clean(stats.p95_s),
        "mean_wait_s": clean(stats.mean_wait_s),
    }


def render_summary(summary: Mapping[str, object], config: SchedulerConfig) -> str:
    kind = (
        "capacity"
        if isinstance(config, CapacitySchedulerConfig)
        else "fair"
        if isinstance(config, FairSchedulerConfig)
        else "?"
    )
    lines = [
        f"{summary['jobs']} jobs ({summary['skipped_rows']} rows skipped) on the {kind} scheduler"
        + _placement_line(summary.get("placement")),
        f"{duration(float(summary['simulated_s']))} simulated in "  # type: ignore[arg-type]
        f"{duration(float(summary['wall_s']))}; "  # type: ignore[arg-type]
        f"memory utilisation {summary['memory_utilisation_ratio']:.0%}",
        f"{'queue':12} {'jobs':>6} {'mean':>10} {'median':>10} {'p95':>10} {'wait':>10}",
    ]
    queues = dict(summary["queues"])  # type: ignore[call-overload]
    for queue, stats in [*queues.items(), ("all", summary["all"])]:
        cells = [
            _cell(stats[key])
            for key in ("mean_latency_s", "median_latency_s", "p95_latency_s", "mean_wait_s")
        ]
        lines.append(f"{queue:12} {stats['jobs']:>6} " + " ".join(f"{c:>10}" for c in cells))
    return "\n".join(lines)


def _placement_line(placement: object) -> str:
    if not isinstance(placement, dict) or placement.get("policy") == "yarn":
        return ""
    return (
        f", placement {placement['policy']}: {placement.get('decisions')} decisions, "
        f"{placement.get('declined')} declined, {placement.get('decision_mean_ms')} ms mean"
    )


def _cell(value: object) -> str:
    return "-" if not isinstance(value, int | float) else duration(float(value))
