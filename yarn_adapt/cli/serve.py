"""``yarn-adapt serve --config FILE``: the configurator service beside a real RM."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("serve")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="yarn-adapt.toml (see conf/yarn-adapt.toml).",
)
@click.option("--once", is_flag=True, help="Run one round, print it as JSON and exit.")
def serve_command(config_path: Path, once: bool) -> None:
    """Observe, propose, act by mode and record, every interval; serve the
    operators' page and /metrics."""
    # Imported here: the web stack and the tuner are not needed by other commands.
    from yarn_adapt.service.backend import YarnBackend
    from yarn_adapt.service.proposer import snapshot_proposer
    from yarn_adapt.service.runner import ensure_token, serving, stop_on_signals
    from yarn_adapt.service.service import Service
    from yarn_adapt.service.settings import load_settings
    from yarn_adapt.service.web.views import round_view

    settings = load_settings(config_path)
    token, token_file = ensure_token(settings)
    proposer = snapshot_proposer(settings)
    service = Service.build(settings, YarnBackend(settings), proposer, token=token)
    try:
        for line in service.start():
            click.echo(f"reconciled: {line}", err=True)
        if once:
            click.echo(json.dumps(round_view(service.loop.run_round())))
            return
        with serving(service) as server, stop_on_signals() as stop:
            if server is not None:
                where = f"; token in {token_file}" if token_file else ""
                click.echo(f"yarn-adapt serving {server.url} ({settings.service.mode}){where}")
            service.run_forever(stop)
            service.drain()  # before the page stops: the approver gets the answer
    finally:
        service.close()
