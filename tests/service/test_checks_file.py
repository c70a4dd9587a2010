"""The checked predictions' log ratios kept across restarts (checks_file.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.service.factories import settings_for
from yarn_adapt.service.proposers.checks_file import (
    FILE_NAME,
    checks_path,
    load_log_ratios,
    save_log_ratios,
)
from yarn_adapt.service.proposers.intervals import WINDOW
from yarn_adapt.service.proposers.tuner_adapter import rm_proposer


def test_the_latest_window_of_ratios_survives_a_save_and_a_load(tmp_path: Path) -> None:
    path = checks_path(tmp_path / "state")  # the directory is made on the first save
    assert load_log_ratios(path) == ()
    ratios = [i / 100 for i in range(WINDOW + 7)]
    save_log_ratios(path, ratios)
    assert load_log_ratios(path) == pytest.approx(ratios[-WINDOW:])
    assert [p.name for p in path.parent.iterdir()] == [FILE_NAME]  # no temporary left


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not JSON"),
        ('{"version": 9, "log_ratios": []}', "not a version 1 record"),
        ('{"version": 1, "log_ratios": {"a": 1}}', "log_ratios is not a list"),
        ('{"version": 1, "log_ratios": [0.1, "x"]}', "log_ratios[1] is not a number"),
        ('{"version": 1, "log_ratios": [0.1, true]}', "log_ratios[1] is not a number"),
        ('{"version": 1, "log_ratios": [0.1, NaN]}', "log_ratios[1] is not finite"),
    ],
)
def test_a_file_that_cannot_be_read_is_set_aside_and_named(
    tmp_path: Path, text: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = checks_path(tmp_path)
    path.write_text(text)
    with caplog.at_level(logging.WARNING):
        assert load_log_ratios(path) == ()
    [record] = caplog.records
    assert str(path) in record.getMessage() and problem in record.getMessage()
    assert "ranges start from the prior" in record.getMessage()
    assert not path.exists()
    assert path.with_name(FILE_NAME + ".damaged").read_text() == text  # nothing lost


def test_a_file_that_cannot_be_written_is_logged_and_the_round_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state directory should be")
    with caplog.at_level(logging.WARNING):
        save_log_ratios(checks_path(blocker), [0.1])
    assert "cannot keep the checked predictions" in caplog.text
    assert blocker.read_text().startswith("a file")


def test_a_restarted_proposer_states_ranges_calibrated_on_its_earlier_checks(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path)
    fresh = rm_proposer(settings).ledger.calibration()
    assert not fresh.calibrated  # nothing checked yet: the prior
    ratios = [0.10, 0.20, 0.15, 0.25]
    save_log_ratios(checks_path(settings.state.state_dir), ratios)
    restarted = rm_proposer(settings).ledger.calibration()
    assert restarted.calibrated and restarted.log_ratios == pytest.approx(ratios)
    low, high = restarted.log_bounds()
    assert low < 0.175 < high  # centred where the earlier checks fell, not on the prior's 0
    assert json.loads(checks_path(settings.state.state_dir).read_text())["version"] == 1
