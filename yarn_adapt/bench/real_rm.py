"""The real-RM check of ``comparator-accuracy`` (issue 14 item 4): mixes run on the
mini YARN under the comparator's pick and under the simulator's best configuration.

For each chosen case the simulator's best candidate (lowest mean latency over the
truth seeds) is run against a second one on a real ResourceManager: the
comparator's pick when it is another configuration, otherwise the simulator's
runner-up (so every check asks a question the real RM can answer). Cases where the
pick is another configuration come first.

The real cluster cannot run a trace mix at its own scale on one host, so each mix
is shrunk the same way for both configurations (:func:`mini_apps`): its first
``MINI_JOBS`` jobs become distributed-shell ``sleep`` apps in the job's own queue
(containers = tasks, at most ``MINI_MAX_CONTAINERS``; sleep = the job's median
task duration scaled so the mix's median job sleeps ``MINI_MEDIAN_SLEEP_S``,
clipped to ``MINI_SLEEP_RANGE_S``; submissions compressed into ``MINI_WINDOW_S``).
The node holds the case's containers at ``MINI_CONTAINER_MB`` each (one vcore
each, the minimum allocation one container, as in the paper's cluster where an AM
takes a container). Both candidate configurations are the comparator's own
(:func:`yarn_adapt.tuning.paper.candidates`), rendered as the XML YARN reads.

Agreement: each side's verdict is ``best`` (the simulator's best is faster),
``other`` or ``tie``. The real RM's verdict compares the two runs' mean latencies
with ``REAL_NOISE`` as its tie band (how far repeated runs of one scenario differ);
the simulator's verdict comes from the same shrunk apps, submitted when the real RM
says they were, simulated under both configurations (:func:`sim_fidelity.compare.compare`),
tie band the comparator's 0.5 %. A mix agrees when the verdicts match or the real RM
ties them within noise. ``agrees_full_truth`` says whether the real RM finds the
simulator's best at least as good (within noise) as the other, the full-size
truth's claim.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from yarn_adapt.bench.sim_fidelity.compare import compare
from yarn_adapt.bench.sim_fidelity.real import RealRun, run_on_cluster
from yarn_adapt.bench.sim_fidelity.scenarios import (
    FAIR_INCREMENT_PROPERTY,
    Scenario,
    SleepApp,
    compressed_offsets,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.minicluster import MiniCluster, MiniClusterError, MiniClusterSpec
from yarn_adapt.model import SchedulerConfig, Workload
from yarn_adapt.model.capacity import CapacitySchedulerConfig
from yarn_adapt.progress import report
from yarn_adapt.sim.calibration import RECORDED_OVERHEADS, SchedulerKind
from yarn_adapt.tuning.paper import Candidate
from yarn_adapt.yarn.confxml import render_capacity, render_fair

log = logging.getLogger(__name__)

REAL_RM_MIXES = 8
MINI_JOBS = 8
MINI_MAX_CONTAINERS = 4
MINI_MEDIAN_SLEEP_S = 10.0
MINI_SLEEP_RANGE_S = (3.0, 20.0)
MINI_WINDOW_S = 20.0
MINI_CONTAINER_MB = 512
REAL_NOISE = 0.05
SIM_TIE = 0.005

Verdict = Literal["best", "other", "tie"]


@dataclass(frozen=True)
class RealRmCase:
    """One mix to run for real: the simulator's best against another candidate."""

    label: str
    scheduler: SchedulerKind
    containers: int
    best: Candidate
    other: Candidate
    versus: Literal["pick", "runner-up"]
    truth_best_s: float
    truth_other_s: float
    apps: tuple[SleepApp, ...]


@dataclass(frozen=True)
class RealRmResult:
    case: RealRmCase
    real_best_s: float
    real_other_s: float
    sim_best_s: float
    sim_other_s: float

    @property
    def real_verdict(self) -> Verdict:
        return verdict(self.real_best_s, self.real_other_s, REAL_NOISE)

    @property
    def sim_verdict(self) -> Verdict:
        return verdict(self.sim_best_s, self.sim_other_s, SIM_TIE)

    @property
    def agrees(self) -> bool:
        return self.real_verdict == "tie" or self.real_verdict == self.sim_verdict

    @property
    def agrees_full_truth(self) -> bool:
        return self.real_verdict != "other"

    def row(self) -> dict[str, object]:
        case = self.case
        return {
            "mix": case.label,
            "versus": case.versus,
            "best": case.best.label,
            "other": case.other.label,
            "truth_best_s": round(case.truth_best_s, 1),
            "truth_other_s": round(case.truth_other_s, 1),
            "real_best_s": round(self.real_best_s, 2),
            "real_other_s": round(self.real_other_s, 2),
            "sim_best_s": round(self.sim_best_s, 2),
            "sim_other_s": round(self.sim_other_s, 2),
            "real": self.real_verdict,
            "sim": self.sim_verdict,
            "agrees": self.agrees,
        }


def verdict(best_s: float, other_s: float, tie: float) -> Verdict:
    """Which of two mean latencies is lower, ``tie`` within ``tie`` of the best's."""
    if abs(other_s - best_s) <= tie * best_s:
        return "tie"
    return "best" if best_s < other_s else "other"


