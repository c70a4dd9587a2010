"""The command line's edges an operator meets first (issue 29, item 8): one test each.

``propose``'s evidence gate and range, and ``agent discover``, have their own tests
(test_propose_command.py, test_agent_discover.py)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tracing.conftest import start_server
from yarn_adapt.cli import cli, main
from yarn_adapt.colocation.mirror import DynamicResourcesMirror
from yarn_adapt.colocation.originals import OriginalTotals
from yarn_adapt.minicluster.redis_server import RedisServer
from yarn_adapt.model import Resources
from yarn_adapt.yarn.apply import ApplySettings, ApplyStep, JournalEntry

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "yarn_adapt" / "data" / "demo"
DEAD_RM = "127.0.0.1:1"  # nothing listens there


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------- sim


def test_sim_help_names_its_options_not_placeholders(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["sim", "--help"], capsys)
    assert code == 0
    assert "TRACE under CONFIG" not in out
    assert "--trace" in out and "--scheduler-file" in out.split("Options:")[0]


def test_sim_on_a_file_that_is_no_trace_says_what_a_trace_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    readme = ROOT / "README.md"
    code, _, err = run(
        ["sim", "--scheduler-file", str(DEMO / "capacity-scheduler.xml"), "--trace", str(readme)],
        capsys,
    )
    assert code == 2 and err.count("\n") == 1
    assert "fmt=" not in err  # no such option
    assert err.startswith(f"yarn-adapt: {readme}:") and "SWIM .tsv" in err


@pytest.mark.parametrize("until", ["-5", "0"])
def test_sim_refuses_an_until_that_keeps_no_job(
    until: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["sim", "--scheduler-file", str(DEMO / "capacity-scheduler.xml"), "--until", until],
        capsys,
    )
    assert code == 2 and out == ""
    assert "--until must be a positive number of seconds" in err


# --------------------------------------------------------------------------- seeds


def test_every_seed_defaults_to_zero() -> None:
    from yarn_adapt.cli.conventions import walk

    for path, command in walk(cli):
        for option in command.params:
            if "--seed" in getattr(option, "opts", ()):
                assert option.default == 0, path


# --------------------------------------------------------------------------- recover


@pytest.fixture
def left_behind(tmp_path: Path) -> Path:
    """A state directory holding an apply stopped after its write and a node the
    guard lowered."""
    state = tmp_path / "state"
    journal = ApplySettings(state_dir=state).default_journal()
    for step in (ApplyStep.PLANNED, ApplyStep.BACKED_UP, ApplyStep.WRITTEN):
        journal.record(
            JournalEntry("a1b2c3", step, "file+RefreshCommand", str(tmp_path / "cs.xml"))
        )
    originals = OriginalTotals(state / "guard")
    originals.intend("worker-1:8041", Resources(4096, 4), Resources(1024, 1))
    originals.confirmed("worker-1:8041", Resources(1024, 1))
    return state


def test_recover_dry_run_lists_what_is_left_and_reaches_no_rm(
    left_behind: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["recover", "--state-dir", str(left_behind), "--rm", DEAD_RM, "--dry-run"]
    code, out, err = run(common, capsys)
    assert code == 0 and err == ""
    assert "apply a1b2c3:" in out and "stopped after written" in out
    assert "node worker-1:8041: the guard changed its total" in out
    assert out.rstrip().endswith("dry run: nothing was changed")
    code, out, _ = run([*common, "--json"], capsys)
    found = json.loads(out)
    assert code == 0 and found["dry_run"] is True
    assert [a["apply_id"] for a in found["interrupted_applies"]] == ["a1b2c3"]
    assert found["interrupted_applies"][0]["last_step"] == "written"
    assert found["guard_nodes"] == ["worker-1:8041"] and found["recovered"] == []
    assert OriginalTotals(left_behind / "guard").load()  # nothing was changed


def test_recover_json_with_nothing_to_do_needs_no_rm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["recover", "--state-dir", str(tmp_path / "empty"), "--rm", DEAD_RM, "--json"], capsys
    )
    assert code == 0 and err == ""
    found = json.loads(out)
    assert found["interrupted_applies"] == [] and found["guard_nodes"] == []
    assert found["operator_must_act"] == []


def test_recover_json_says_what_the_operator_must_do(
    left_behind: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        ["recover", "--state-dir", str(left_behind), "--rm", DEAD_RM, "--json", "--retries", "0",
         "--timeout", "2"],
        capsys,
    )  # fmt: skip
    found = json.loads(out)  # the JSON, though the RM is down
    assert code in (3, 5) and err.count("\n") == 1
    assert found["dry_run"] is False and found["guard_nodes"] == ["worker-1:8041"]


def test_recover_puts_back_the_file_the_guard_mirrored_into(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, path = tmp_path / "state", tmp_path / "dynamic-resources.xml"
    mirror = DynamicResourcesMirror(path, state / "guard", refresh=["true"])  # no RM re-reads
    assert mirror.sync({"worker-1:8041": Resources(1024, 1)}) and path.exists()
    common = ["recover", "--state-dir", str(state), "--rm", DEAD_RM]
    code, out, _ = run([*common, "--dry-run", "--json"], capsys)
    assert code == 0 and json.loads(out)["guard_mirror"] == str(path)
    code, out, err = run(common, capsys)  # no node held: the RM is not asked
    assert code == 0, err
    assert f"file {path}: the operator's file is back" in out
    assert not path.exists()  # there was none before the guard's


# --------------------------------------------------------------------------- trace


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server: RedisServer = start_server(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.kill()


def test_an_unknown_trace_is_named_as_the_operator_typed_it(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "yarn-adapt.toml"
    settings.write_text(
        f'[tracing]\nredis_url = "{redis_url}"\nprefix = "t{uuid.uuid4().hex[:8]}"\n'
    )
    code, _, err = run(["trace", "--config", str(settings), "critical-path", "nosuch"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "'nosuch'" in err
    from tracing.importers.common import external_trace_id

    assert external_trace_id("nosuch") not in err  # the hash means nothing to a person


def test_trace_risk_says_its_window_in_words(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.tracing.conftest import SAMPLES

    settings = tmp_path / "yarn-adapt.toml"
    settings.write_text(
        f'[tracing]\nredis_url = "{redis_url}"\nprefix = "t{uuid.uuid4().hex[:8]}"\n'
    )
    base = ["trace", "--config", str(settings)]
    assert run([*base, "import", str(SAMPLES / "otlp.json")], capsys)[0] == 0
    code, out, _ = run([*base, "risk", "--window", "100000000"], capsys)
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("window 1,157 d 9 h ending 20"), first
    assert "1e+08" not in out and "epoch" not in first
