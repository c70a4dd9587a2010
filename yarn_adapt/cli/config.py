"""``yarn-adapt config validate|diff``: scheduler files checked offline."""

from __future__ import annotations

from pathlib import Path

import click

from yarn_adapt.errors import ConfigFileError
from yarn_adapt.model import CapacitySchedulerConfig
from yarn_adapt.yarn.confxml import (
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
    "--running", type=FILE, help="The file the RM runs now (checks queue removals and moves)."
)
def validate_command(file: Path, running: Path | None) -> None:
    """Check FILE with YARN's own rules; list every problem, exit 2 if any."""
    config = load_scheduler_config(file)
    current = load_scheduler_config(running) if running else None
    for issue in validate(config, current):
        click.echo(f"{file}: {issue}")
    raise_if_invalid(config, current, source=str(file))
    kind = "capacity" if isinstance(config, CapacitySchedulerConfig) else "fair"
    queues = sum(1 for _ in config.queues())
    click.echo(f"{file}: valid {kind} scheduler configuration, {queues} queues")


@config_group.command("diff")
@click.argument("old", type=FILE)
@click.argument("new", type=FILE)
def diff_command(old: Path, new: Path) -> None:
    """Show what changes from OLD to NEW, per queue and property."""
    before, after = load_scheduler_config(old), load_scheduler_config(new)
    if type(before) is not type(after):
        raise ConfigFileError(str(new), f"is a different scheduler's file than {old}")
    changes = diff_configs(before, after)
    click.echo(render_diff(changes) if changes else "no differences")
