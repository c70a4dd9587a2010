"""``yarn-adapt serve --config FILE``: the configurator service beside a real RM."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click

from yarn_adapt.errors import YarnUnavailable


@click.command("serve")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    metavar="TOML",
    help="yarn-adapt.toml (see conf/yarn-adapt.toml).",
)
@click.option(
    "--once",
    is_flag=True,
    help="Run one configurator round, print it as JSON and exit (no guard cycle: on "
    "exit the guard gives every node back, so it acts only in the running service).",
)
@click.option(
    "--public",
    is_flag=True,
    help="Allow [http] host off loopback (reads need no token: put a TLS proxy in front).",
)
def serve_command(config_path: Path, once: bool, public: bool) -> None:
    """Observe, propose, act by mode and record, every interval; serve the
    operators' page and /metrics."""
    # Imported here: the web stack and the tuner are not needed by other commands.
    from yarn_adapt.service.backend import YarnBackend
    from yarn_adapt.service.ingest import ingesting
    from yarn_adapt.service.proposers.choose import snapshot_proposer
    from yarn_adapt.service.runner import check_exposure, ensure_token, serving, stop_on_signals
    from yarn_adapt.service.service import Service
    from yarn_adapt.service.settings import load_settings
    from yarn_adapt.service.state.records import DecisionKind
    from yarn_adapt.service.web.views import round_view

    settings = load_settings(config_path)
    if public:
        settings = settings.with_overrides(http=replace(settings.http, public=True))
    if settings.http.enabled and not once:
        warning = check_exposure(settings)  # refused before anything starts
        if warning:
            click.echo(f"yarn-adapt: warning: {warning}", err=True)
    token, token_file = ensure_token(settings)
    proposer = snapshot_proposer(settings)
    service = Service.build(settings, YarnBackend(settings), proposer, token=token)
    try:
        for line in service.start():
            click.echo(f"reconciled: {line}", err=True)
        if once:
            report = service.loop.run_round()
            click.echo(json.dumps(round_view(report)))
            unavailable = [d for d in report.decisions if d.kind is DecisionKind.RM_UNAVAILABLE]
            if unavailable:  # exit 3, as every command that cannot reach the RM
                raise YarnUnavailable(unavailable[0].reason)
            return
        with ingesting(settings), serving(service) as server, stop_on_signals() as stop:
            if server is not None:
                where = f"; token in {token_file}" if token_file else ""
                click.echo(f"yarn-adapt serving {server.url} ({settings.service.mode}){where}")
            service.run_forever(stop)
            service.drain()  # before the page stops: the approver gets the answer
    finally:
        service.close()
