"""The per-server load monitor's decisions (Tarcil §5.1-5.2): which jobs run below
their target, which servers to close to new work, which running tasks to move.

Tarcil's monitors measure each running job's performance in real time against the
target it expects (here: its speed against running alone, the model's and the
profiles' reference). When a job "runs significantly below its expected
performance, the scheduler adjusts the scheduling decisions, first locally and
then via migration" (§3.1); "the primary action we take is to avoid scheduling
other jobs on the same server" (§5.2). The monitor here does three things at every
report (every ``interval_s``), each counted by the bench:

1. **Close / reopen** (local): a server where some occupant runs below ``1 / (1 +
   slack)`` of its speed alone is closed to new work; placers rank closed servers
   after every open one. It reopens at the first report where every occupant is
   back on target (its neighbours left, or the sufferer did).
2. **Migrate** (long jobs): a suffering job's slow tasks move to RUs that predict
   no overshoot (:meth:`~yarn_adapt.placement.tarcil.TarcilPlacer.relocate`,
   sampled with the cap) when :func:`migration_pays`: the time it would still
   take where it is exceeds the time after the move, the move's cost included,
   by at least ``min_gain x cost``. The move costs ``migration_cost_s`` of the
   job's progress (container checkpoint and restore, or the moved tasks redoing
   their work), charged to the job. Short jobs finish before a move could pay:
   for them the first placement is all there is, as the paper says.
3. **Observe** for profile correction: the speed and the contention of a bounded
   sample of RUs on the servers that changed, and the pressure running jobs
   exert (:class:`~yarn_adapt.placement.correction.LiveProfiles`).

Only what changed since the last report is looked at (the servers whose
occupancy changed): the monitor's cost follows the churn, not the cluster size,
and it runs beside the schedulers, never inside a decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yarn_adapt.errors import InputError


@dataclass(frozen=True)
class MonitorSettings:
    interval_s: float = 1.0
    slack: float = 0.05
    close: bool = False
    migrate: bool = True
    migration_cost_s: float = 2.0
    min_gain: float = 1.0
    observations_per_report: int = 2048
    migrations_per_report: int = 64
    correct: bool = True

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.slack < 0 or self.migration_cost_s < 0:
            raise InputError("monitor: interval_s > 0, slack >= 0, migration_cost_s >= 0")
        if self.min_gain < 0 or self.observations_per_report < 0:
            raise InputError("monitor: min_gain >= 0, observations_per_report >= 0")
        if self.migrations_per_report < 0:
            raise InputError("monitor: migrations_per_report >= 0")

    @property
    def target_speed(self) -> float:
        """Below this speed (against running alone) a job misses its target."""
        return 1.0 / (1.0 + self.slack)


def migration_pays(
    remaining_work_s: float, speed_now: float, speed_after: float, settings: MonitorSettings
) -> bool:
    """Whether moving a job that has ``remaining_work_s`` seconds of work left (at
    full speed) from ``speed_now`` to ``speed_after`` saves at least ``min_gain``
    times the move's cost, net of that cost."""
    if speed_now <= 0 or speed_after <= speed_now or remaining_work_s <= 0:
        return False
    stay = remaining_work_s / speed_now
    move = settings.migration_cost_s + remaining_work_s / speed_after
    return stay - move >= settings.min_gain * settings.migration_cost_s


@dataclass
class AdjustmentStats:
    """What the monitors did over a run."""

    reports: int = 0
    closed: int = 0  # servers closed (each closing counted)
    reopened: int = 0
    suffering_seen: int = 0  # RU reports below target
    migrations: int = 0
    migrated_rus: int = 0
    migration_cost_s: float = 0.0  # progress charged to moved jobs
    relocation_misses: int = 0  # moves that found no better RUs
    observations: int = 0
    corrections: int = 0
    adjust_ns: list[int] = field(default_factory=list)  # relocation searches
