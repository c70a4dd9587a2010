"""AlivenessCheck(t) on table cases."""

from __future__ import annotations

import pytest

from preemption.aliveness import AlivenessSettings, check, cpu_rate_millicores
from preemption.model import TaskSample

SETTINGS = AlivenessSettings(cpu_progress_ratio=0.2, min_busy_millicores=50, progress_stall_s=60)
BEFORE = TaskSample(at_s=100.0, alive=True, cpu_usage_ns=0, oom_kills=0, progress=0.30)


def after(
    cpu_ms: float,
    *,
    alive: bool = True,
    oom: int = 0,
    progress: float | None = 0.31,
    exiting: bool = False,
) -> TaskSample:
    return TaskSample(101.0, alive, int(cpu_ms * 1e6), oom, progress, exiting=exiting)


@pytest.mark.parametrize(
    ("sample", "rate_before", "limit", "moved_at", "alive", "reason"),
    [
        (after(700), 900.0, 750, 100.0, True, ""),  # got most of its new limit
        (after(160), 900.0, 750, 100.0, True, ""),  # 160 >= 0.2 * 750
        (after(100), 900.0, 750, 100.0, False, "CPU progress fell to 100m"),
        (after(100), 300.0, 750, 100.0, True, ""),  # 100 >= 0.2 * min(300, 750)
        (after(0), 20.0, 750, 100.0, True, ""),  # idle before: no CPU judgement
        (after(700, alive=False), 900.0, 750, 100.0, False, "its processes are stopped"),
        # exited, waiting to be reaped: a task ending (CI r22 saw one blacklisted)
        (after(0, alive=False, exiting=True), 900.0, 750, 100.0, True, ""),
        (after(700, oom=1), 900.0, 750, 100.0, False, "OOM kill"),
        (after(700, progress=0.30), 900.0, 750, 30.0, False, "task progress stuck at 30%"),
        (after(700, progress=0.30), 900.0, 750, 50.0, True, ""),  # 51 s < 60 s
        (after(700, progress=None), 900.0, 750, 0.0, True, ""),  # no progress known
    ],
)
def test_verdicts(
    sample: TaskSample, rate_before: float, limit: int, moved_at: float, alive: bool, reason: str
) -> None:
    verdict = check(
        BEFORE,
        sample,
        rate_before_millicores=rate_before,
        limit_millicores=limit,
        progress_moved_at_s=moved_at,
        settings=SETTINGS,
    )
    assert verdict.alive is alive
    assert reason in verdict.reason


def test_cpu_rate_is_millicores_over_the_interval() -> None:
    assert cpu_rate_millicores(BEFORE, after(500)) == pytest.approx(500.0)
    assert cpu_rate_millicores(BEFORE, BEFORE) == 0.0
