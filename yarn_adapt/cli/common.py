"""Options every long-running command shares (see docs/CLI.md for the conventions)."""

from __future__ import annotations

from collections.abc import Callable
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
