"""Options every long-running command shares, and the `--set KEY=VALUE` pairs (see
docs/CLI.md for the conventions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import click

from yarn_adapt.progress import configure

F = TypeVar("F", bound=Callable[..., object])


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        configure(enabled=False)
    return value


def quiet_option(command: F) -> F:
    """``--quiet``: no progress lines on stderr (results and errors still print)."""
    return click.option(
        "--quiet",
        "-q",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_quiet,
        help="No progress lines on stderr.",
    )(command)


def parse_set_pairs(settings: Sequence[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` options as a mapping (the later of a repeated key wins); what
    each key means and accepts is read by :mod:`yarn_adapt.set_keys`."""
    parsed: dict[str, str] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        parsed[key.strip()] = value.strip()
    return parsed
