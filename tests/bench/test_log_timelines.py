"""App timelines from ResourceManager and NodeManager logs.

The fixtures are lines of a real run (Hadoop 3.4 mini cluster, logs in UTC) and the
RM's /apps answers for three apps: two calibration apps, and one whose AM got a
surplus container (08) that it released.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from yarn_adapt.bench.sim_fidelity.logs import timelines_from_logs
from yarn_adapt.model import Application, AppState, FinalStatus

FIXTURES = Path(__file__).parent / "fixtures"
RM_LINES = (FIXTURES / "resourcemanager-lines.txt").read_text().splitlines()
NM_LINES = (FIXTURES / "nodemanager-lines.txt").read_text().splitlines()
ROWS = json.loads((FIXTURES / "apps.json").read_text())


def application(row: dict[str, object]) -> Application:
    return Application(
        id=str(row["id"]),
        name=str(row["name"]),
        user="root",
        queue=str(row["queue"]),
        state=AppState.FINISHED,
        final_status=FinalStatus.SUCCEEDED,
        application_type="YARN",
        submitted_ms=int(str(row["startedTime"])),
        launched_ms=int(str(row["launchTime"])),
        finished_ms=int(str(row["finishedTime"])),
    )


APPS = [application(row) for row in ROWS]
SLEEPS = [float(row["sleep_s"]) for row in ROWS]


def epoch(clock: str) -> float:
    """2026-11-22 at ``clock`` (HH:MM:SS.mmm) UTC, as the fixture's lines say."""
    return datetime.fromisoformat(f"2026-11-22T{clock}+00:00").timestamp()


def test_each_app_gets_its_am_grant_and_tasks() -> None:
    timelines = timelines_from_logs(RM_LINES, NM_LINES, APPS, SLEEPS)
    first, second, third = (timelines.apps[app.id] for app in APPS)
    assert timelines.am_granted[APPS[0].id] == pytest.approx(epoch("03:01:31.458"))
    assert first.am_registered_s == pytest.approx(epoch("03:01:33.965"))
    (task,) = first.tasks
    assert (task.granted_s, task.started_s, task.exited_s) == pytest.approx(
        (epoch("03:01:35.532"), epoch("03:01:36.468"), epoch("03:01:40.595"))
    )
    assert first.finished_s == pytest.approx(APPS[0].finished_ms / 1000)  # type: ignore[operator]
    assert first.command_s == 4.0
    assert len(second.tasks) == 2
    assert len(third.tasks) == 6  # container 08 was surplus: granted, then released


def test_the_am_container_is_not_a_task() -> None:
    timelines = timelines_from_logs(RM_LINES, NM_LINES, APPS, SLEEPS)
    for app in APPS:
        granted = timelines.am_granted[app.id]
        assert all(t.granted_s > granted for t in timelines.apps[app.id].tasks)


def test_an_app_with_a_task_missing_from_the_nm_log_has_no_timeline() -> None:
    partial = [line for line in NM_LINES if "1795316487796_0002_01_000003" not in line]
    timelines = timelines_from_logs(RM_LINES, partial, APPS, SLEEPS)
    assert APPS[1].id not in timelines.apps
    assert APPS[1].id in timelines.am_granted  # the RM side is still known
    assert APPS[0].id in timelines.apps


def shifted(lines: list[str], hours: int) -> list[str]:
    """The lines as a JVM ``hours`` east of UTC would have stamped them."""

    def move(found: re.Match[str]) -> str:
        stamp = datetime.strptime(found.group(0), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        return (stamp + timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M:%S")

    return [re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", move, line) for line in lines]


@pytest.mark.parametrize("hours", [2, -5])
def test_local_time_stamps_are_put_back_on_the_epoch(hours: int) -> None:
    """The RM logs each launchTime in epoch ms beside its local stamp."""
    utc = timelines_from_logs(RM_LINES, NM_LINES, APPS, SLEEPS)
    local = timelines_from_logs(shifted(RM_LINES, hours), shifted(NM_LINES, hours), APPS, SLEEPS)
    assert local.am_granted == pytest.approx(utc.am_granted)
    assert local.apps == utc.apps
