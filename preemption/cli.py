"""The agent's commands: ``yarn-adapt agent ...`` and ``python -m preemption ...``.

``run`` starts the agent (restoring first what a crashed run left), ``restore`` puts
back every limit a previous run changed, ``discover`` lists the containers the agent
sees and how it classifies them, ``status`` prints what the running agent does now
(its status file: batch's quota, weights, memory caps, squeezes, evictions). This
module only parses options and prints; it lives in the agent's package so a node
can run it without loading the rest of yarn-adapt's CLI (``yarn_adapt.cli`` imports
the tuner), and ``yarn_adapt.cli`` registers the same group as ``yarn-adapt agent``.
"""

from __future__ import annotations

import faulthandler
import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from preemption.agent import Agent

CONFIG = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    metavar="TOML",
    help="The agent's settings (see conf/yarn-adapt-agent.toml).",
)


@click.group("agent")
def agent_group() -> None:
    """The node agent: gradual, cgroup-based reclaim of batch resources."""


@agent_group.command("run")
@CONFIG
@click.option("--dry-run", is_flag=True, help="Decide and log, change nothing.")
@click.option("--ticks", type=click.IntRange(min=1), help="Stop after N intervals.")
def run_command(config_path: Path, dry_run: bool, ticks: int | None) -> None:
    """Run the agent until SIGTERM/SIGINT, then restore every limit it changed.
    SIGUSR1 writes every thread's stack to stderr (where a stuck agent is)."""
    from preemption.agent import Agent
    from preemption.settings import load_agent_settings

    _stacks_on_sigusr1()
    settings = load_agent_settings(config_path)
    agent = Agent.build(settings, dry_run=dry_run or None)
    _warn_if_moves_are_slow()
    recovered = agent.recover()
    if recovered.restored_values or recovered.removed_groups:
        click.echo(f"restored after a previous run: {recovered.summary()}", err=True)
    server = _metrics_server(agent)
    try:
        with _stop_on_signals() as stop:
            click.echo(
                f"yarn-adapt agent on {settings.node_id}: {settings.agent.mode}, "
                f"strategy {settings.reclaim.strategy}{', dry run' if dry_run else ''}",
                err=True,
            )
            agent.run(stop, ticks=ticks)
    finally:
        report = agent.shutdown()
        if server is not None:
            server.shutdown()
        click.echo(f"stopped: {report.summary()}", err=True)


@agent_group.command("restore")
@CONFIG
def restore_command(config_path: Path) -> None:
    """Restore every limit and cgroup a previous run left in the state file."""
    from preemption.agent import Agent
    from preemption.settings import load_agent_settings

    agent = Agent.build(load_agent_settings(config_path), dry_run=False, restore_only=True)
    if agent.journal.empty:
        click.echo("nothing to restore")
        return
    click.echo(agent.recover().summary())


@agent_group.command("discover")
@CONFIG
@click.option("--json", "as_json", is_flag=True, help="One JSON object: the containers, why none.")
def discover_command(config_path: Path, as_json: bool) -> None:
    """List the YARN containers on this node and what the agent would do with them."""
    from preemption.agent import Agent
    from preemption.model import ContainerRef
    from preemption.settings import load_agent_settings

    agent = Agent.build(load_agent_settings(config_path), dry_run=True)
    view = agent.observe()
    rows: list[dict[str, object]] = []
    for found in view.containers:
        kind = agent.kind_of(ContainerRef.parse(found.container_id)).value
        cgroup = found.cgroup.relpath if found.cgroup else None
        rows.append({"container": found.container_id, "kind": kind, "pids": list(found.pids),
                     "running": found.running, "cgroup": cgroup})  # fmt: skip
        if not as_json:
            pids = ",".join(map(str, found.pids)) or "-"
            click.echo(f"{found.container_id}  {kind}  pids {pids}  cgroup {cgroup or '-'}")
    if as_json:
        click.echo(json.dumps({"containers": rows, "problem": view.problem}))
    elif not rows:
        why = f": {view.problem}" if view.problem is not None else ""
        click.echo(f"no YARN containers on this node{why}")


@agent_group.command("status")
@CONFIG
@click.option("--json", "as_json", is_flag=True, help="The status file as it is.")
def status_command(config_path: Path, as_json: bool) -> None:
    """What the running agent does now: isolation, squeezes, evictions."""
    from preemption.settings import load_agent_settings
    from preemption.status import read_status, status_lines

    document = read_status(load_agent_settings(config_path).status_path())
    if as_json:
        click.echo(json.dumps(document, indent=1))
        return
    for line in status_lines(document):
        click.echo(line)


def _metrics_server(agent: Agent) -> WSGIServer | None:
    """Serve /metrics from the agent's registry when a port is configured."""
    port = agent.settings.agent.metrics_port
    if not port:
        return None
    from prometheus_client import start_http_server

    server, _thread = start_http_server(
        port, addr=agent.settings.agent.metrics_address, registry=agent.metrics.registry
    )
    return server


def _warn_if_moves_are_slow() -> None:
    """Say at start when adopting a container's processes waits for the kernel's RCU."""
    from preemption.cgroups.dynmods import slow_moves_warning

    try:
        warning = slow_moves_warning(Path("/proc/mounts").read_text())
    except OSError:
        return
    if warning is not None:
        click.echo(f"warning: when adopting containers' processes, {warning}", err=True)


def _stacks_on_sigusr1() -> None:
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
    except (AttributeError, ValueError, OSError):  # a stderr with no descriptor (tests)
        return


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def main(argv: list[str] | None = None) -> int:
    """``python -m preemption``: the agent's commands alone.

    A node running only the agent need not load the tuner and the comparator that
    ``yarn-adapt``'s other commands import; errors map to one line and the error
    class's exit code exactly as in :func:`yarn_adapt.cli.main`.
    """
    import logging
    import sys

    from yarn_adapt.errors import YarnAdaptError

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        agent_group.main(args=argv if argv is not None else sys.argv[1:], standalone_mode=False)
    except YarnAdaptError as exc:
        click.echo(f"yarn-adapt agent: {exc.one_line()}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("yarn-adapt agent: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return 0
