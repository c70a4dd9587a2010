"""``yarn-adapt config validate``: errors (YARN refuses the file) apart from warnings
(YARN loads it), one truth in the JSON, each finding printed once (issue 29, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yarn_adapt.cli import main

DEMO = Path(__file__).resolve().parents[2] / "yarn_adapt" / "data" / "demo"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _demo_with(tmp_path: Path, name: str, replacements: dict[str, str]) -> Path:
    text = (DEMO / "capacity-scheduler.xml").read_text()
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text)
    return path


Q1_CAPACITY = "<name>yarn.scheduler.capacity.root.q1.capacity</name>\n    <value>50</value>"
Q1_MAXIMUM = "<name>yarn.scheduler.capacity.root.q1.maximum-capacity</name>\n    <value>100</value>"


@pytest.fixture
def invalid(tmp_path: Path) -> Path:
    """Children summing to 110 %: YARN refuses it."""
    return _demo_with(tmp_path, "invalid.xml", {Q1_CAPACITY: Q1_CAPACITY.replace("50", "60")})


@pytest.fixture
def warned(tmp_path: Path) -> Path:
    """q1's maximum below its capacity: YARN 3.4 accepts it."""
    return _demo_with(tmp_path, "warned.xml", {Q1_MAXIMUM: Q1_MAXIMUM.replace("100", "40")})


def test_the_json_of_an_invalid_file_says_it_is_not_valid(
    invalid: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["config", "validate", str(invalid), "--json"], capsys)
    found = json.loads(out)
    assert code == 2 and found["valid"] is False
    assert [e["text"] for e in found["errors"]] == [
        "root.capacity: children's capacities add up to 110, not 100 (or 0)"
    ]
    assert found["errors"][0]["yarn"] == "refuses the file" and found["warnings"] == []
    assert err.strip() == f"yarn-adapt: {invalid}: not valid: 1 error"


def test_text_mode_prints_each_finding_once(
    invalid: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["config", "validate", str(invalid)], capsys)
    assert code == 2
    assert (out + err).count("add up to 110") == 1
    assert (
        out.strip()
        == f"{invalid}: error: root.capacity: children's capacities add up to 110, not 100 (or 0)"
    )


def test_a_warning_never_fails_the_check_unless_strict(
    warned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["config", "validate", str(warned)], capsys)
    assert code == 0 and err == ""
    assert "warning: root.q1.maximum-capacity: 40 is below capacity 50 (YARN 3.4 accepts it)" in out
    assert "valid capacity scheduler configuration, 3 queues" in out
    assert "yarn-adapt apply refuses it until they are fixed" in out  # says what apply does

    code, out, _ = run(["config", "validate", str(warned), "--json"], capsys)
    found = json.loads(out)
    assert code == 0 and found["valid"] is True and found["errors"] == []
    assert [w["property"] for w in found["warnings"]] == ["maximum-capacity"]
    assert found["warnings"][0]["yarn"] == "accepts it"

    code, out, err = run(["config", "validate", str(warned), "--strict", "--json"], capsys)
    assert code == 2 and json.loads(out)["valid"] is False
    assert "1 warning (failing with --strict)" in err


def test_a_valid_file_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    path = DEMO / "capacity-scheduler.xml"
    code, out, _ = run(["config", "validate", str(path), "--json"], capsys)
    found = json.loads(out)
    assert code == 0 and found["valid"] is True
    assert found["errors"] == found["warnings"] == []
