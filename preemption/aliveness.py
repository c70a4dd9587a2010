"""AlivenessCheck(t): did a squeezed task keep going? (TopoSch §5.3)

Pure: judged from two :class:`~preemption.model.TaskSample` readings taken one
interval apart, the CPU rate the task had before the last step, and the limit now in
force. A task falters when

* its processes are stopped while the container is still there (lost its heartbeat:
  ``alive`` is False; processes that exited and wait for their parent to reap them
  are a task ending, not faltering: ``exiting``),
* the kernel OOM-killed something in its cgroup since the last reading,
* it was busy before the step and now gets less than ``cpu_progress_ratio`` of what
  it could use (``min(rate before, new limit)``): hung, e.g. thrashing on memory,
* its MapReduce progress (from the AM or JobHistory) did not move for
  ``progress_stall_s`` seconds.

A task that was idle before the step (below ``min_busy_millicores``) is not judged on
CPU: an idle task gives no evidence either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from preemption.model import TaskSample


@dataclass(frozen=True, kw_only=True)
class AlivenessSettings:
    cpu_progress_ratio: float = 0.2
    min_busy_millicores: int = 50
    progress_stall_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.cpu_progress_ratio <= 1.0:
            raise ValueError(f"cpu_progress_ratio must be in [0, 1], got {self.cpu_progress_ratio}")
        if self.min_busy_millicores < 0 or self.progress_stall_s <= 0:
            raise ValueError("min_busy_millicores must be >= 0 and progress_stall_s > 0")


@dataclass(frozen=True)
class Verdict:
    alive: bool
    reason: str = ""


ALIVE = Verdict(True)


def cpu_rate_millicores(before: TaskSample, after: TaskSample) -> float:
    """Average CPU use between two readings, in millicores."""
    elapsed = after.at_s - before.at_s
    if elapsed <= 0:
        return 0.0
    used_ns = max(0, after.cpu_usage_ns - before.cpu_usage_ns)
    return used_ns / 1e6 / elapsed


def check(
    before: TaskSample,
    after: TaskSample,
    *,
    rate_before_millicores: float,
    limit_millicores: int,
    progress_moved_at_s: float | None,
    settings: AlivenessSettings,
) -> Verdict:
    """The verdict on a task for the interval ``before`` → ``after``."""
    if not after.alive and after.exiting:
        return ALIVE  # its processes exited: its work ended, no sign of faltering
    if not after.alive:
        return Verdict(False, "its processes are stopped")
    if after.oom_kills > before.oom_kills:
        return Verdict(False, f"OOM kill in the cgroup ({after.oom_kills - before.oom_kills})")
    rate_after = cpu_rate_millicores(before, after)
    if rate_before_millicores >= settings.min_busy_millicores:
        expected = min(rate_before_millicores, float(limit_millicores))
        if rate_after < settings.cpu_progress_ratio * expected:
            return Verdict(
                False,
                f"CPU progress fell to {rate_after:.0f}m (was {rate_before_millicores:.0f}m, "
                f"limit {limit_millicores}m)",
            )
    if _progress_stalled(after, progress_moved_at_s, settings):
        return Verdict(False, f"task progress stuck at {after.progress:.0%}")
    return ALIVE


def _progress_stalled(
    after: TaskSample, progress_moved_at_s: float | None, settings: AlivenessSettings
) -> bool:
    if after.progress is None or progress_moved_at_s is None or after.progress >= 1.0:
        return False
    return after.at_s - progress_moved_at_s >= settings.progress_stall_s
