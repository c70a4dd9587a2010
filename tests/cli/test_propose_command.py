"""``yarn-adapt propose``: on a simulated cluster (``--sim``) and against the real mini
YARN, whose RM must accept what it proposes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yarn_adapt.cli import main
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import CapacitySchedulerConfig
from yarn_adapt.service.demo.replay import demo_scheduler_file
from yarn_adapt.yarn.apply import mismatches
from yarn_adapt.yarn.confxml import read_scheduler_document, validate
from yarn_adapt.yarn.rm import ResourceManagerClient


def last_json(text: str) -> dict[str, object]:
    parsed: dict[str, object] = json.loads(text.strip().splitlines()[-1])
    return parsed


BUSY_AT = "6300"  # 27 jobs in progress in the replay (at 900 s: 2)


def test_sim_proposes_a_valid_patch_of_the_running_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "proposed.xml"
    assert main(["propose", "--sim", "--at", BUSY_AT, "--out", str(out), "--json"]) == 0
    reply = last_json(capsys.readouterr().out)
    before, after = reply["predicted_latency_before_s"], reply["predicted_latency_after_s"]
    assert isinstance(before, float) and isinstance(after, float) and after < before
    changes = reply["changes"]
    assert isinstance(changes, list) and changes and all(c["reason"] for c in changes)
    running = read_scheduler_document(demo_scheduler_file("capacity")).config
    proposed = read_scheduler_document(out).config
    assert validate(proposed, running) == []
    assert proposed != running
    assert reply["out"] == str(out)


def test_sim_text_shows_predictions_diff_and_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    # early in the replay (2 jobs in progress, a move allowed on 2): a short search
    assert main(["propose", "--sim", "--at", "900", "--min-jobs", "2"]) == 0
    text = capsys.readouterr().out
    assert "Predicted mean job latency" in text
    assert "Proposed changes:" in text and "Why:" in text
    assert "Task times:" in text
    assert "Likely range of each prediction (80 %, a wide prior" in text


def test_a_group_resting_on_too_few_jobs_keeps_its_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As the service does (issue 29, item 8): 2 jobs are no evidence for a move."""
    assert main(["propose", "--sim", "--at", "900", "--json"]) == 0
    reply = last_json(capsys.readouterr().out)
    assert reply["changes"] == []
    [group] = reply["groups"]  # type: ignore[misc]
    assert group["jobs"] == 2
    assert "rests on 2 job(s), fewer than the 3 a move needs: kept" in group["reason"]
    low, high = group["predicted_latency_after_low_s"], group["predicted_latency_after_high_s"]
    assert low < group["predicted_latency_after_s"] < high and high / low > 2
    assert main(["propose", "--sim", "--at", "900", "--min-jobs", "2", "--json"]) == 0
    assert last_json(capsys.readouterr().out)["changes"]


def test_sim_on_a_fair_file_when_nothing_runs_proposes_no_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is triggered between the trace's bursts: the file is written unchanged."""
    fair = demo_scheduler_file("fair")
    out = tmp_path / "fair.xml"
    args = ["propose", "--sim", "--scheduler-file", str(fair), "--at", "1800", "--out", str(out)]
    assert main(args) == 0
    assert "No change proposed." in capsys.readouterr().out
    assert read_scheduler_document(out).config == read_scheduler_document(fair).config


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--sim", "--at", "0"], "--at, --nodes and --containers-per-node must be positive"),
        (["--sim", "--interval", "-5"], "--interval must be positive"),
        (["--sim", "--min-improvement", "2"], "--min-improvement must be in [0, 1)"),
        (["--sim", "--executor", "threads"], "--executor 'threads': expected 'serial'"),
        (
            ["--rm", "http://127.0.0.1:9", "--mutation", "--scheduler-file", "pyproject.toml"],
            "--mutation and --scheduler-file exclude each other",
        ),
    ],
)
def test_bad_options_are_one_line_errors(
    args: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["propose", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("yarn-adapt: ") and complaint in err and "\n" not in err


def test_an_unreachable_rm_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "never.xml"
    running = str(demo_scheduler_file("capacity"))
    args = ["propose", "--rm", "http://127.0.0.1:9", "--retries", "0", "--timeout", "2"]
    assert main([*args, "--scheduler-file", running, "--out", str(out)]) == 3
    err = capsys.readouterr().err.strip()
    assert "127.0.0.1:9" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.yarn
def test_rm_proposal_is_accepted_by_the_real_rm(
    capacity_cluster: MiniCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Queue a (30 %) gets more applications than its share runs at once: the tuner
    proposes more for it, and the RM takes the written file on refreshQueues."""
    apps = [capacity_cluster.submit_sleep_app("a", containers=2, sleep_s=20) for _ in range(4)]
    for app in apps:
        app.application_id()
    out = tmp_path / "capacity-scheduler.xml"
    args = [
        "propose", "--rm", capacity_cluster.rm_url, "--history", capacity_cluster.jhs_url,
        "--scheduler-file", str(capacity_cluster.scheduler_xml_path), "--out", str(out), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    reply = last_json(capsys.readouterr().out)
    changes = reply["changes"]
    assert isinstance(changes, list) and any(c["queue"] == "root.a" for c in changes), reply
    proposed = read_scheduler_document(out).config
    assert isinstance(proposed, CapacitySchedulerConfig)

    capacity_cluster.write_scheduler_xml(out.read_text())
    done = capacity_cluster.refresh_queues()
    assert done.returncode == 0, done.stderr
    with ResourceManagerClient(capacity_cluster.rm_url) as rm:
        assert mismatches(proposed, rm.scheduler()) == []


@pytest.mark.yarn
def test_mutation_store_proposal_reads_scheduler_conf_and_is_valid_there(
    capacity_memory_cluster: MiniCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "proposed.xml"
    args = ["propose", "--rm", capacity_memory_cluster.rm_url, "--mutation", "--out", str(out)]
    assert main(args) == 0
    assert "Predicted mean job latency" in capsys.readouterr().out
    proposed = read_scheduler_document(out).config
    with ResourceManagerClient(capacity_memory_cluster.rm_url) as rm:
        assert mismatches(proposed, rm.scheduler()) == []
