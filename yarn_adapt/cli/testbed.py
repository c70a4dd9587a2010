"""``yarn-adapt testbed``: the live co-location testbed (see yarn_adapt.testbed.run)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from yarn_adapt.cli.common import quiet_option


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
    off and on; print its P95 latency alone, off and on, and the batch makespans.
    Needs root (cgroup v1 cpuset and cpu), Java and the Hadoop jars."""
    from yarn_adapt.cli import _parse_settings
    from yarn_adapt.testbed.run import options_from, result_json, run_on_new_cluster

    options = options_from(quick, seed, _parse_settings(settings))
    result = run_on_new_cluster(options, keep=keep)
    if as_json:
        click.echo(json.dumps(result_json(result)))
        return
    click.echo("\n".join(result.table()))
    summary = result.summary()
    click.echo(
        f"p95 alone {summary['p95_alone_ms']} ms, guard off {summary['p95_off_ms']} ms "
        f"(spread {summary['p95_off_spread_ms']}), guard on {summary['p95_on_ms']} ms "
        f"(spread {summary['p95_on_spread_ms']})"
    )