def mini_apps(workload: Workload) -> tuple[SleepApp, ...]:
    """The mix's first :data:`MINI_JOBS` jobs (with tasks) as sleep apps in their own
    leaf queues, durations scaled together (module docstring)."""
    jobs = [j for j in sorted(workload.jobs, key=lambda j: j.submit_s) if j.tasks][:MINI_JOBS]
    if len(jobs) < 2:
        raise MiniClusterError(f"{workload.source or 'mix'}: fewer than 2 jobs with tasks")
    medians = [statistics.median(t.duration_s for t in job.tasks) for job in jobs]
    scale = MINI_MEDIAN_SLEEP_S / max(statistics.median(medians), 1e-9)
    offsets = compressed_offsets([j.submit_s for j in jobs], MINI_WINDOW_S)
    low, high = MINI_SLEEP_RANGE_S
    return tuple(
        SleepApp(
            offset_s=offset,
            queue=job.queue.rsplit(".", 1)[-1],
            containers=min(len(job.tasks), MINI_MAX_CONTAINERS),
            sleep_s=round(min(high, max(low, median * scale)), 1),
            container_mb=MINI_CONTAINER_MB,
        )
        for job, median, offset in zip(jobs, medians, offsets, strict=True)
    )


def scheduler_xml(config: SchedulerConfig) -> str:
    if isinstance(config, CapacitySchedulerConfig):
        return render_capacity(config)
    return render_fair(config)


def mini_cluster_spec(scheduler: SchedulerKind, containers: int, first_xml: str) -> MiniClusterSpec:
    """One NodeManager holding ``containers`` containers; requests (AMs too) round up
    to one container, as on the paper's cluster."""
    site = {FAIR_INCREMENT_PROPERTY: str(MINI_CONTAINER_MB)} if scheduler == "fair" else {}
    return MiniClusterSpec(
        scheduler=scheduler,
        nm_memory_mb=containers * MINI_CONTAINER_MB,
        nm_vcores=containers,
        min_allocation_mb=MINI_CONTAINER_MB,
        scheduler_xml=first_xml,
        yarn_site=site,
    )


def run_real_rm_cases(cases: Sequence[RealRmCase], seed: int) -> list[RealRmResult]:
    """Each case under both configurations, one mini cluster per (scheduler, size);
    a case that fails on the RM or that the simulator cannot finish is left out
    (logged; ``real_rm_mixes`` then falls short of ``real_rm_wanted``)."""
    results: list[RealRmResult] = []
    done = 0
    for (kind, containers), group in _grouped(cases):
        first_xml = scheduler_xml(group[0].best.config)
        with MiniCluster(mini_cluster_spec(kind, containers, first_xml)) as cluster:
            for case in group:
                try:
                    results.append(run_on_cluster_pair(cluster, case, seed))
                except (MiniClusterError, SettingsError) as exc:
                    log.warning("real-RM mix %s failed: %s", case.label, exc.one_line())
                done += 1
                report("comparator-accuracy real-RM mix", done, len(cases), case.label)
    return results


def _grouped(
    cases: Sequence[RealRmCase],
) -> Iterator[tuple[tuple[SchedulerKind, int], list[RealRmCase]]]:
    keys = dict.fromkeys((c.scheduler, c.containers) for c in cases)
    for key in keys:
        yield key, [c for c in cases if (c.scheduler, c.containers) == key]


def run_on_cluster_pair(cluster: MiniCluster, case: RealRmCase, seed: int) -> RealRmResult:
    """The case under the best configuration, then under the other."""
    best = _run(cluster, case, case.best, "best")
    other = _run(cluster, case, case.other, "other")
    return RealRmResult(
        case,
        _mean_real(best),
        _mean_real(other),
        _mean_simulated(best, seed),
        _mean_simulated(other, seed),
    )


def _run(cluster: MiniCluster, case: RealRmCase, candidate: Candidate, role: str) -> RealRun:
    scenario = Scenario(
        f"rm-{case.label}-{role}", case.scheduler, scheduler_xml(candidate.config), case.apps
    )
    log.info("real-RM mix %s: %s %s", case.label, role, candidate.label)
    return run_on_cluster(cluster, scenario)


def _mean_real(run: RealRun) -> float:
    return statistics.fmean(real.latency_s for real in run.apps)


def _mean_simulated(run: RealRun, seed: int) -> float:
    return statistics.fmean(c.sim_latency_s for c in compare(run, RECORDED_OVERHEADS, seed))


def real_rm_figures(results: Sequence[RealRmResult], wanted: int) -> dict[str, object]:
    """``real_rm_agree`` (count of mixes that agree) and its context."""
    versus_pick = [r for r in results if r.case.versus == "pick"]
    return {
        "real_rm_agree": sum(r.agrees for r in results),
        "real_rm_mixes": len(results),
        "real_rm_wanted": wanted,
        "real_rm_agree_vs_pick": sum(r.agrees for r in versus_pick),
        "real_rm_vs_pick": len(versus_pick),
        "real_rm_agree_full_truth": sum(r.agrees_full_truth for r in results),
        "real_rm_noise": REAL_NOISE,
        "real_rm": [r.row() for r in results],
    }
