"""``yarn-adapt doctor [--config TOML] [--json]``: is each piece of the co-location half
in place? One line per piece -- the ResourceManager (and the guard's write), Redis,
the latency-critical services' traces, the node agents' reports, the clocks -- "ok"
or what is wrong and how to fix it (see :mod:`yarn_adapt.doctor.checks`).

Exit 0 when every piece is ok, 1 when one is not (or could not be checked), 2 for a
settings error. ``--json`` prints one object: ``ok``, ``colocation_enabled`` and
``pieces`` (per piece ``piece``, ``status`` -- ``ok``, ``wrong`` or ``skipped`` --,
``summary``, ``fix`` and its figures: ``used_memory_mb``, ``age_s``,
``least_skew_s``, ...).
"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("doctor")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="TOML",
    help="yarn-adapt.toml, as the service reads it (default: the built-in defaults).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of lines.")
def doctor_command(config_path: Path | None, as_json: bool) -> None:
    """Check each piece of the co-location half: the RM and the guard's write access,
    Redis, fresh traces, the node agents' reports, the clocks."""
    from yarn_adapt.doctor.checks import diagnose, expectations
    from yarn_adapt.doctor.model import DoctorFoundProblems
    from yarn_adapt.doctor.observe import observe
    from yarn_adapt.service.settings import defaults, load_settings

    settings = load_settings(config_path) if config_path is not None else defaults()
    diagnosis = diagnose(observe(settings), expectations(settings))
    if as_json:
        click.echo(json.dumps(diagnosis.to_json()))
    else:
        for line in diagnosis.lines():
            click.echo(line)
    if not diagnosis.ok:
        count = len(diagnosis.problems)
        raise DoctorFoundProblems(f"doctor: {count} of {len(diagnosis.findings)} piece(s) not ok")
