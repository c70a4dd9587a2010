"""`yarn-adapt serve` and `demo` as an operator runs them: bad settings end in one
line and exit code 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from yarn_adapt.cli import main


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[service\n", "not valid TOML"),
        ("[service]\nmode = 'sometimes'\n", "[service] mode: expected one of observe"),
        ("[tuning]\ncooldown = 60\n", "unknown setting [tuning] cooldown"),
        ("[http]\nport = -1\n", "[http] port: -1 in 0..65535"),
    ],
)
def test_serve_refuses_bad_settings_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(text)
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"yarn-adapt: {config}: ")
    assert message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "state").exists()


def test_serve_names_a_missing_settings_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--config", str(tmp_path / "absent.toml")]) == 2
    assert "absent.toml: no such settings file" in capsys.readouterr().err


def test_demo_refuses_nonsense_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--once", "--nodes", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err
