"""``yarn-adapt agent-token issue|list|revoke``: the node agents' credentials.

Each node agent reads its own node's reclaim request with a token issued for that
node (:mod:`yarn_adapt.service.state.agent_tokens`); these commands manage them in the
service's database (``[state]`` of ``--config``), beside a running service or not:
the service reads the table on every request, so a revoke takes effect at once.

``issue NODE`` prints the token once, alone on stdout (``> token-file`` keeps it;
the rest goes to stderr). Issuing for a node that has a token is refused;
``--rotate`` replaces it, and the old one stops working at once.
"""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from yarn_adapt.service.state.agent_tokens import AgentTokens
    from yarn_adapt.service.state.records import AgentTokenRecord
    from yarn_adapt.service.state.store import Store

CONFIG = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    metavar="TOML",
    help="yarn-adapt.toml: its [state] names the service's database.",
)
JSON = click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")


@click.group("agent-token")
def agent_token_group() -> None:
    """Issue, list and revoke the node agents' tokens (one per node)."""


@agent_token_group.command("issue")
@click.argument("node")
@CONFIG
@click.option("--rotate", is_flag=True, help="Replace the node's token (the old one stops).")
@JSON
def issue_command(node: str, config_path: Path, rotate: bool, as_json: bool) -> None:
    """Issue NODE's agent token (NODE as the RM names it, host:port); printed once."""
    with _tokens(config_path) as (tokens, database):
        issued = tokens.issue(node, _actor(), rotate=rotate)
    record, replaced = issued.record, issued.replaced
    if as_json:
        click.echo(json.dumps({**_record_json(record), "token": issued.token,
                               "replaced": replaced.token_id if replaced else None}))  # fmt: skip
        return
    click.echo(issued.token)
    click.echo(
        f"node {record.node}: agent token {record.token_id} stored in {database}; shown "
        f"only now: put it in the agent's [service] token_file (mode 600) or "
        f"$YARN_ADAPT_AGENT_TOKEN",
        err=True,
    )
    if replaced is not None:
        click.echo(f"it replaces token {replaced.token_id}, which no longer works", err=True)


@agent_token_group.command("list")
@CONFIG
@JSON
def list_command(config_path: Path, as_json: bool) -> None:
    """Every node that has an agent token: its token id, when and by whom issued."""
    with _tokens(config_path) as (tokens, _database):
        records = tokens.listed()
    if as_json:
        click.echo(json.dumps([_record_json(r) for r in records]))
        return
    if not records:
        click.echo("no node has an agent token (yarn-adapt agent-token issue NODE)")
    for r in records:
        click.echo(f"{r.node}  {r.token_id}  issued {_when(r.issued_at)} by {r.issued_by}")


@agent_token_group.command("revoke")
@click.argument("node")
@CONFIG
@JSON
def revoke_command(node: str, config_path: Path, as_json: bool) -> None:
    """Revoke NODE's agent token: the service refuses it from its next request."""
    with _tokens(config_path) as (tokens, _database):
        removed = tokens.revoke(node, _actor())
    if as_json:
        click.echo(json.dumps({**_record_json(removed), "revoked": True}))
        return
    click.echo(f"revoked node {removed.node}'s agent token {removed.token_id}")


@contextmanager
def _tokens(config_path: Path) -> Iterator[tuple[AgentTokens, Path]]:
    from yarn_adapt.service.state.agent_tokens import AgentTokens

    with service_store(config_path) as (store, database):
        yield AgentTokens(store), database


@contextmanager
def service_store(config_path: Path) -> Iterator[tuple[Store, Path]]:
    """The service's database named by ``--config`` (``[state]``), open, and its path."""
    from yarn_adapt.service.settings import load_settings
    from yarn_adapt.service.state.store import Store

    database = load_settings(config_path).state.database_path
    store = Store(database)
    try:
        yield store, database
    finally:
        store.close()


def _actor() -> str:
    """Who issued or revoked, for the audit log: the login name, from the CLI."""
    try:
        return f"{getpass.getuser()} (cli)"
    except (OSError, KeyError):  # no login name in this environment
        return "operator (cli)"


def _record_json(record: AgentTokenRecord) -> dict[str, object]:
    return {
        "node": record.node,
        "token_id": record.token_id,
        "issued_at_epoch_s": record.issued_at,
        "issued_by": record.issued_by,
    }


def _when(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_s))
