"""Settings: every key has a default; unknown keys, wrong types, bad values and
broken files are one-line SettingsErrors naming the file and the key."""

from __future__ import annotations

import os
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
    redis_password,
    write_token,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "conf" / "yarn-adapt.toml"


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


def secret_file(tmp_path: Path, text: str, mode: int = 0o600, name: str = "secret") -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
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
        ("[tracing]\ndead_letter_entries = 0\n", r"\[tracing\] dead_letter_entries: 0 >= 1"),
        ("[tracing]\nmax_clock_ahead_s = -1\n", r"\[tracing\] max_clock_ahead_s: -1\.0 0 or more"),
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


# --------------------------------------------------------------------------- the guard


def test_the_guard_never_empties_a_node_by_default() -> None:
    guard = Settings().colocation
    assert guard.min_visible_fraction > 0 and guard.min_raw_risk > 0


@pytest.mark.parametrize(
    "table",
    ['mode = "auto"\nmin_visible_fraction = 0.0\n',
     'enabled = true\nmode = "auto"\nmin_visible_fraction = 0\n'],
)  # fmt: skip
def test_auto_without_a_floor_is_refused_naming_the_key_and_the_fix(
    tmp_path: Path, table: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(write(tmp_path, f"[colocation]\n{table}"))
    message = raised.value.one_line()
    assert "[colocation] min_visible_fraction: 0.0 empties the riskiest node" in message
    assert "set it above 0 (the default is 0.25)" in message and "\n" not in message
    recommending = load_settings(write(tmp_path, "[colocation]\nmin_visible_fraction = 0.0\n"))
    assert recommending.colocation.min_visible_fraction == 0.0  # recommend changes nothing


def test_the_raw_risk_gate_is_a_number_at_least_zero(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"\[colocation\] min_raw_risk: -0\.1 must be"):
        load_settings(write(tmp_path, "[colocation]\nmin_raw_risk = -0.1\n"))
    mirror_without_refresh = (
        '[colocation]\ndynamic_resources_file = "/etc/hadoop/dynamic-resources.xml"\n'
        "refresh_nodes_resources_command = []\n"
    )
    with pytest.raises(SettingsError, match=r"refresh_nodes_resources_command: .* is empty"):
        load_settings(write(tmp_path, mirror_without_refresh))


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize(
    ("table", "instead", "variable"),
    [
        ('[http]\ntoken = "inline-0123456789"\n', "[http] token_file", "$YARN_ADAPT_TOKEN"),
        ('[tracing]\nredis_password = "inline-secret"\n', "[tracing] redis_password_file",
         "$YARN_ADAPT_REDIS_PASSWORD"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_an_inline_secret_in_a_settings_file_others_may_read_is_refused(
    tmp_path: Path, table: str, instead: str, variable: str, mode: int
) -> None:
    path = write(tmp_path, table, mode)
    with pytest.raises(SettingsError) as raised:
        load_settings(path)
    message = raised.value.one_line()
    assert f"mode {mode:04o}" in message and f"move it to {instead}" in message
    assert variable in message and f"chmod 600 {path}" in message
    assert "inline-" not in message and "\n" not in message
    path.chmod(0o600)
    assert load_settings(path).source == str(path)


def test_environment_secrets_and_secret_files_need_no_private_settings_file(
    tmp_path: Path,
) -> None:
    token = secret_file(tmp_path, "from-file-0123456789\n", name="token")
    password = secret_file(tmp_path, "from-file\n", name="redis")
    text = f'[http]\ntoken_file = "{token}"\n[tracing]\nredis_password_file = "{password}"\n'
    settings = load_settings(write(tmp_path, text, 0o644))
    assert write_token(settings, {}) == "from-file-0123456789"
    assert redis_password(settings, {}) == "from-file"
    assert write_token(settings, {"YARN_ADAPT_TOKEN": "from-env-0123456789"}) == (
        "from-env-0123456789"
    )
    assert redis_password(settings, {"YARN_ADAPT_REDIS_PASSWORD": "env"}) == "env"


def _read_secret(settings: Settings, key: str) -> str | None:
    return write_token(settings, {}) if key == "token_file" else redis_password(settings, {})


@pytest.mark.parametrize(
    ("table", "key"), [("http", "token_file"), ("tracing", "redis_password_file")]
)
@pytest.mark.parametrize(
    ("mode", "owner", "refusal"),
    [
        (0o600, None, None),
        (0o400, None, None),
        (0o644, None, "mode 0644 lets group or others access it; chmod 600"),
        (0o640, None, "mode 0640 lets group or others access it"),
        (0o604, None, "mode 0604 lets group or others access it"),
        (0o600, 65534, "owned by uid 65534, who may rewrite it; it must belong to"),
    ],
)
def test_a_secret_file_must_be_private_to_the_services_user(
    tmp_path: Path, table: str, key: str, mode: int, owner: int | None, refusal: str | None
) -> None:
    secret = secret_file(tmp_path, "secret-0123456789abcdef\n", mode)
    if owner is not None:
        os.chown(secret, owner, -1)  # the tests run as root
    settings = load_settings(write(tmp_path, f'[{table}]\n{key} = "{secret}"\n'))
    if refusal is None:
        assert _read_secret(settings, key) == "secret-0123456789abcdef"
        return
    with pytest.raises(SettingsError) as raised:
        _read_secret(settings, key)
    message = raised.value.one_line()
    assert f"[{table}] {key} {secret}: {refusal}" in message
    assert "secret-0123" not in message and "\n" not in message
