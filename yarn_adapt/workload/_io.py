"""Reading trace files: transparent gzip, numbered lines, and the strict/lenient
policy for malformed rows shared by every loader.

This is the one place where file-system and decompression errors become
:class:`~yarn_adapt.errors.TraceError` (``path:line: problem``).
"""

from __future__ import annotations

import gzip
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from yarn_adapt.errors import TraceError

log = logging.getLogger("yarn_adapt.workload")

GZIP_MAGIC = b"\x1f\x8b"
# A few skipped rows are worth one warning each; past that, one summary line.
WARNINGS_PER_FILE = 5
_STREAM_ERRORS = (EOFError, OSError, zlib.error, UnicodeDecodeError)


def is_gzip(path: Path) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name)."""
    try:
        with path.open("rb") as raw:
            return raw.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise TraceError(str(path), 0, f"cannot read: {exc.strerror or exc}") from exc


def open_text(path: Path) -> TextIO:
    """The file as UTF-8 text, decompressed when it is gzip."""
    try:
        if is_gzip(path):
            return gzip.open(path, "rt", encoding="utf-8", newline="")
        return path.open("r", encoding="utf-8", newline="")
    except OSError as exc:
        raise TraceError(str(path), 0, f"cannot read: {exc.strerror or exc}") from exc


def read_all_text(path: Path, rows: MalformedRows) -> str:
    """The whole (decompressed) file; a broken stream keeps what was read when lenient."""
    with open_text(path) as stream:
        chunks: list[str] = []
        try:
            while chunk := stream.read(1 << 20):
                chunks.append(chunk)
        except _STREAM_ERRORS as exc:
            text = "".join(chunks)
            rows.reject(TraceError(str(path), text.count("\n") + 1, _stream_problem(exc)))
            return text
    return "".join(chunks)


def numbered_lines(path: Path, rows: MalformedRows) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` pairs; a truncated or corrupt stream is one malformed
    row (strict: TraceError at the line it broke on; lenient: reading stops)."""
    line_no = 0
    with open_text(path) as stream:
        try:
            for line_no, line in enumerate(stream, start=1):
                yield line_no, line
        except _STREAM_ERRORS as exc:
            rows.reject(TraceError(str(path), line_no + 1, _stream_problem(exc)))


def _stream_problem(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "file ends early (truncated gzip?)"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    return f"unreadable stream: {exc}"


class MalformedRows:
    """Strict: the first malformed row raises. Lenient: rows are skipped, counted
    (``Workload.skipped_rows``) and logged as warnings."""

    def __init__(self, source: str, *, lenient: bool) -> None:
        self.source = source
        self.lenient = lenient
        self.count = 0

    def reject(self, error: TraceError) -> None:
        """Raise ``error`` when strict; otherwise count and log it."""
        if not self.lenient:
            raise error
        self.count += 1
        if self.count <= WARNINGS_PER_FILE:
            log.warning("skipped malformed row: %s", error.one_line())

    def summarize(self) -> int:
        """Log one summary line if some warnings were held back; the count."""
        if self.count > WARNINGS_PER_FILE:
            log.warning("%s: skipped %d malformed rows in all", self.source, self.count)
        return self.count
