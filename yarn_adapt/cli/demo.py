"""``yarn-adapt demo``: the service against a simulated cluster replaying the bundled
trace, in recommend mode with auto-approve; no Java or Hadoop needed.

``--review`` makes it a tour of the operators' console: a token made for this run
and the page's address are printed, each proposal waits until an operator approves
or rejects it on the page, and ``--keep-serving`` keeps the page after the last
round.

After the last round the run is judged (the same jobs replayed under the starting
configuration: :func:`yarn_adapt.service.demo.replay.run_summary`); its progress is shown
like the rounds', and the judgement goes to the page. SIGTERM is SIGINT: either
stops the rounds, the judging (which then reports what it has) and the page."""

from __future__ import annotations

import json
import secrets
import tempfile
import threading
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from yarn_adapt.cli.common import quiet_option
from yarn_adapt.durations import duration
from yarn_adapt.errors import InputError
from yarn_adapt.progress import Progress

if TYPE_CHECKING:
    from yarn_adapt.service.demo.replay import DemoOptions
    from yarn_adapt.service.demo.simcluster import SimulatedCluster
    from yarn_adapt.service.service import Service
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
    help="Proposals wait for your approval on the page (prints a token made for this run).",
)
@click.option("--keep-serving", is_flag=True, help="Keep the page up after the last round.")
@click.option("--trace", type=click.Path(exists=True, path_type=Path), help="Another trace.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the demo's database and files here.  [default: a new temporary directory]",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--no-colocation",
    is_flag=True,
    help="Batch only: no latency-critical services, guard or node agents beside it.",
)
@quiet_option
def demo_command(
    once: bool, rounds: int, scheduler: str, interval_s: float, step_s: float | None,
    pace_s: float, nodes: int | None, containers_per_node: int, port: int, no_serve: bool,
    review: bool, keep_serving: bool, trace: Path | None, state_dir: Path | None, seed: int,
    no_colocation: bool,
) -> None:  # fmt: skip
    """Watch the configurator tune a simulated cluster: proposals with predicted
    latency before and after, applied at once (auto-approve) or, with --review,
    when you approve them on the page."""
    # Imported here: the web stack and the tuner are not needed by other commands.
    from yarn_adapt.service.demo.replay import DemoOptions, build_demo

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
        colocation=not no_colocation,
    )
    service = build_demo(options)
    try:
        found = _run(service, options, 1 if once else rounds, keep_serving=keep_serving)
        click.echo(json.dumps(found))
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
) -> dict[str, Any]:
    """The rounds, the page and the review holds, then the run judged (with one
    round, only its summary); returns the summary. ``stop_event``: stop on it
    instead of on SIGTERM/SIGINT (which only the main thread can catch)."""
    from yarn_adapt.service.demo.replay import describe_round, note_progress, note_round
    from yarn_adapt.service.runner import serving, stop_on_signals

    announce(f"demo state in {options.state_dir}")
    nodes = len(_cluster(service).cluster.nodes)
    how = "as asked" if options.nodes is not None else "sized from the trace's demand"
    announce(f"simulated cluster: {nodes} nodes x {options.containers_per_node} containers ({how})")
    for line in _colocation_lines(service):
        announce(line)
    progress = DemoProgress(rounds)
    stopping = nullcontext(stop_event) if stop_event is not None else stop_on_signals()
    with serving(service) as server, stopping as stop:
        if server is not None:
            announce(f"the operators' page: {server.url}  (Ctrl-C to stop)")
        if options.review and server is not None:
            announce(f"sign in at {server.url}/login with this run's token: {options.token}")
        done = 0
        while not stop.is_set() and done < rounds:
            report = service.loop.run_round()
            note_round(service, report)
            note_progress(service, rounds)
            done += 1
            for line in describe_round(report, service, _cluster(service).elapsed_s):
                announce(line)
            progress.round_done(done, report.timings_s.get("observe", 0.0))
            if options.review and server is not None:
                _await_review(service, server, stop, announce)
            if _cluster(service).done or done >= rounds:
                break
            stop.wait(options.interval_s)
        found = _judged(service, options, done, rounds, progress, stop)
        if keep_serving and server is not None and not stop.is_set():
            announce(f"rounds done; the page stays at {server.url} until Ctrl-C (or SIGTERM)")
            stop.wait()
    return found


