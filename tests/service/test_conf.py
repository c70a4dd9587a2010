"""The operator files in conf/: the scheduler examples are valid for YARN 3.4 and
have groups to tune; the systemd unit runs the service with the example settings."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.yarn.confxml import load_scheduler_config, validate

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.parametrize("name", ["capacity-scheduler.xml", "fair-scheduler.xml"])
def test_the_example_scheduler_files_are_valid_and_have_two_groups(name: str) -> None:
    config = load_scheduler_config(CONF / name)
    assert validate(config) == []
    assert [g.parent for g in groups_of(config)] == ["root.prod", "root.dev"]


def test_the_systemd_unit_runs_serve_with_the_settings_file() -> None:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(CONF / "yarn-adapt.service")
    assert set(unit.sections()) == {"Unit", "Service", "Install"}
    service = unit["Service"]
    assert "yarn-adapt serve --config /etc/yarn-adapt/yarn-adapt.toml" in service["ExecStart"]
    assert service["User"] == "yarn-adapt"
    assert service["KillSignal"] == "SIGTERM"
