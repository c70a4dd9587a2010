"""``yarn-adapt bench sim-fidelity`` as a command: registered, and one-line errors
when its input or the cluster is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from yarn_adapt import bench
from yarn_adapt.cli import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_bench_is_registered() -> None:
    assert "sim-fidelity" in {b.name for b in bench.available()}


def test_a_cluster_that_cannot_start_is_one_line_from_the_error_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-pom.xml"
    monkeypatch.setenv("YARN_ADAPT_HADOOP_POM", str(missing))
    code, out, err = run(["bench", "sim-fidelity", "--quick", "--quiet"], capsys)
    assert code == 3  # YarnError: the mini cluster is a YARN edge
    assert err.count("\n") == 1
    assert err.startswith("yarn-adapt: ") and str(missing) in err
    assert out == ""


def test_a_broken_trace_is_refused_before_any_cluster_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "jobs.tsv"
    trace.write_text("job0\t0\t0\t10\tnot-a-number\t5\n")
    code, _, err = run(["bench", "sim-fidelity", "--quiet", "--trace", str(trace)], capsys)
    assert code == 2
    assert err.startswith(f"yarn-adapt: {trace}:1:")
    assert err.count("\n") == 1
