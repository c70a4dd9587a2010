"""The same apps in the simulator, submitted when the RM says they were, and the
figures: each app's relative error, split into wait and run, and whether a scenario
agrees (median relative error <= 0.20, none above 0.50).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from yarn_adapt.bench.sim_fidelity.real import RealRun
from yarn_adapt.bench.sim_fidelity.scenarios import AGREE_MAX_REL_ERR, AGREE_MEDIAN_REL_ERR, AM_MB
from yarn_adapt.errors import SettingsError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, TaskSpec, Workload
from yarn_adapt.sim import simulate
from yarn_adapt.sim.calibration import (
    YarnOverheads,
    simulation_options,
    task_duration_s,
)


@dataclass(frozen=True)
class AppComparison:
    scenario: str
    app_id: str
    real_latency_s: float
    sim_latency_s: float
    real_wait_s: float | None
    sim_wait_s: float | None

    @property
    def rel_err(self) -> float:
        return abs(self.sim_latency_s - self.real_latency_s) / self.real_latency_s


def scenario_workload(run: RealRun, overheads: YarnOverheads) -> Workload:
    """The scenario's apps as the simulator's jobs, submitted when the RM says they
    were: an AM container, then ``containers`` tasks of the sleep plus overheads."""
    first = min(app.submitted_s for app in run.apps)
    jobs = tuple(
        JobSpec(
            id=real.app.id,
            submit_s=real.submitted_s - first,
            queue=real.spec.queue,
            tasks=tuple(
                TaskSpec(
                    TaskType.MAP,
                    task_duration_s(real.spec.sleep_s, overheads),
                    Resources(real.spec.container_mb, real.spec.vcores),
                )
                for _ in range(real.spec.containers)
            ),
            user=real.app.user,
            am_resources=Resources(AM_MB, 1),
        )
        for real in run.apps
    )
    return Workload(jobs, source=f"scenario {run.scenario.name}")


def compare(run: RealRun, overheads: YarnOverheads, seed: int) -> list[AppComparison]:
    options = simulation_options(overheads, run.scenario.scheduler, seed=seed)
    result = simulate(
        scenario_workload(run, overheads), run.scenario.config(), run.cluster, options
    )
    by_id = {job.id: job for job in result.jobs}
    comparisons = []
    for real in run.apps:
        job = by_id[real.app.id]
        if job.latency_s is None:
            raise SettingsError(
                f"scenario {run.scenario.name}: the simulator did not finish "
                f"{real.app.id} ({job.status}: {job.reason})"
            )
        real_wait = None if real.am_granted_s is None else real.am_granted_s - real.submitted_s
        comparisons.append(
            AppComparison(
                run.scenario.name, real.app.id, real.latency_s, job.latency_s, real_wait, job.wait_s
            )
        )
    return comparisons


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of ``values``."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def scenario_agrees(comparisons: Sequence[AppComparison]) -> bool:
    """The simulator agrees with the real RM on a scenario: median relative error
    within :data:`AGREE_MEDIAN_REL_ERR`, every app within :data:`AGREE_MAX_REL_ERR`."""
    errors = [c.rel_err for c in comparisons]
    return statistics.median(errors) <= AGREE_MEDIAN_REL_ERR and max(errors) <= AGREE_MAX_REL_ERR


def scenario_row(run: RealRun, comparisons: Sequence[AppComparison]) -> dict[str, object]:
    errors = [c.rel_err for c in comparisons]
    wait, run_err = _phase_errors(comparisons)
    return {
        "scenario": run.scenario.name,
        "scheduler": run.scenario.scheduler,
        "agrees": scenario_agrees(comparisons),
        "apps": len(comparisons),
        "median_rel_err": round(statistics.median(errors), 4),
        "max_rel_err": round(max(errors), 4),
        "real_mean_latency_s": round(statistics.fmean(c.real_latency_s for c in comparisons), 2),
        "sim_mean_latency_s": round(statistics.fmean(c.sim_latency_s for c in comparisons), 2),
        "wait_bias_s": round(wait, 2),
        "run_bias_s": round(run_err, 2),
        "wall_s": round(run.wall_s, 1),
    }


def _phase_errors(comparisons: Sequence[AppComparison]) -> tuple[float, float]:
    """Mean signed error (sim - real) of wait (submit -> AM grant) and of the rest."""
    waits, runs = [], []
    for c in comparisons:
        if c.real_wait_s is None or c.sim_wait_s is None:
            continue
        waits.append(c.sim_wait_s - c.real_wait_s)
        runs.append((c.sim_latency_s - c.sim_wait_s) - (c.real_latency_s - c.real_wait_s))
    return (statistics.fmean(waits) if waits else 0.0, statistics.fmean(runs) if runs else 0.0)


def summary_figures(comparisons: Sequence[AppComparison], scenarios: int) -> dict[str, object]:
    errors = [c.rel_err for c in comparisons]
    wait, run_err = _phase_errors(comparisons)
    abs_wait = [
        abs(c.sim_wait_s - c.real_wait_s)
        for c in comparisons
        if c.sim_wait_s is not None and c.real_wait_s is not None
    ]
    return {
        "scenarios": scenarios,
        "apps": len(comparisons),
        "median_rel_err": round(statistics.median(errors), 4),
        "p90_rel_err": round(percentile(errors, 90), 4),
        "mean_rel_err": round(statistics.fmean(errors), 4),
        "median_abs_wait_err_s": round(statistics.median(abs_wait), 2) if abs_wait else None,
        "wait_bias_s": round(wait, 2),
        "run_bias_s": round(run_err, 2),
    }


def overheads_figures(overheads: YarnOverheads) -> dict[str, object]:
    return {
        "source": overheads.source,
        "samples": overheads.samples,
        "nm_heartbeat_s": overheads.nm_heartbeat_s,
        "am_startup_s": round(overheads.am_startup_s, 3),
        "am_registration_s": round(overheads.am_registration_s, 3),
        "container_launch_s": round(overheads.container_launch_s, 3),
        "container_exit_s": round(overheads.container_exit_s, 3),
        "am_teardown_s": round(overheads.am_teardown_s, 3),
        "container_start_spread_s": round(overheads.container_start_spread_s, 3),
        "am_heartbeat_s": overheads.am_heartbeat_s,
    }
