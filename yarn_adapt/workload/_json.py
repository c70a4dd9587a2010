"""Streams of JSON objects (SLS and Rumen traces): concatenated top-level objects,
or one top-level array of them. Each object comes with its index and start line so
errors can say ``file:line: job object #N: ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from yarn_adapt.errors import TraceError
from yarn_adapt.workload._io import MalformedRows, read_all_text

_SPACE = re.compile(r"\s*")
_BRACE_OR_QUOTE = re.compile(r'[{}"]')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


@dataclass(frozen=True)
class JsonObject:
    """One top-level object of the stream and where it starts."""

    index: int
    line: int
    value: object


def json_objects(path: Path, rows: MalformedRows) -> Iterator[JsonObject]:
    """Every top-level object of the file. A value that is not valid JSON is one
    malformed row; reading resumes after its closing brace."""
    text = read_all_text(path, rows)
    position = _SPACE.match(text).end()  # type: ignore[union-attr]
    if text.startswith("[", position):
        yield from _array_items(path, text, rows)
        return
    decoder = json.JSONDecoder()
    index, line, counted = 0, 1, 0
    while position < len(text):
        line, counted = line + text.count("\n", counted, position), position
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            rows.reject(
                TraceError(str(path), exc.lineno, f"object #{index + 1}: invalid JSON: {exc.msg}")
            )
            end = _end_of_value(text, position)
        else:
            yield JsonObject(index + 1, line, value)
        index += 1
        position = _SPACE.match(text, end).end()  # type: ignore[union-attr]


def _array_items(path: Path, text: str, rows: MalformedRows) -> Iterator[JsonObject]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        rows.reject(TraceError(str(path), exc.lineno, f"invalid JSON array: {exc.msg}"))
        return
    for index, value in enumerate(items, start=1):
        yield JsonObject(index, 1, value)


def _end_of_value(text: str, start: int) -> int:
    """Just past the object starting at ``start`` (braces balanced, strings
    skipped); the end of the text when it never closes or is not an object."""
    if not text.startswith("{", start):
        return len(text)
    depth = 0
    position = start
    while match := _BRACE_OR_QUOTE.search(text, position):
        char = match.group()
        if char == '"':
            string = _STRING.match(text, match.start())
            if string is None:
                return len(text)
            position = string.end()
            continue
        depth += 1 if char == "{" else -1
        position = match.end()
        if depth == 0:
            return position
    return len(text)
