"""``yarn-adapt config validate|diff``: scheduler files checked offline."""

from __future__ import annotations

import json
from pathlib import Path

import click

from yarn_adapt.errors import ConfigFileError
from yarn_adapt.model import CapacitySchedulerConfig
from yarn_adapt.yarn.confxml import (
    ConfigChange,
    diff_configs,
    load_scheduler_config,
    raise_if_invalid,
    render_diff,
    validate,
)

FILE = click.Path(exists=False, dir_okay=False, path_type=Path)


@click.group("config")
def config_group() -> None:
    """Validate and compare capacity-scheduler.xml / fair-scheduler.xml files."""


@config_group.command("validate")
@click.argument("file", type=FILE)
@click.option(
    "--running",
    type=FILE,
    metavar="XML",
    help="The file the RM runs now (checks queue removals and moves).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def validate_command(file: Path, running: Path | None, as_json: bool) -> None:
    """Check FILE with YARN's own rules; list every problem, exit 2 if any."""
    config = load_scheduler_config(file)
    current = load_scheduler_config(running) if running else None
    issues = list(validate(config, current))
    kind = "capacity" if isinstance(config, CapacitySchedulerConfig) else "fair"
    queues = sum(1 for _ in config.queues())
    if as_json:
        refused = [i for i in issues if _refused(i)]
        click.echo(
            json.dumps(
                {
                    "file": str(file), "scheduler": kind, "queues": queues,
                    "valid": not refused, "issues": [str(i) for i in issues],
                }
            )
        )  # fmt: skip
    else:
        for issue in issues:
            click.echo(f"{file}: {issue}")
    raise_if_invalid(config, current, source=str(file))
    if not as_json:
        click.echo(f"{file}: valid {kind} scheduler configuration, {queues} queues")


def _refused(issue: object) -> bool:
    return str(getattr(issue, "severity", "")) == "refused"


@config_group.command("diff")
@click.argument("old", type=FILE)
@click.argument("new", type=FILE)
@click.option("--json", "as_json", is_flag=True, help="A JSON list of changes instead of text.")
def diff_command(old: Path, new: Path, as_json: bool) -> None:
    """Show what changes from OLD to NEW, per queue and property."""
    before, after = load_scheduler_config(old), load_scheduler_config(new)
    if type(before) is not type(after):
        raise ConfigFileError(str(new), f"is a different scheduler's file than {old}")
    changes = diff_configs(before, after)
    if as_json:
        click.echo(json.dumps([change_json(c) for c in changes]))
        return
    click.echo(render_diff(changes) if changes else "no differences")


def change_json(change: ConfigChange) -> dict[str, str | None]:
    return {
        "kind": str(change.kind),
        "queue": change.queue,
        "property": change.prop,
        "old": change.old,
        "new": change.new,
    }
