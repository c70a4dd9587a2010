"""The command line's conventions (docs/CLI.md), checked on every command the
``yarn-adapt`` group has, including commands added later; and the behaviours they
promise: --version, --json where output is data, host:port for --rm, exit 3 when the
RM is unreachable, --sim refusing --rm, progress on stderr and --quiet, and every
bench's ``--set`` read by the one parser before anything runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

import click
import pytest

from tests.service.factories import demo_file
from yarn_adapt import bench
from yarn_adapt.cli import cli, main
from yarn_adapt.cli.common import quiet_option
from yarn_adapt.cli.conventions import violations, walk
from yarn_adapt.progress import Progress
from yarn_adapt.set_keys import SetSpec
from yarn_adapt.testbed import options as tb_options
from yarn_adapt.testbed import run as testbed_run
from yarn_adapt.yarn.http import _parse_base_url


def test_every_command_follows_the_conventions() -> None:
    assert [path for path, _ in walk(cli)], "the walk found no command"
    assert violations(cli) == []


def test_the_check_catches_each_kind_of_breach() -> None:
    @click.group()
    def root() -> None: ...

    @root.command("report")
    @click.option("--config", metavar="XML", help="a scheduler file")
    @click.option("--window", type=float, help="the last N minutes")
    @click.option("--timeout-ms", type=int, metavar="SECONDS")
    @click.option("--min-improvement", type=float, default=0.02, metavar="FRACTION")
    def report(**_: object) -> None: ...

    @root.command("bench")
    @click.option("--json", is_flag=True)
    def bench(**_: object) -> None: ...

    found = "\n".join(violations(root))
    assert "yarn-adapt: no --version" in found
    assert "report: prints data but has no --json" in found
    assert "report --config: metavar 'XML'" in found
    assert "report --window: a time, so its metavar must be SECONDS" in found
    assert "report --window: help speaks of a unit other than seconds" in found
    assert "report --timeout-ms: a unit other than seconds in the name" in found
    assert "report --min-improvement: default 0.02, expected 0.05" in found
    assert "bench: long work without --quiet" in found

    @root.command("sleepy")
    @click.option("--json", is_flag=True)
    @quiet_option
    def sleepy(**_: object) -> None: ...

    assert not [line for line in violations(root) if line.startswith("sleepy")]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("yarn-adapt, version ")


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("rm.example.com:8088", "http://rm.example.com:8088"),
        ("127.0.0.1:8088", "http://127.0.0.1:8088"),
        ("https://rm:8090/", "https://rm:8090"),
    ],
)
def test_rm_accepts_host_port_as_yarn_site_writes_it(given: str, base: str) -> None:
    assert _parse_base_url(given) == base


def test_serve_once_exits_3_when_the_rm_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "yarn-adapt.toml"
    settings.write_text(
        f'[yarn]\nrm = ["127.0.0.1:9"]\ntimeout_s = 2\nretries = 0\n'
        f'[scheduler]\nfile = "{demo_file()}"\n[state]\ndir = "{tmp_path / "state"}"\n'
        '[tuning]\nexecutor = "serial"\n'
    )
    assert main(["serve", "--config", str(settings), "--once"]) == 3
    captured = capsys.readouterr()
    round_ = json.loads(captured.out.strip().splitlines()[-1])
    assert round_["decisions"][0]["kind"] == "rm-unavailable"
    assert captured.err.startswith("yarn-adapt: the RM is unreachable")


def test_propose_sim_refuses_an_rm(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["propose", "--sim", "--rm", "http://rm:8088"]) == 2
    assert "--sim proposes for a simulated cluster: drop --rm" in capsys.readouterr().err


def test_config_diff_and_validate_speak_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new.xml"
    new.write_text(demo_file().read_text().replace("<value>50</value>", "<value>60</value>", 1)
                   .replace("<value>50</value>", "<value>40</value>", 1))  # fmt: skip
    assert main(["config", "diff", str(demo_file()), str(new), "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)
    assert {(c["queue"], c["property"], c["old"], c["new"]) for c in changes} == {
        ("root.q1", "capacity", "50", "60"),
        ("root.q2", "capacity", "50", "40"),
    }
    assert main(["config", "validate", str(new), "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["valid"] and checked["queues"] == 3 and checked["scheduler"] == "capacity"


def test_progress_lines_count_time_and_eta_and_quiet_silences_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = [100.0]
    progress = Progress("demo round", 4, clock=lambda: now[0])
    assert progress.advance(0) == "yarn-adapt: demo round 0/4 · 0 s elapsed"
    now[0] = 112.0
    assert progress.advance(1) == "yarn-adapt: demo round 1/4 · 12 s elapsed · ETA 36 s"
    now[0] = 112.5
    assert progress.advance(2) is None  # at most a line a second
    now[0] = 172.0
    assert progress.advance(4) == "yarn-adapt: demo round 4/4 · 1 m 12 s elapsed"
    assert "demo round 1/4" in capsys.readouterr().err

    @click.command()
    @quiet_option
    def work() -> None:
        Progress("step", 2).advance(1)

    work.main(["--quiet"], standalone_mode=False)
    assert capsys.readouterr().err == ""
    assert main(["bench", "--list", "--json"]) == 0  # the group turns progress back on
    assert Progress("step", 2).advance(1) is not None


# --------------------------------------------------------------------------- --set


BAD_VALUE = "?"  # no kind but free text takes it


def _typed_keys(spec: SetSpec) -> list[str]:
    """The keys that refuse ``BAD_VALUE`` (every key but free text)."""
    refused = []
    for key in spec.keys:
        try:
            key.parse(BAD_VALUE)
        except ValueError:
            refused.append(key.name)
    return refused


def _refused(args: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str | None:
    """None when ``args`` exit 2 with one line naming ``words``; else what happened."""
    code = main(args)
    err = capsys.readouterr().err
    if code == 2 and err.count("\n") == 1 and all(w in err for w in words):
        return None
    return f"{' '.join(args)}: exit {code}, {err!r}"


def test_every_bench_refuses_an_unknown_or_badly_typed_set_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one ``--set`` parser's promise, for every registered bench and the
    testbed: an unknown key or a value not of its key's kind exits 2 with one line
    naming the key, and nothing has run."""

    def must_not_run(*_: object, **__: object) -> NoReturn:
        raise AssertionError("the bench ran despite a wrong --set")

    problems: list[str] = []
    for found in bench.available():
        monkeypatch.setitem(bench._REGISTRY, found.name, replace(found, run=must_not_run))
        command = ["bench", found.name, "--quiet", "--set"]
        problems.append(_refused([*command, "no_such_key=1"], capsys, "unknown --set no_such_key"))
        typed = _typed_keys(found.settings())
        if not typed:
            problems.append(f"{found.name}: no typed --set key")
        for name in typed:
            value = f"{name}={BAD_VALUE}"
            problems.append(_refused([*command, value], capsys, f"--set {value}: expected"))
    monkeypatch.setattr(testbed_run, "run_on_new_cluster", must_not_run)
    testbed = ["testbed", "--quiet", "--set"]
    problems.append(_refused([*testbed, "no_such_key=1"], capsys, "unknown --set no_such_key"))
    for name in _typed_keys(tb_options.SET_KEYS):
        value = f"{name}={BAD_VALUE}"
        problems.append(_refused([*testbed, value], capsys, f"--set {value}: expected"))
    assert [p for p in problems if p is not None] == []
