"""``yarn-adapt testbed``: the live co-location testbed (see yarn_adapt.testbed.run)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from yarn_adapt.cli.common import parse_set_pairs, quiet_option


@click.command("testbed")
@click.option("--quick", is_flag=True, help="The short form (about two minutes).")
@click.option("--seed", type=int, default=0, show_default=True, help="Load generator seed.")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A testbed option, e.g. rate_rps=20, phase_s=20, repeats=3 (repeatable).",
)
@click.option("--keep", is_flag=True, help="Keep the cluster directory (logs, latencies).")
@click.option("--json", "as_json", is_flag=True, help="The figures as one JSON object.")
@quiet_option
def testbed_command(
    quick: bool, seed: int, settings: Sequence[str], keep: bool, as_json: bool
) -> None:
    """Run a latency-critical application beside CPU-burning batch work on a real
    two-node YARN (each NodeManager pinned to one CPU), with the co-location guard
    off, on alone, and on with the node agents; print its P95 latency in each, the
    batch makespans, and the agents' reclaim and restore.
    Needs root (cgroup v1 cpuset and cpu), Java and the Hadoop jars."""
    from yarn_adapt.testbed.options import options_from
    from yarn_adapt.testbed.results import result_json
    from yarn_adapt.testbed.run import run_on_new_cluster

    options = options_from(quick, seed, parse_set_pairs(settings))
    result = run_on_new_cluster(options, keep=keep)
    if as_json:
        click.echo(json.dumps(result_json(result)))
        return
    click.echo("\n".join(result.table()))
    summary = result.summary()
    phases = [("guard off", "off"), ("guard only", "guard"), ("guard + agents", "on")]
    figures = [
        f"{label} {summary[f'p95_{key}_ms']} ms (spread {summary[f'p95_{key}_spread_ms']})"
        for label, key in phases
        if f"p95_{key}_ms" in summary
    ]
    click.echo(f"p95 alone {summary['p95_alone_ms']} ms, " + ", ".join(figures))
    agents = summary["agents"]
    click.echo(
        f"agents: {agents['steps']} steps on {agents['tasks_squeezed']} tasks, "
        f"{agents['released']} give-backs, every limit restored: {agents['restored_all']}"
    )
