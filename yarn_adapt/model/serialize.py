"""Model objects to plain JSON-ready data (for ``--json`` output and the service)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def to_jsonable(value: Any) -> Any:
    """Dataclasses become dicts (fields in order), enums their values, tuples lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        return [to_jsonable(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value
