"""``yarn-adapt operator-token issue|list|revoke``: named operators' tokens.

An action taken with a named token is recorded under its operator's name
(:mod:`yarn_adapt.service.web.operators`); the service's shared write token is
recorded as "operator (shared token)". These commands manage the named ones in the
service's database (``[state]`` of ``--config``), beside a running service or not:
the service reads the table on every check, so a revoke takes effect at once.

``issue NAME`` prints the token once, alone on stdout (``> token-file`` keeps it; the
rest goes to stderr). Issuing for a name that has a token is refused; ``--rotate``
replaces it, and the old one stops working at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from yarn_adapt.cli.agent_token import CONFIG, JSON, _actor, _when, service_store

if TYPE_CHECKING:
    from yarn_adapt.service.state.records import OperatorTokenRecord
    from yarn_adapt.service.web.operators import OperatorTokens


@click.group("operator-token")
def operator_token_group() -> None:
    """Issue, list and revoke named operators' tokens (the audit log names who acted)."""


@operator_token_group.command("issue")
@click.argument("name")
@CONFIG
@click.option("--rotate", is_flag=True, help="Replace NAME's token (the old one stops).")
@JSON
def issue_command(name: str, config_path: Path, rotate: bool, as_json: bool) -> None:
    """Issue operator NAME's token (sign in with it, or send it as the API's bearer)."""
    with _tokens(config_path) as (tokens, database):
        issued = tokens.issue(name, _actor(), rotate=rotate)
    record, replaced = issued.record, issued.replaced
    if as_json:
        click.echo(json.dumps({**_record_json(record), "token": issued.token,
                               "replaced": replaced.token_id if replaced else None}))  # fmt: skip
        return
    click.echo(issued.token)
    click.echo(
        f"operator {record.name}: token {record.token_id} stored in {database}; shown only "
        "now: hand it to them (the page's sign-in, or 'Authorization: Bearer <token>')",
        err=True,
    )
    if replaced is not None:
        click.echo(f"it replaces token {replaced.token_id}, which no longer works", err=True)


@operator_token_group.command("list")
@CONFIG
@JSON
def list_command(config_path: Path, as_json: bool) -> None:
    """Every operator who has a token: its id, when and by whom issued."""
    with _tokens(config_path) as (tokens, _database):
        records = tokens.listed()
    if as_json:
        click.echo(json.dumps([_record_json(r) for r in records]))
        return
    if not records:
        click.echo("no operator has a named token (yarn-adapt operator-token issue NAME)")
    for r in records:
        click.echo(f"{r.name}  {r.token_id}  issued {_when(r.issued_at)} by {r.issued_by}")


@operator_token_group.command("revoke")
@click.argument("name")
@CONFIG
@JSON
def revoke_command(name: str, config_path: Path, as_json: bool) -> None:
    """Revoke operator NAME's token: the service refuses it from its next request."""
    with _tokens(config_path) as (tokens, _database):
        removed = tokens.revoke(name, _actor())
    if as_json:
        click.echo(json.dumps({**_record_json(removed), "revoked": True}))
        return
    click.echo(f"revoked operator {removed.name}'s token {removed.token_id}")


@contextmanager
def _tokens(config_path: Path) -> Iterator[tuple[OperatorTokens, Path]]:
    from yarn_adapt.service.web.operators import OperatorTokens

    with service_store(config_path) as (store, database):
        yield OperatorTokens(store), database


def _record_json(record: OperatorTokenRecord) -> dict[str, object]:
    return {
        "name": record.name,
        "token_id": record.token_id,
        "issued_at_epoch_s": record.issued_at,
        "issued_by": record.issued_by,
    }
