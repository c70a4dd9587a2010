"""``yarn-adapt demo``: the service against a simulated cluster replaying the bundled
trace, in recommend mode with auto-approve; no Java or Hadoop needed."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from yarn_adapt.errors import InputError

if TYPE_CHECKING:
    from yarn_adapt.service.demo import DemoOptions
    from yarn_adapt.service.service import Service
    from yarn_adapt.service.simcluster import SimulatedCluster


@click.command("demo")
@click.option("--once", is_flag=True, help="One round, then a JSON summary line.")
@click.option("--rounds", type=int, default=20, show_default=True, help="Stop after N rounds.")
@click.option(
    "--scheduler", type=click.Choice(["capacity", "fair"]), default="capacity", show_default=True
)
@click.option("--interval", type=float, default=2.0, show_default=True, help="Wall s per round.")
@click.option("--step", type=float, default=900.0, show_default=True, help="Simulated s per round.")
@click.option("--nodes", type=int, default=8, show_default=True, help="Simulated nodes.")
@click.option(
    "--containers-per-node", type=int, default=8, show_default=True, help="2 GB / 1 vcore each."
)
@click.option("--port", type=int, default=8765, show_default=True, help="0 picks a free port.")
@click.option("--no-serve", is_flag=True, help="Do not serve the page.")
@click.option("--trace", type=click.Path(exists=True, path_type=Path), help="Another trace.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the demo's database and files here.  [default: a new temporary directory]",
)
@click.option("--seed", type=int, default=0, show_default=True)
def demo_command(
    once: bool, rounds: int, scheduler: str, interval: float, step: float, nodes: int,
    containers_per_node: int, port: int, no_serve: bool, trace: Path | None,
    state_dir: Path | None, seed: int,
) -> None:  # fmt: skip
    """Watch the configurator tune a simulated cluster: proposals with predicted
    latency before and after, applied at once (auto-approve), on the page too."""
    # Imported here: the web stack and the tuner are not needed by other commands.
    from yarn_adapt.service.demo import DemoOptions, build_demo, summary

    if min(interval, step) <= 0 or min(nodes, containers_per_node) <= 0:
        raise InputError("--interval, --step, --nodes and --containers-per-node must be positive")
    options = DemoOptions(
        state_dir=state_dir or Path(tempfile.mkdtemp(prefix="yarn-adapt-demo-")),
        scheduler=scheduler,
        nodes=nodes,
        containers_per_node=containers_per_node,
        step_s=step,
        interval_s=interval,
        port=port,
        serve=not (no_serve or once),
        seed=seed,
        trace=trace,
    )
    service = build_demo(options)
    try:
        done = _run(service, options, 1 if once else rounds)
        click.echo(json.dumps(summary(service, done, _cluster(service).elapsed_s)))
    finally:
        service.close()


def _run(service: Service, options: DemoOptions, rounds: int | None) -> int:
    from yarn_adapt.service.demo import describe_round
    from yarn_adapt.service.runner import serving, stop_on_signals

    click.echo(f"demo state in {options.state_dir}")
    with serving(service) as server, stop_on_signals() as stop:
        if server is not None:
            click.echo(f"the operators' page: {server.url}  (Ctrl-C to stop)")
        done = 0
        while not stop.is_set() and (rounds is None or done < rounds):
            report = service.loop.run_round()
            done += 1
            for line in describe_round(report, service, _cluster(service).elapsed_s):
                click.echo(line)
            if _cluster(service).done or (rounds is not None and done >= rounds):
                break
            stop.wait(options.interval_s)
    return done


def _cluster(service: Service) -> SimulatedCluster:
    from yarn_adapt.service.simcluster import SimulatedCluster

    cluster = getattr(service.backend, "cluster", None)
    assert isinstance(cluster, SimulatedCluster)
    return cluster
