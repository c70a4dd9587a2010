"""YARN overheads: measured from app timelines, mapped onto simulator options."""

from __future__ import annotations

from typing import Any

import pytest

from yarn_adapt.errors import SettingsError
from yarn_adapt.sim.calibration import (
    DS_AM_HEARTBEAT_S,
    RECORDED_OVERHEADS,
    AppTimeline,
    TaskTimeline,
    YarnOverheads,
    estimate_overheads,
    normalisation_step,
    simulation_options,
    task_duration_s,
)


def timeline(
    app_id: str,
    command_s: float,
    am_granted: float,
    registered: float,
    tasks: list[tuple[float, float, float]],
    finished: float,
) -> AppTimeline:
    return AppTimeline(
        app_id,
        command_s,
        am_granted,
        registered,
        finished,
        tuple(TaskTimeline(*task) for task in tasks),
    )


# Three apps with hand-picked times (seconds):
#   first task grant - AM grant: 3.25, 3.75, 4.25 -> median 3.75, less 0.25 (half a
#   0.5 s heartbeat) = 3.5
#   grant -> start: 0.5, 0.7, 0.9, 0.6, 1.1 -> median 0.7
#   run - command: 0.1, 0.1, 0.2, 0.2, 0.1 -> median 0.1
#   last exit -> finished: 1.0, 0.8, 1.2 -> median 1.0
#   registration - AM grant: 2.0, 2.5, 3.0 -> median 2.5
APPS = [
    timeline("a1", 5.0, 100.0, 102.0, [(103.25, 103.75, 108.85)], 109.85),
    timeline("a2", 4.0, 200.0, 202.5, [(203.75, 204.45, 208.55), (204.25, 205.15, 209.35)], 210.15),
    timeline(
        "a3", 10.0, 300.0, 303.0, [(304.25, 304.85, 315.05), (304.75, 305.85, 315.95)], 317.15
    ),
]


def test_each_overhead_is_the_median_phase() -> None:
    measured = estimate_overheads(APPS, nm_heartbeat_s=0.5)
    assert measured.am_startup_s == pytest.approx(3.5)
    assert measured.container_launch_s == pytest.approx(0.7)
    assert measured.container_exit_s == pytest.approx(0.1)
    assert measured.am_teardown_s == pytest.approx(1.0)
    assert measured.am_registration_s == pytest.approx(2.5)
    assert measured.samples == 3
    assert measured.nm_heartbeat_s == 0.5
    assert measured.am_heartbeat_s == DS_AM_HEARTBEAT_S


def test_apps_without_tasks_are_not_measured() -> None:
    empty = timeline("a0", 5.0, 0.0, 2.0, [], 9.0)
    assert estimate_overheads([*APPS, empty], 0.5) == estimate_overheads(APPS, 0.5)
    with pytest.raises(SettingsError, match="no app with a task container"):
        estimate_overheads([empty], 0.5)


def test_a_first_grant_within_half_a_heartbeat_gives_no_negative_startup() -> None:
    quick = timeline("q", 1.0, 10.0, 10.05, [(10.1, 10.5, 11.6)], 12.0)
    assert estimate_overheads([quick], 0.5).am_startup_s == 0.0


@pytest.mark.parametrize(
    ("command_s", "expected"),
    [(0.0, 0.9), (5.0, 5.9), (40.0, 40.9)],
)
def test_a_task_holds_its_container_for_launch_command_and_exit(
    command_s: float, expected: float
) -> None:
    overheads = YarnOverheads(
        0.5, 3.0, container_launch_s=0.7, container_exit_s=0.2, am_teardown_s=1.0
    )
    assert task_duration_s(command_s, overheads) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("scheduler", "off_switch", "assign_multiple"),
    [("capacity", True, False), ("fair", False, True)],
)
def test_options_follow_the_overheads_and_the_scheduler(
    scheduler: str, off_switch: bool, assign_multiple: bool
) -> None:
    options = simulation_options(RECORDED_OVERHEADS, scheduler, seed=7)  # type: ignore[arg-type]
    assert options.heartbeat_interval_s == RECORDED_OVERHEADS.nm_heartbeat_s
    assert options.am_startup_s == RECORDED_OVERHEADS.am_startup_s
    assert options.am_teardown_s == RECORDED_OVERHEADS.am_teardown_s
    assert options.am_allocate_interval_s == RECORDED_OVERHEADS.am_heartbeat_s
    assert options.out_of_band_heartbeats
    assert options.off_switch_requests is off_switch
    assert options.fair_assign_multiple is assign_multiple
    assert options.seed == 7


@pytest.mark.parametrize(
    ("scheduler", "minimum", "increment", "step"),
    [
        ("capacity", 128, None, 128),
        ("capacity", 128, 1024, 128),
        ("fair", 128, None, 1024),  # YARN's default increment
        ("fair", 128, 128, 128),
        ("fair", 1024, 512, 1024),
    ],
)
def test_normalisation_step(scheduler: str, minimum: int, increment: int | None, step: int) -> None:
    assert normalisation_step(scheduler, minimum, increment) == step  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("nm_heartbeat_s", 0.0, "nm_heartbeat_s must be positive"),
        ("am_startup_s", -1.0, "am_startup_s is negative"),
        ("container_launch_s", -0.1, "container_launch_s is negative"),
        ("am_teardown_s", -2.0, "am_teardown_s is negative"),
    ],
)
def test_impossible_overheads_are_refused(field: str, value: float, message: str) -> None:
    values: dict[str, Any] = {
        "nm_heartbeat_s": 0.5,
        "am_startup_s": 3.0,
        "container_launch_s": 0.7,
        "container_exit_s": 0.1,
        "am_teardown_s": 1.0,
        field: value,
    }
    with pytest.raises(SettingsError, match=message):
        YarnOverheads(**values)
