"""One reader for the TOML settings files of the service (``yarn-adapt.toml``) and of
the node agent (``yarn-adapt-agent.toml``).

A file is a set of tables, each read into a frozen dataclass whose field types say
what a key accepts: ``bool``, ``int``, ``float`` (an integer is taken), ``str``,
``tuple[str, ...]`` (a TOML list of strings) or a ``StrEnum`` (one of its values). An
unknown table or key, or a value of the wrong kind, is a :class:`SettingsError` of one
line naming the file, the table and the key, and what it accepts. Ranges and choices
the types cannot say are each settings module's own checks.
"""

from __future__ import annotations

import os
import tomllib
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from yarn_adapt.errors import SettingsError

S = TypeVar("S")


@dataclass(frozen=True)
class TomlFile:
    """A settings file as TOML gave it, with its permission bits (for secrets)."""

    source: str
    raw: dict[str, Any]
    mode: int


def read_toml(path: str | os.PathLike[str]) -> TomlFile:
    """``path`` parsed; SettingsError naming the file when it is missing, unreadable
    or not TOML."""
    source = os.fspath(path)
    try:
        with Path(source).open("rb") as stream:
            mode = os.fstat(stream.fileno()).st_mode & 0o777
            raw = tomllib.load(stream)
    except FileNotFoundError as exc:
        raise SettingsError(f"{source}: no such settings file") from exc
    except OSError as exc:
        raise SettingsError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{source}: not valid TOML: {exc}") from exc
    return TomlFile(source, raw, mode)


def read_sections(
    raw: Mapping[str, Any], known: Mapping[str, type], source: str
) -> dict[str, object]:
    """Every table of ``raw`` read into its dataclass of ``known`` (by table name)."""
    sections: dict[str, object] = {}
    for name, table in raw.items():
        section_type = known.get(name)
        if section_type is None:
            raise SettingsError(f"{source}: unknown table [{name}] (known: {', '.join(known)})")
        if not isinstance(table, Mapping):
            raise SettingsError(f"{source}: {name} must be a table ([{name}])")
        sections[name] = read_section(section_type, name, table, source)
    return sections


def read_section(section_type: type[S], name: str, table: Mapping[str, Any], source: str) -> S:
    """One table into ``section_type``; its missing keys keep their defaults."""
    hints = get_type_hints(section_type)
    known = {f.name for f in fields(section_type)}  # type: ignore[arg-type]
    values: dict[str, object] = {}
    for key, value in table.items():
        if key not in known:
            raise SettingsError(
                f"{source}: unknown setting [{name}] {key} (known: {', '.join(sorted(known))})"
            )
        values[key] = typed_value(value, hints[key], f"{source}: [{name}] {key}")
    return section_type(**values)


def typed_value(value: object, wanted: Any, where: str) -> object:
    """``value`` as TOML gave it, checked against the field's type ``wanted``."""
    if isinstance(wanted, type) and issubclass(wanted, StrEnum):
        allowed = [member.value for member in wanted]
        if value not in allowed:
            raise SettingsError(f"{where}: expected one of {', '.join(allowed)}, got {value!r}")
        return wanted(value)
    if isinstance(wanted, types.GenericAlias):  # tuple[str, ...]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SettingsError(f"{where}: expected a list of strings, got {value!r}")
        return tuple(value)
    if not _CHECKS[wanted](value):
        raise SettingsError(f"{where}: expected {_NAMES[wanted]}, got {value!r}")
    return float(value) if wanted is float else value  # type: ignore[arg-type]


_CHECKS: dict[Any, Callable[[object], bool]] = {
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    str: lambda v: isinstance(v, str),
}
_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