def _judged(
    service: Service,
    options: DemoOptions,
    done: int,
    rounds: int,
    progress: DemoProgress,
    stop: threading.Event,
) -> dict[str, Any]:
    """The run judged (one round: its summary only); a stop during the replay ends
    it early, and the summary says what it lacks (``complete`` false)."""
    from yarn_adapt.service.demo.replay import StopJudging, judged_so_far, run_summary, summary

    if rounds == 1:
        return summary(service, done, _cluster(service).elapsed_s)

    def segment(finished: int, total: int) -> None:
        progress.replayed(finished, total)
        if stop.is_set():
            raise StopJudging

    try:
        return run_summary(service, options, done, segment)
    except StopJudging:
        return judged_so_far(service, done)


class DemoProgress(Progress):
    """``demo round N/M`` with an ETA that counts what is left of the rounds and the
    judging after them (replaying the run under the starting configuration costs
    about as much simulation as the rounds did); none before three rounds have
    shown what a round costs -- the first ones, with nothing to tune yet, are quick."""

    def __init__(self, rounds: int) -> None:
        super().__init__("demo round", rounds)
        self.simulated_wall_s = 0.0  # wall time the rounds spent simulating
        self.judging: Progress | None = None

    def round_done(self, done: int, simulating_s: float) -> None:
        self.simulated_wall_s += simulating_s
        self.advance(done)

    def line(self, done: int, now: float, note: str = "") -> str:
        elapsed = now - self.started
        total = self.total or done
        parts = [f"yarn-adapt: {self.what} {done}/{total}", f"{duration(elapsed)} elapsed"]
        if done < total and done >= ETA_AFTER_ROUNDS:
            rounds_left = elapsed / done * (total - done)
            judging = self.simulated_wall_s / done * total
            parts.append(f"ETA {duration(rounds_left + judging)} (then judging the run)")
        elif done < total:
            parts.append(f"ETA after {ETA_AFTER_ROUNDS} rounds")
        elif total > 1:
            parts.append("judging the run next")
        if note:
            parts.append(note)
        return " · ".join(parts)

    def replayed(self, done: int, total: int) -> None:
        if self.judging is None:
            self.judging = Progress(
                "demo judging the run: the starting configuration replayed", total
            )
        self.judging.advance(done)


ETA_AFTER_ROUNDS = 3


def _await_review(
    service: Service,
    server: WebServer,
    stop: threading.Event,
    announce: Callable[[str], None],
) -> None:
    """Hold the rounds while a proposal waits for the operator."""
    from yarn_adapt.service.state.records import ProposalState

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


def _colocation_lines(service: Service) -> list[str]:
    from yarn_adapt.service.demo.simcoloc import DemoColocation

    beside = getattr(service.backend, "beside", None)
    if not isinstance(beside, DemoColocation):
        return []
    app = beside.app
    where = ", ".join(f"{s.name} on {s.node_id}" for s in app.services)
    return [
        f"latency-critical services: {where}; {app.entry.name}'s P95 target "
        f"{app.target_ms:g} ms; guard auto, a cycle every {beside.period_s:g} simulated s, "
        "a simulated agent on every node (--no-colocation: batch only)"
    ]


def _cluster(service: Service) -> SimulatedCluster:
    from yarn_adapt.service.demo.simcluster import SimulatedCluster

    cluster = getattr(service.backend, "cluster", None)
    assert isinstance(cluster, SimulatedCluster)
    return cluster
