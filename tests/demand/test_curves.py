"""Curves files and arrival traces: round trip, and bad input as one line naming
the file and the row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from yarn_adapt.cli import main
from yarn_adapt.demand.curves import (
    CURVE_COLUMNS,
    curves_csv,
    load_arrivals,
    load_curves,
    parse_curves,
)
from yarn_adapt.demand.environment import synthetic_job_types
from yarn_adapt.errors import TraceError

HEADER = ",".join(CURVE_COLUMNS)


def good_rows() -> list[str]:
    return curves_csv(synthetic_job_types()).splitlines()


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "curves.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_synthetic_curves_round_trip(tmp_path: Path) -> None:
    types = load_curves(write(tmp_path, good_rows()))
    original = synthetic_job_types()
    assert set(types) == set(original)
    for kind, job_type in types.items():
        assert np.allclose(job_type.curve.estimate, original[kind].curve.estimate)
        assert job_type.load_p99 == original[kind].load_p99


def test_columns_in_any_order_and_extra_columns_are_fine() -> None:
    rows = [line.split(",") for line in good_rows()]
    reordered = [",".join([*reversed(r), "x"]) for r in rows]
    assert set(parse_curves("\n".join(reordered), "mem.csv")) == {"db0", "db1", "prs", "mlt"}


def _error(tmp_path: Path, lines: list[str]) -> str:
    with pytest.raises(TraceError) as caught:
        load_curves(write(tmp_path, lines))
    message = caught.value.one_line()
    assert "\n" not in str(caught.value)
    return message


def test_missing_columns(tmp_path: Path) -> None:
    header = HEADER.replace(",lipschitz", "").replace(",load_p99", "")
    message = _error(tmp_path, [header, "db0,0.1,0.5,0.4,0.6,20,23"])
    assert message.endswith("curves.csv:1: missing column(s) load_p99, lipschitz")


def test_a_nan_row(tmp_path: Path) -> None:
    lines = good_rows()
    lines[5] = lines[5].replace(lines[5].split(",")[2], "nan", 1)
    assert "curves.csv:6: performance is nan (must be a finite number)" in _error(tmp_path, lines)


def test_a_non_monotone_row(tmp_path: Path) -> None:
    lines = good_rows()
    cells = lines[30].split(",")
    cells[2] = cells[3] = cells[4] = "0.0"
    lines[30] = ",".join(cells)
    message = _error(tmp_path, lines)
    assert "curves.csv:31: db0: performance falls from" in message
    assert "must not decrease" in message


def test_an_unknown_job_type(tmp_path: Path) -> None:
    lines = [*good_rows(), "gpu,1.0,0.5,0.4,0.6,20,23,1"]
    message = _error(tmp_path, lines)
    assert f"curves.csv:{len(lines)}: unknown job type 'gpu' (known: db0, db1, prs, mlt)" in message


def test_a_missing_job_type(tmp_path: Path) -> None:
    lines = [line for line in good_rows() if not line.startswith("mlt")]
    assert "job type mlt needs two or more rows" in _error(tmp_path, lines)


def test_the_cli_prints_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, [HEADER, "db0,0.1,0.5,0.4,0.6,20,23,1", "db0,0.05,0.6,0.5,0.7,20,23,1"])
    assert main(["bench", "cilantro", "--quick", "--quiet", "--curves", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert f"yarn-adapt: {path}:3: db0: alloc_per_unit_load 0.05 does not increase" in lines[0]


def test_arrival_traces(tmp_path: Path) -> None:
    path = tmp_path / "arrivals.txt"
    path.write_text("10\n\n12.5\n11\n", encoding="utf-8")
    assert load_arrivals(path).tolist() == [10.0, 12.5, 11.0]
    path.write_text("10\n-3\n", encoding="utf-8")
    with pytest.raises(
        TraceError, match=r"arrivals.txt:2: an arrival rate must be finite and >= 0"
    ):
        load_arrivals(path)
    path.write_text("10\nabc\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r"arrivals.txt:2: not a number: 'abc'"):
        load_arrivals(path)
