"""Settings: every key has a default; unknown keys, wrong types, bad values and
broken files are one-line SettingsErrors naming the file and the key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from yarn_adapt.errors import SettingsError
from yarn_adapt.service.settings import (
    SECTIONS,
    Mode,
    Settings,
    field_defaults,
    load_settings,
    write_token,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "conf" / "yarn-adapt.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(text)
    return path


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, ""))
    assert settings.service.mode is Mode.RECOMMEND
    assert settings.service.interval_s == 120.0
    assert settings.http.host == "127.0.0.1"
    assert settings.source.endswith("yarn-adapt.toml")


def test_values_are_read_into_their_types(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[service]\nmode = "enforce"\ninterval_s = 30\n'
        '[yarn]\nrm = ["http://a:8088", "http://b:8088"]\n'
        '[scheduler]\nrefresh_command = ["sudo", "yarn", "rmadmin", "-refreshQueues"]\n',
    )
    settings = load_settings(path)
    assert settings.service.mode is Mode.ENFORCE
    assert settings.service.interval_s == 30.0 and isinstance(settings.service.interval_s, float)
    assert settings.yarn.rm == ("http://a:8088", "http://b:8088")
    assert settings.scheduler.refresh_command[0] == "sudo"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[service]\nmdoe = 'observe'\n", r"yarn-adapt\.toml: unknown setting \[service\] mdoe"),
        ("[servce]\n", r"unknown table \[servce\]"),
        ("[service]\nmode = 'auto'\n", r"\[service\] mode: expected one of observe, recommend"),
        ("[service]\ninterval_s = 'often'\n", r"\[service\] interval_s: expected a number"),
        ("[service]\ninterval_s = 0\n", r"\[service\] interval_s: 0\.0 must be positive"),
        ("[service]\nauto_approve = 1\n", r"\[service\] auto_approve: expected true or false"),
        ("[yarn]\nrm = 'http://a:8088'\n", r"\[yarn\] rm: expected a list of strings"),
        ("[yarn]\nretries = 1.5\n", r"\[yarn\] retries: expected an integer"),
        ("[scheduler]\nvia = 'ssh'\n", r"\[scheduler\] via: 'ssh' file or mutation"),
        ("[tuning]\nmin_improvement = 1.5\n", r"\[tuning\] min_improvement: 1\.5 in \[0, 1\)"),
        ("[http]\nport = 70000\n", r"\[http\] port: 70000 in 0\.\.65535"),
        (
            "[tuning]\nexecutor = 'threads'\n",
            r"\[tuning\] executor: --executor 'threads': expected 'serial', 'process'",
        ),
        ("[backoff]\ninitial_s = 60\nmax_s = 10\n", r"\[backoff\] max_s: 10\.0 >= initial_s"),
        ("service = 3\n", r"service must be a table"),
        ("[service\nmode = 1\n", r"yarn-adapt\.toml: not valid TOML: .*line 1"),
    ],
)
def test_bad_settings_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message) as raised:
        load_settings(write(tmp_path, text))
    assert "\n" not in raised.value.one_line()


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"nope\.toml: no such settings file"):
        load_settings(tmp_path / "nope.toml")


def test_the_token_comes_from_the_environment_then_the_file_then_the_setting(
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file-0123456789\n")
    token_file.chmod(0o600)
    path = write(tmp_path, f'[http]\ntoken = "inline-0123456789"\ntoken_file = "{token_file}"\n')
    settings = load_settings(path)
    from_env = {"YARN_ADAPT_TOKEN": "from-env-0123456789"}
    assert write_token(settings, from_env) == "from-env-0123456789"
    assert write_token(settings, {}) == "from-file-0123456789"
    inline_only = load_settings(write(tmp_path, '[http]\ntoken = "inline-0123456789"\n'))
    assert write_token(inline_only, {}) == "inline-0123456789"
    assert write_token(load_settings(write(tmp_path, "")), {}) is None
    assert "inline" not in repr(inline_only)


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("\n")
    (tmp_path / "token").chmod(0o600)
    settings = load_settings(write(tmp_path, f'[http]\ntoken_file = "{tmp_path / "token"}"\n'))
    with pytest.raises(SettingsError, match=r"\[http\] token_file .*token: the file is empty"):
        write_token(settings, {})


def test_the_example_file_lists_every_setting_with_its_default() -> None:
    """conf/yarn-adapt.toml documents every key; uncommented, it equals the defaults."""
    text = EXAMPLE.read_text()
    setting = re.compile(r"^#(\w+ = .*)$")
    uncommented = "\n".join(setting.sub(r"\1", line) for line in text.splitlines())
    raw = tomllib.loads(uncommented)
    assert set(raw) == set(SECTIONS)
    for table, values in raw.items():
        defaults = field_defaults(table)
        assert set(values) == set(defaults), table
        for key, value in values.items():
            default = defaults[key]
            if table == "state" and key == "dir":
                assert str(value).endswith("yarn-adapt")  # the default follows $XDG_STATE_HOME
                continue
            expected = list(default) if isinstance(default, tuple) else default
            assert value == expected, f"[{table}] {key}"
    assert load_settings(EXAMPLE) == Settings(source=str(EXAMPLE))
