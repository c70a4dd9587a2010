"""``yarn-adapt demo``: the service against a simulated cluster replaying the bundled
trace, in recommend mode with auto-approve; no Java or Hadoop needed.

``--review`` makes it a tour of the operators' console: a one-time token and the
page's address are printed, each proposal waits until an operator approves or
rejects it on the page, and ``--keep-serving`` keeps the page after the last round."""

from __future__ import annotations

import json
import secrets
import tempfile
import threading
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import click

from yarn_adapt.cli.common import quiet_option
from yarn_adapt.errors import InputError
from yarn_adapt.progress import Progress

if TYPE_CHECKING:
    from yarn_adapt.service.demo import DemoOptions
    from yarn_adapt.service.service import Service
    from yarn_adapt.service.simcluster import SimulatedCluster
    from yarn_adapt.service.web.server import WebServer

REVIEW_POLL_S = 0.5


@click.command("demo")
@click.option("--once", is_flag=True, help="One round, then a JSON summary line.")
@click.option("--rounds", type=int, default=20, show_default=True, help="Stop after N rounds.")
@click.option(
    "--scheduler", type=click.Choice(["capacity", "fair"]), default="capacity", show_default=True
)
@click.option(
    "--interval",
    "interval_s",
    type=float,
    default=900.0,
    show_default=True,
    metavar="SECONDS",
    help="The tuning interval: simulated seconds per round.",
)
@click.option(
    "--step", "step_s", type=float, hidden=True, metavar="SECONDS", help="Deprecated: --interval."
)
@click.option(
    "--pace",
    "pace_s",
    type=float,
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Wall seconds between rounds.",
)
@click.option(
    "--nodes",
    type=int,
    default=None,
    help="Simulated nodes.  [default: sized so the replay keeps ~70% of containers busy]",
)
@click.option(
    "--containers-per-node", type=int, default=8, show_default=True, help="2 GB / 1 vcore each."
)
@click.option("--port", type=int, default=8765, show_default=True, help="0 picks a free port.")
@click.option("--no-serve", is_flag=True, help="Do not serve the page.")
@click.option(
    "--review",
    is_flag=True,
    help="Proposals wait for your approval on the page (prints a one-time token).",
)
@click.option("--keep-serving", is_flag=True, help="Keep the page up after the last round.")
@click.option("--trace", type=click.Path(exists=True, path_type=Path), help="Another trace.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the demo's database and files here.  [default: a new temporary directory]",
)
@click.option("--seed", type=int, default=0, show_default=True)
@quiet_option
def demo_command(
    once: bool, rounds: int, scheduler: str, interval_s: float, step_s: float | None,
    pace_s: float, nodes: int | None, containers_per_node: int, port: int, no_serve: bool,
    review: bool, keep_serving: bool, trace: Path | None, state_dir: Path | None, seed: int,
) -> None:  # fmt: skip
    """Watch the configurator tune a simulated cluster: proposals with predicted
    latency before and after, applied at once (auto-approve) or, with --review,
    when you approve them on the page."""
    # Imported here: the web stack and the tuner are not needed by other commands.
    from yarn_adapt.service.demo import DemoOptions, build_demo, run_summary, summary

    if step_s is not None:
        click.echo("yarn-adapt: --step is deprecated; use --interval", err=True)
        interval_s = step_s
    if min(interval_s, pace_s, containers_per_node) <= 0 or (nodes is not None and nodes <= 0):
        raise InputError("--interval, --pace, --nodes and --containers-per-node must be positive")
    serve = not (no_serve or once)
    if (review or keep_serving) and not serve:
        raise InputError("--review and --keep-serving need the page: drop --no-serve / --once")
    options = DemoOptions(
        state_dir=state_dir or Path(tempfile.mkdtemp(prefix="yarn-adapt-demo-")),
        scheduler=scheduler,
        nodes=nodes,
        rounds=rounds,  # --once: the first round of the same demo, on the same cluster
        containers_per_node=containers_per_node,
        step_s=interval_s,
        interval_s=pace_s,
        port=port,
        serve=serve,
        seed=seed,
        trace=trace,
        review=review,
        token=secrets.token_urlsafe(24) if review else None,
    )
    service = build_demo(options)
    try:
        done = _run(service, options, 1 if once else rounds, keep_serving=keep_serving)
        if once:
            click.echo(json.dumps(summary(service, done, _cluster(service).elapsed_s)))
        else:
            click.echo(json.dumps(run_summary(service, options, done)))
    finally:
        service.close()


def _run(
    service: Service,
    options: DemoOptions,
    rounds: int,
    *,
    keep_serving: bool,
    announce: Callable[[str], None] = click.echo,
    stop_event: threading.Event | None = None,
) -> int:
    """The rounds, the page and the review holds. ``stop_event``: stop on it instead
    of on SIGTERM/SIGINT (which only the main thread can catch)."""
    from yarn_adapt.service.demo import describe_round, note_round
    from yarn_adapt.service.runner import serving, stop_on_signals

    announce(f"demo state in {options.state_dir}")
    nodes = len(_cluster(service).cluster.nodes)
    how = "as asked" if options.nodes is not None else "sized for the replay's demand"
    announce(f"simulated cluster: {nodes} nodes x {options.containers_per_node} containers ({how})")
    progress = Progress("demo round", rounds)
    stopping = nullcontext(stop_event) if stop_event is not None else stop_on_signals()
    with serving(service) as server, stopping as stop:
        if server is not None:
            announce(f"the operators' page: {server.url}  (Ctrl-C to stop)")
        if options.review and server is not None:
            announce(f"sign in at {server.url}/login with the one-time token: {options.token}")
        done = 0
        while not stop.is_set() and done < rounds:
            report = service.loop.run_round()
            note_round(service, report)
            done += 1
            for line in describe_round(report, service, _cluster(service).elapsed_s):
                announce(line)
            progress.advance(done)
            if options.review and server is not None:
                _await_review(service, server, stop, announce)
            if _cluster(service).done or done >= rounds:
                break
            stop.wait(options.interval_s)
        if keep_serving and server is not None and not stop.is_set():
            announce(f"rounds done; the page stays at {server.url} until Ctrl-C")
            stop.wait()
    return done


def _await_review(
    service: Service,
    server: WebServer,
    stop: threading.Event,
    announce: Callable[[str], None],
) -> None:
    """Hold the rounds while a proposal waits for the operator."""
    from yarn_adapt.service.records import ProposalState

    waiting = service.store.proposals(limit=1, states=[ProposalState.PENDING])
    if not waiting:
        return
    proposal = waiting[0]
    announce(
        f"  proposal {proposal.id} waits for your review: {server.url}/proposals/{proposal.id}"
    )
    while not stop.is_set():
        state = service.store.proposal(proposal.id).state
        if state is not ProposalState.PENDING:
            announce(f"  proposal {proposal.id} is now {state}")
            return
        stop.wait(REVIEW_POLL_S)


def _cluster(service: Service) -> SimulatedCluster:
    from yarn_adapt.service.simcluster import SimulatedCluster

    cluster = getattr(service.backend, "cluster", None)
    assert isinstance(cluster, SimulatedCluster)
    return cluster
