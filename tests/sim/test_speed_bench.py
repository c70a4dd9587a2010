"""``bench sim-speed``'s datacenter-sized day: the trace's jobs repeated with fresh
ids, interleaved over the same day, and the figures it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sim.factories import job, workload
from yarn_adapt.cli import main
from yarn_adapt.errors import SettingsError
from yarn_adapt.sim.bench import replicate_workload

FIRST50 = "FB-2009_samples_24_times_1hr_0_first50jobs.tsv"


def test_copies_get_fresh_ids_share_their_tasks_and_interleave() -> None:
    jobs = workload(*(job(f"j{i}", "a", maps=3, submit=100.0 * i) for i in range(5)))
    copies = replicate_workload(jobs, 4)
    assert len(copies) == 20
    assert len({j.id for j in copies.jobs}) == 20
    assert [j.id for j in copies.jobs[:4]] == ["j0", "j0~1", "j0~2", "j0~3"]
    assert [j.submit_s for j in copies.jobs[:4]] == [0.0, 25.0, 50.0, 75.0]
    assert copies.jobs[-1].submit_s < 500.0  # the same day, not four days
    by_id = {j.id: j for j in copies.jobs}
    assert by_id["j3~2"].tasks is by_id["j3"].tasks
    assert replicate_workload(jobs, 1) is jobs


@pytest.mark.parametrize("copies", [0, 3_000_000])
def test_impossible_replication_is_a_settings_error(copies: int) -> None:
    jobs = workload(*(job(f"j{i}", "a") for i in range(5)))
    with pytest.raises(SettingsError, match="replicate"):
        replicate_workload(jobs, copies)


def test_the_bench_reports_rss_cpu_and_replication(capsys: pytest.CaptureFixture[str]) -> None:
    trace = Path(__file__).parent.parent / "fixtures" / "workload" / FIRST50
    args = ["bench", "sim-speed", "--trace", str(trace), "--set", "nodes=4", "--set", "replicate=2"]
    assert main(args) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["replicate"] == 2 and figures["jobs"] == figures["finished"] == 100
    assert figures["peak_rss_mb"] > 0 and figures["cpu_s"] > 0 and figures["events"] > 0
    assert figures["engine"] in {"python", "native"}


@pytest.mark.parametrize("setting", ["replicate=0", "replicate=two", "replicat=30"])
def test_bad_replicate_values_are_one_line_errors(
    setting: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "sim-speed", "--quick", "--quiet", "--set", setting]) == 2
    err = capsys.readouterr().err
    assert setting.split("=")[0] in err and err.count("\n") == 1
