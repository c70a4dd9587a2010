"""The ``yarn-adapt`` command line.

Every command is a thin shell over library functions: it parses options, calls the
library, prints. Errors from the project's error tree become ``yarn-adapt: <message>``
on one line with the error class's exit code; a traceback only with ``--debug``.
Unexpected exceptions are bugs: they keep their traceback.

This module has the group, ``bench`` and the error mapping. The other commands:
``observe``, ``config`` (``config validate``, ``config diff``), ``apply`` (``apply``,
``recover``), ``sim``, ``propose``, ``serve``, ``demo``, ``trace`` (the ``trace``
group), ``testbed``, ``guard`` (``guard status``), ``doctor`` (over
:mod:`yarn_adapt.doctor`), ``agent`` (re-exports ``preemption.cli``), ``agent_token``
and ``operator_token``. ``connect`` holds the shared ``--rm/--history/--user/...``
options, ``common`` ``--quiet``; progress lines come from :mod:`yarn_adapt.progress`.
``conventions`` holds the rules every command follows (docs/CLI.md) as data, checked by
``tests/cli/test_conventions.py``.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from yarn_adapt import bench as bench_registry
from yarn_adapt import progress
from yarn_adapt.cli.common import parse_set_pairs, quiet_option
from yarn_adapt.errors import YarnAdaptError

log = logging.getLogger("yarn_adapt")


class _State:
    debug = False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="yarn-adapt", prog_name="yarn-adapt")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.option("-v", "--verbose", is_flag=True, help="Log progress to stderr.")
def cli(debug: bool, verbose: bool) -> None:
    """Workload-adaptive scheduler configuration for Hadoop YARN."""
    _State.debug = debug
    progress.configure(enabled=True)  # a command's --quiet turns it off
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@cli.command("bench")
@click.argument("name", required=False)
@click.option("--quick", is_flag=True, help="A small version that finishes in under a minute.")
@click.option("--trace", type=click.Path(path_type=Path), help="Another workload file.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Benchmark-specific setting (repeatable).",
)
@click.option("--list", "list_only", is_flag=True, help="List the benchmarks.")
@click.option("--json", "as_json", is_flag=True, help="With --list: a JSON list.")
@click.option("--curves", type=click.Path(path_type=Path), help="Curves CSV (cilantro).")
@click.option(
    "--traces",
    "trace_counts",
    multiple=True,
    metavar="N[,N...]",
    help="Trace counts, one scaling row each (trace-risk); repeatable.",
)
@quiet_option
def bench_command(
    name: str | None,
    quick: bool,
    trace: Path | None,
    seed: int,
    settings: Sequence[str],
    list_only: bool,
    as_json: bool,
    curves: Path | None = None,
    trace_counts: Sequence[str] = (),
) -> None:
    """Run benchmark NAME; the last line of output is one JSON object of figures
    (always JSON: --json matters only with --list)."""
    if list_only or name is None:
        items = bench_registry.available()
        if as_json:
            click.echo(json.dumps([{"name": i.name, "summary": i.summary} for i in items]))
            return
        for item in items:
            click.echo(f"{item.name:24} {item.summary}")
        return
    extra = parse_set_pairs(settings)
    if curves is not None:
        extra["curves"] = str(curves)
    if trace_counts:
        if "traces" in extra:
            raise click.UsageError("give --traces or --set traces=..., not both")
        extra["traces"] = ",".join(trace_counts)
    options = bench_registry.BenchOptions(quick=quick, trace=trace, seed=seed, extra=extra)
    whole = progress.Progress(f"bench {name}", 1)
    whole.advance(0, "started")
    bench_registry.run_and_print(name, options, sys.stdout)
    whole.advance(1, "done")


def _register_commands() -> None:
    from yarn_adapt.cli.agent import agent_group
    from yarn_adapt.cli.agent_token import agent_token_group
    from yarn_adapt.cli.apply import apply_command, recover_command
    from yarn_adapt.cli.config import config_group
    from yarn_adapt.cli.demo import demo_command
    from yarn_adapt.cli.doctor import doctor_command
    from yarn_adapt.cli.guard import guard_group
    from yarn_adapt.cli.observe import observe_command
    from yarn_adapt.cli.operator_token import operator_token_group
    from yarn_adapt.cli.propose import propose_command
    from yarn_adapt.cli.serve import serve_command
    from yarn_adapt.cli.sim import sim_command
    from yarn_adapt.cli.testbed import testbed_command
    from yarn_adapt.cli.trace import trace_group

    for command in (
        observe_command,
        config_group,
        apply_command,
        recover_command,
        sim_command,
        propose_command,
        serve_command,
        demo_command,
        trace_group,
        testbed_command,
        agent_group,
        agent_token_group,
        operator_token_group,
        guard_group,
        doctor_command,
    ):
        cli.add_command(command)


_register_commands()


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: run the CLI, turning project errors into one line."""
    try:
        cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except YarnAdaptError as exc:
        if _State.debug:
            raise
        click.echo(f"yarn-adapt: {exc.one_line()}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("yarn-adapt: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
