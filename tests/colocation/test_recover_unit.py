"""The service's systemd unit puts back what the guard changed when the service stops:
``ExecStopPost=`` runs ``yarn-adapt recover`` with options the command has. Run as the
unit runs it (its environment: the RM from $HADOOP_CONF_DIR, the state directory from
$YARN_ADAPT_STATE_DIR), it does nothing and succeeds when nothing is journalled -- the
RM down or not -- and fails in one line, naming the node, when a node it must put
back cannot be reached. (Putting a node back on a real RM: test_guard_live.)"""

from __future__ import annotations

import configparser
import shlex
import time
from pathlib import Path

import click
import pytest

from yarn_adapt.cli import cli, main
from yarn_adapt.colocation.originals import OriginalTotals
from yarn_adapt.model import Resources

UNIT = Path(__file__).resolve().parents[2] / "conf" / "yarn-adapt.service"
DEAD_RM = "127.0.0.1:1"  # nothing listens there

NOTHING = "nothing to recover: no interrupted applies, no node or queue the guard changed\n"


def _service_section() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(UNIT)
    return unit["Service"]


def _stop_post_argv() -> list[str]:
    command = shlex.split(_service_section()["ExecStopPost"])
    assert command[0] == "/usr/local/bin/yarn-adapt", command
    return command[1:]


def test_the_unit_recovers_after_every_stop_with_options_recover_has() -> None:
    service = _service_section()
    argv = _stop_post_argv()
    assert argv[0] == "recover"
    command = cli.commands["recover"]
    known = {flag for param in command.params if isinstance(param, click.Option)
             for flag in param.opts}  # fmt: skip
    given = [word for word in argv[1:] if word.startswith("-")]
    assert given and set(given) <= known, (given, sorted(known))
    environment = [line for line in UNIT.read_text().splitlines() if line.startswith("Env")]
    assert "Environment=YARN_ADAPT_STATE_DIR=/var/lib/yarn-adapt" in environment  # recover's
    assert "Environment=HADOOP_CONF_DIR=/etc/hadoop/conf" in environment  # --state-dir, --rm
    assert not service["ExecStopPost"].startswith("-")  # a node left changed fails the stop


@pytest.fixture
def unit_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The unit's environment, with an RM that is down."""
    conf = tmp_path / "hadoop-conf"
    conf.mkdir()
    (conf / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.resourcemanager.webapp.address</name>"
        f"<value>{DEAD_RM}</value></property></configuration>"
    )
    state = tmp_path / "state"
    state.mkdir(mode=0o750)
    for variable in ("YARN_CONF_DIR", "YARN_ADAPT_RM"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.setenv("YARN_ADAPT_STATE_DIR", str(state))
    return state


def test_with_nothing_journalled_it_succeeds_quietly_though_the_rm_is_down(
    unit_environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    assert main(_stop_post_argv()) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (NOTHING, "")
    assert time.monotonic() - began < 30


def test_with_nothing_journalled_it_needs_no_rm_address_at_all(
    unit_environment: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(unit_environment / "no-such-conf"))
    assert main(_stop_post_argv()) == 0  # was exit 2: the RM address was resolved first
    assert capsys.readouterr() == (NOTHING, "")


def test_a_node_it_cannot_put_back_fails_the_stop_in_one_line(
    unit_environment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = OriginalTotals(unit_environment / "guard")
    journal.intend("worker-1:8041", Resources(4096, 4), Resources(1024, 1))
    journal.confirmed("worker-1:8041", Resources(1024, 1))
    assert main(_stop_post_argv()) == 5
    out, err = capsys.readouterr()
    assert "node worker-1:8041: failed: cannot read the node" in out
    assert err.count("\n") == 1 and "worker-1:8041" in err and "the operator must act" in err
    assert journal.load() != {}  # kept: a later recover (or the next start) puts it back
