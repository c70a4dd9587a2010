"""What every importer shares: reading files, the strict / lenient policy, field access
with precise errors, and the checks of the normalised spans.

Strict (the default): the first bad record raises :class:`TraceInputError` naming the
file and the record (``<file>: record 7 (data[0].spans[3]): <problem> (--lenient skips
such records)``); nothing is imported. Lenient: a bad record is skipped and counted by
reason, and the good ones are imported. A file that is not JSON (or CSV) at all fails
either way: there is no record to skip. Records a format's own rules merge into others
(Alibaba's caller and callee rows of one call, identical rows) are neither: they are
counted by rule in ``merged``.

Bytes that are not UTF-8 are read as lone surrogates; a record holding one is a bad
record ("not UTF-8"), so one broken name costs one record, not the file.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracing.errors import TraceInputError
from tracing.model import SPAN_ID_DIGITS, TRACE_ID_DIGITS, Span, span_problem

log = logging.getLogger("tracing.importers")
WARNINGS_PER_FILE = 5
_HEX = frozenset("0123456789abcdef")


class RecordError(ValueError):
    """A record is malformed; raised inside a parser, turned into a rejection."""

    def __init__(self, problem: str, reason: str = "malformed") -> None:
        super().__init__(problem)
        self.reason = reason


LENIENT_HINT = "(--lenient skips such records)"


class Rejects:
    """Strict: raise. Lenient: count per reason and log the first few. Records merged
    by the format's rules are counted per rule in ``merged`` either way."""

    def __init__(self, source: str, *, lenient: bool) -> None:
        self.source = source
        self.lenient = lenient
        self.counts: Counter[str] = Counter()
        self.merged: Counter[str] = Counter()

    def reject(self, where: str, problem: str, reason: str) -> None:
        if not self.lenient:
            raise TraceInputError(self.source, where, f"{problem} {LENIENT_HINT}")
        error = TraceInputError(self.source, where, problem)
        self.counts[reason] += 1
        if sum(self.counts.values()) <= WARNINGS_PER_FILE:
            log.warning("skipped: %s", error.one_line())

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class ImportResult:
    """The spans read from one file, what was skipped (lenient) and why, and what the
    format's rules merged (records that describe the same span)."""

    source: str
    format: str
    spans: tuple[Span, ...]
    records: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    merged: Mapping[str, int] = field(default_factory=dict)

    @property
    def traces(self) -> int:
        return len({s.trace_id for s in self.spans})


# --------------------------------------------------------------------------- reading


