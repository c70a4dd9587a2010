"""Performance-curve files for the Cilantro bench (``--curves FILE.csv``) and
query-arrival traces (one number per line, like the bundled twitter trace).

A curves file is CSV with a header naming at least the columns
``job_type,alloc_per_unit_load,performance,performance_lcb,performance_ucb,
load_p50,load_p99,lipschitz`` (any order, extra columns ignored), one row per grid
point. Within a job type the rows go up in ``alloc_per_unit_load``, and
``performance`` and its bounds never go down; ``lcb <= performance <= ucb``;
``load_p50``, ``load_p99`` and ``lipschitz`` are the same on every row of a type.
Job types are the prefixes of the §7.1 jobs (``db0``, ``db1``, ``mlt``, ``prs``),
and every one of them needs rows. A broken file raises
:class:`~yarn_adapt.errors.TraceError` naming the file and the row (``path:line``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from yarn_adapt.demand.environment import JOB_TYPES, JobType
from yarn_adapt.demand.learner import ProfiledCurve
from yarn_adapt.errors import TraceError
from yarn_adapt.workload._io import MalformedRows, read_all_text

CURVE_COLUMNS = (
    "job_type",
    "alloc_per_unit_load",
    "performance",
    "performance_lcb",
    "performance_ucb",
    "load_p50",
    "load_p99",
    "lipschitz",
)
_NUMBERS = CURVE_COLUMNS[1:]
_CONSTANT = ("load_p50", "load_p99", "lipschitz")


@dataclass
class _TypeRows:
    first_line: int
    points: list[tuple[float, float, float, float]] = field(default_factory=list)
    constants: tuple[float, float, float] | None = None


def load_curves(path: Path) -> dict[str, JobType]:
    """The job types of a curves file (see the module docstring)."""
    text = read_all_text(path, MalformedRows(str(path), lenient=False))
    return parse_curves(text, str(path))


def parse_curves(text: str, source: str) -> dict[str, JobType]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise TraceError(source, 1, "empty file: expected a header " + ",".join(CURVE_COLUMNS))
    columns = [name.strip() for name in header]
    missing = [name for name in CURVE_COLUMNS if name not in columns]
    if missing:
        raise TraceError(source, 1, f"missing column(s) {', '.join(missing)}")
    index = {name: columns.index(name) for name in CURVE_COLUMNS}
    rows: dict[str, _TypeRows] = {}
    for line, cells in enumerate(reader, start=2):
        if not cells or all(not c.strip() for c in cells):
            continue
        _add_row(rows, cells, index, source, line)
    return {kind: _job_type(kind, rows, source) for kind in JOB_TYPES}


def _add_row(
    rows: dict[str, _TypeRows], cells: list[str], index: Mapping[str, int], source: str, line: int
) -> None:
    if len(cells) <= max(index.values()):
        raise TraceError(source, line, f"{len(cells)} fields, expected {len(index)} or more")
    kind = cells[index["job_type"]].strip()
    if kind not in JOB_TYPES:
        raise TraceError(source, line, f"unknown job type {kind!r} (known: {', '.join(JOB_TYPES)})")
    values = {name: _number(cells[index[name]], name, source, line) for name in _NUMBERS}
    entry = rows.setdefault(kind, _TypeRows(line))
    constants = (values["load_p50"], values["load_p99"], values["lipschitz"])
    _check_constants(entry, constants, kind, source, line)
    point = (
        values["alloc_per_unit_load"],
        values["performance"],
        values["performance_lcb"],
        values["performance_ucb"],
    )
    _check_point(entry, point, kind, source, line)
    entry.points.append(point)


def _number(cell: str, name: str, source: str, line: int) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise TraceError(source, line, f"{name} is not a number: {cell.strip()!r}") from None
    if not math.isfinite(value):
        raise TraceError(source, line, f"{name} is {cell.strip()} (must be a finite number)")
    return value


def _check_constants(
    entry: _TypeRows, constants: tuple[float, float, float], kind: str, source: str, line: int
) -> None:
    p50, p99, lipschitz = constants
    if not (p50 > 0 and p99 >= p50 and lipschitz > 0):
        raise TraceError(
            source, line, f"{kind}: need 0 < load_p50 <= load_p99 and lipschitz > 0, got "
            f"{p50:g}, {p99:g}, {lipschitz:g}",
        )  # fmt: skip
    if entry.constants is not None and entry.constants != constants:
        raise TraceError(
            source, line, f"{kind}: load_p50/load_p99/lipschitz differ from the type's first row "
            f"(line {entry.first_line})",
        )  # fmt: skip
    entry.constants = constants


def _check_point(
    entry: _TypeRows, point: tuple[float, float, float, float], kind: str, source: str, line: int
) -> None:
    x, value, lower, upper = point
    if x < 0:
        raise TraceError(source, line, f"{kind}: alloc_per_unit_load {x:g} is negative")
    if not lower <= value <= upper:
        raise TraceError(
            source, line, f"{kind}: need performance_lcb <= performance <= performance_ucb, "
            f"got {lower:g}, {value:g}, {upper:g}",
        )  # fmt: skip
    if not entry.points:
        return
    px, pv, pl, pu = entry.points[-1]
    if x <= px:
        raise TraceError(
            source, line, f"{kind}: alloc_per_unit_load {x:g} does not increase (previous {px:g})"
        )
    for name, now, before in (("performance", value, pv), ("performance_lcb", lower, pl),
                              ("performance_ucb", upper, pu)):  # fmt: skip
        if now < before:
            raise TraceError(
                source, line, f"{kind}: {name} falls from {before:g} to {now:g}: "
                "a performance curve must not decrease",
            )  # fmt: skip


def _job_type(kind: str, rows: Mapping[str, _TypeRows], source: str) -> JobType:
    entry = rows.get(kind)
    if entry is None or len(entry.points) < 2 or entry.constants is None:
        raise TraceError(source, 0, f"job type {kind} needs two or more rows")
    grid, estimate, lower, upper = (np.array(column) for column in zip(*entry.points, strict=True))
    p50, p99, lipschitz = entry.constants
    return JobType(kind, ProfiledCurve(grid, estimate, lower, upper), p50, p99, lipschitz)


def curves_csv(types: Mapping[str, JobType]) -> str:
    """The curves of ``types`` as a curves file."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CURVE_COLUMNS)
    for kind, job_type in types.items():
        curve = job_type.curve
        for x, value, lower, upper in zip(
            curve.grid, curve.estimate, curve.lower, curve.upper, strict=True
        ):
            writer.writerow(
                [kind, *(repr(float(v)) for v in (x, value, lower, upper)),
                 job_type.load_p50, job_type.load_p99, job_type.lipschitz]
            )  # fmt: skip
    return out.getvalue()


# --------------------------------------------------------------------------- arrivals


def load_arrivals(path: Path, minimum: int = 2) -> NDArray[np.float64]:
    """An arrival-rate trace: one non-negative number per line (blank lines
    skipped), at least ``minimum`` of them."""
    text = read_all_text(path, MalformedRows(str(path), lenient=False))
    return parse_arrivals(text.splitlines(), str(path), minimum)


def parse_arrivals(lines: Iterable[str], source: str, minimum: int = 2) -> NDArray[np.float64]:
    values: list[float] = []
    for line_no, line in enumerate(lines, start=1):
        cell = line.strip()
        if not cell:
            continue
        try:
            value = float(cell)
        except ValueError:
            raise TraceError(source, line_no, f"not a number: {cell[:40]!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise TraceError(source, line_no, f"an arrival rate must be finite and >= 0: {cell}")
        values.append(value)
    if len(values) < minimum:
        raise TraceError(source, 0, f"{len(values)} value(s); need at least {minimum}")
    return np.array(values)
