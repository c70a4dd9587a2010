"""``yarn-adapt sim`` and ``bench sim-speed`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yarn_adapt.cli import main
from yarn_adapt.workload.bundled import bundled_trace

DEMO = Path(__file__).resolve().parents[2] / "yarn_adapt" / "data" / "demo"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("config", ["capacity-scheduler.xml", "fair-scheduler.xml"])
def test_sim_prints_latency_per_queue(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        [
            "sim",
            "--scheduler-file",
            str(DEMO / config),
            "--nodes",
            "10",
            "--until",
            "3600",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    summary = json.loads(out)
    assert set(summary["queues"]) == {"root.q1", "root.q2"}
    assert (
        summary["all"]["jobs"]
        == summary["queues"]["root.q1"]["jobs"] + summary["queues"]["root.q2"]["jobs"]
    )
    assert 0 < summary["all"]["mean_latency_s"] < 3600


def test_a_smaller_cluster_waits_longer(capsys: pytest.CaptureFixture[str]) -> None:
    common = [
        "sim",
        "--scheduler-file",
        str(DEMO / "capacity-scheduler.xml"),
        "--until",
        "7200",
        "--json",
    ]
    _, big, _ = run([*common, "--nodes", "50"], capsys)
    _, small, _ = run([*common, "--nodes", "1", "--containers-per-node", "4"], capsys)
    assert json.loads(small)["all"]["mean_wait_s"] > json.loads(big)["all"]["mean_wait_s"]


def test_a_broken_trace_row_is_named_and_lenient_skips_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = bundled_trace().read_text().splitlines()[:30]
    lines[6] = "job6\t12\tseven\t100\t100\t100"
    broken = tmp_path / "broken.tsv"
    broken.write_text("\n".join(lines) + "\n")
    args = [
        "sim",
        "--trace",
        str(broken),
        "--scheduler-file",
        str(DEMO / "capacity-scheduler.xml"),
        "--nodes",
        "5",
        "--json",
    ]

    code, out, err = run(args, capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"yarn-adapt: {broken}:7:") and err.count("\n") == 1

    code, out, _ = run([*args, "--lenient"], capsys)
    assert code == 0
    assert json.loads(out)["skipped_rows"] == 1 and json.loads(out)["jobs"] == 29


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "0"], "--nodes and --containers-per-node must be positive"),
        (["--queues", "2-5"], "bad queue mapping item '2-5'"),
    ],
)
def test_bad_options_are_one_line_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = str(DEMO / "capacity-scheduler.xml")
    code, _, err = run(["sim", "--scheduler-file", demo, *args], capsys)
    assert code == 2
    assert message in err and err.count("\n") == 1


def test_bench_sim_speed_quick_ends_with_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["bench", "sim-speed", "--quick", "--set", "nodes=50"], capsys)
    assert code == 0
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["bench"] == "sim-speed" and figures["nodes"] == 50
    assert figures["jobs"] == figures["finished"] > 0
    assert figures["wall_s"] > 0 and figures["events_per_s"] > 0