def read_text(path: Path) -> str:
    """The file (gunzipped if gzip) as text; non-UTF-8 bytes become lone surrogates."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        problem = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise TraceInputError(str(path), "", f"cannot read: {problem}") from exc
    return raw.decode("utf-8", "surrogateescape")


def json_documents(source: str, text: str, rejects: Rejects) -> Iterator[tuple[str, Any]]:
    """One JSON document, or JSON Lines (one document per line): (where, document)."""
    try:
        yield "", json.loads(text)
        return
    except json.JSONDecodeError as whole:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or not _looks_like_lines(lines):
            raise TraceInputError(
                source, f"line {whole.lineno} column {whole.colno}", f"invalid JSON: {whole.msg}"
            ) from whole
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield f"line {number}", json.loads(line)
        except json.JSONDecodeError as exc:
            rejects.reject(f"line {number}", f"invalid JSON: {exc.msg}", "invalid-json")


def _looks_like_lines(lines: list[str]) -> bool:
    starts = [line.lstrip()[:1] for line in lines]
    return all(c == "{" for c in starts)


# --------------------------------------------------------------------------- fields


def obj(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RecordError(f"{what} must be an object, not {_kind(value)}", "schema")
    return value


def items(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"{what} must be a list, not {_kind(value)}", "schema")
    return value


def text(value: Any, what: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise RecordError(f"{what} must be a string, not {_kind(value)}", "schema")
    clean(value, what)
    return value


def clean(value: str, what: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordError(f"{what} is not UTF-8 text", "not-utf8") from exc
    return value


def integer(value: Any, what: str) -> int:
    """An integer given as a JSON number or a decimal string (OTLP's 64-bit fields)."""
    if isinstance(value, bool):
        raise RecordError(f"{what} must be an integer, not a boolean", "schema")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise RecordError(f"{what} must be an integer, not {value!r:.40}", "schema")


def _kind(value: Any) -> str:
    for kind, name in ((Mapping, "an object"), (list, "a list"), (str, "a string")):
        if isinstance(value, kind):
            return name
    return repr(value)[:30]


def hex_id(value: str, digits: int, what: str) -> str:
    """A hex id of at most ``digits`` digits, lower-cased and left-padded."""
    lowered = value.strip().lower()
    if not lowered or len(lowered) > digits or not _HEX.issuperset(lowered):
        raise RecordError(f"{what} {value!r:.40} is not a hex id of up to {digits} digits", "id")
    if lowered.strip("0") == "":
        raise RecordError(f"{what} is all zeros", "id")
    return lowered.rjust(digits, "0")


def external_trace_id(value: str) -> str:
    """A trace id from a source whose ids are not hex (Alibaba's ``T_...``): hex ids
    pass through, anything else is hashed to 32 hex digits."""
    lowered = value.strip().lower()
    hex_id_already = len(lowered) <= TRACE_ID_DIGITS and _HEX.issuperset(lowered)
    if hex_id_already and lowered.strip("0"):
        return lowered.rjust(TRACE_ID_DIGITS, "0")
    return hashlib.blake2b(value.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def derived_span_id(*parts: str) -> str:
    digest = hashlib.blake2b("\0".join(parts).encode("utf-8", "surrogateescape"), digest_size=8)
    span_id = digest.hexdigest()
    return span_id if span_id.strip("0") else "1".rjust(SPAN_ID_DIGITS, "0")


# --------------------------------------------------------------------------- checks


def checked(records: Iterable[tuple[str, Span]], rejects: Rejects) -> list[Span]:
    """Normalised spans that pass :func:`tracing.model.span_problem`, counted once per
    (trace, span id), without parent cycles; the rest rejected by record."""
    kept: dict[tuple[str, str], tuple[str, Span]] = {}
    for where, span in records:
        problem = span_problem(span)
        if problem:
            reason = "end-before-start" if "ends before" in problem else "invalid-span"
            rejects.reject(where, problem, reason)
            continue
        key = (span.trace_id, span.span_id)
        if key in kept:
            first = kept[key][0]
            rejects.reject(
                where,
                f"duplicate span id {span.span_id} in trace {span.trace_id} (first at {first})",
                "duplicate-span",
            )
            continue
        kept[key] = (where, span)
    for where, span in _on_cycles(kept):
        rejects.reject(
            where,
            f"span {span.span_id} of trace {span.trace_id} is on a cycle of parent links",
            "parent-cycle",
        )
        del kept[(span.trace_id, span.span_id)]
    return [span for _, span in kept.values()]


def _on_cycles(kept: Mapping[tuple[str, str], tuple[str, Span]]) -> list[tuple[str, Span]]:
    state: dict[tuple[str, str], int] = {}  # 1: on the current walk, 2: settled
    cyclic: list[tuple[str, Span]] = []
    for start in kept:
        walk: list[tuple[str, str]] = []
        key: tuple[str, str] | None = start
        while key is not None and key in kept and key not in state:
            state[key] = 1
            walk.append(key)
            parent = kept[key][1].parent_id
            key = (key[0], parent) if parent is not None else None
        if key is not None and state.get(key) == 1:  # walked into itself
            loop = walk[walk.index(key) :]
            cyclic += [kept[k] for k in loop]
        for k in walk:
            state[k] = 2
    return cyclic
