"""One placement experiment: a cluster, a workload and a policy, run in the RU cluster
model. ``yarn-adapt bench placement`` runs it per policy and scale; tests run small
ones.

Every policy sees the same jobs (same seed) and the same resident population. The
scheduler is built per policy from the same pieces the YARN simulator's hook uses
(:func:`~yarn_adapt.placement.policies.make_placer`): Tarcil runs as ``agents``
scheduling agents with admission control and its load monitors (§5.2: closing,
migration, profile correction -- each can be switched off); the others as one
direct scheduler on the profiled book, with no monitor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl, AdmissionSettings
from yarn_adapt.placement.agents import AgentPool, AgentSettings, DirectScheduler, SharedState
from yarn_adapt.placement.baselines import POLICY_NAMES
from yarn_adapt.placement.cluster_model import ClusterModel, ModelResult, ModelSettings, Monitoring
from yarn_adapt.placement.correction import LiveProfiles
from yarn_adapt.placement.jobs import PlacementJob
from yarn_adapt.placement.monitor import MonitorSettings
from yarn_adapt.placement.policies import make_placer
from yarn_adapt.placement.profiles import (
    CautiousProfiles,
    InterferenceProfile,
    ProfileBook,
    ProfileSource,
)
from yarn_adapt.placement.state import RUState, Topology
from yarn_adapt.placement.tarcil import TarcilPlacer, TarcilSettings
from yarn_adapt.placement.workloads import (
    JobArrival,
    profile_error,
    profiled_book,
    synthetic_classes,
    synthetic_jobs,
    trace_jobs,
)


@dataclass(frozen=True)
class Scenario:
    servers: int
    horizon_s: float
    rus_per_server: int = 8
    servers_per_rack: int = 40
    load: float = 0.72
    measure_share: float = 0.9
    classes: int = 20
    new_class_share: float = 0.4
    probes: int = 3
    profile_noise: float = 0.03
    slope: float = 1.0
    agents: int = 10
    sync_interval_s: float = 0.1
    miss_probability: float = 1e-3
    cap: int = 32
    max_wait_s: float = 30.0
    max_trace_rus: int = 32
    protect: bool = True
    monitor_interval_s: float = 1.0
    slack: float = 0.05
    close_servers: bool = False
    migrate: bool = True
    migration_cost_s: float = 2.0
    correct_profiles: bool = True
    directed: bool = True
    check_quality: bool = False
    caution: float = 0.2  # Tarcil's margin on completed / default profiles (CautiousProfiles)
    check_slots: bool = False
    seed: int = 1
    trace: Path | None = None

    def __post_init__(self) -> None:
        if not 0 < self.load < 1:
            raise InputError(f"load {self.load} must be in (0, 1)")
        if self.horizon_s <= 0 or not 0 < self.measure_share <= 1:
            raise InputError("horizon_s must be positive and measure_share in (0, 1]")

    @property
    def ru_count(self) -> int:
        return self.servers * self.rus_per_server


@dataclass(frozen=True)
class Workbench:
    """Everything a policy run shares: topology, truth, the scheduler's profiles,
    the jobs and the resident population."""

    scenario: Scenario
    topology: Topology
    truth: dict[str, InterferenceProfile]
    book: ProfileBook
    jobs: tuple[JobArrival, ...]
    residents: tuple[JobArrival, ...]

    @property
    def profile_error(self) -> float:
        return profile_error(self.book, self.truth)


def prepare(scenario: Scenario) -> Workbench:
    topology = Topology.uniform(
        scenario.servers, scenario.rus_per_server, scenario.servers_per_rack
    )
    truth = synthetic_classes(scenario.classes, scenario.seed)
    book = profiled_book(
        truth, new_share=scenario.new_class_share, probes=scenario.probes,
        noise=scenario.profile_noise, seed=scenario.seed,
    )  # fmt: skip
    jobs = _jobs(scenario, topology, sorted(truth))
    rng = np.random.default_rng(scenario.seed + 7)
    residents = _residents(jobs, int(scenario.load * topology.ru_count), rng)
    return Workbench(scenario, topology, truth, book, tuple(jobs), tuple(residents))


def _jobs(scenario: Scenario, topology: Topology, classes: list[str]) -> list[JobArrival]:
    if scenario.trace is not None:
        return trace_jobs(
            scenario.trace, classes=classes, rus=topology.ru_count, load=scenario.load,
            horizon_s=scenario.horizon_s, max_rus=scenario.max_trace_rus, seed=scenario.seed,
        )  # fmt: skip
    return synthetic_jobs(
        classes=classes, rus=topology.ru_count, servers=topology.servers,
        racks=topology.racks, load=scenario.load, horizon_s=scenario.horizon_s,
        seed=scenario.seed,
    )  # fmt: skip


def _residents(jobs: list[JobArrival], busy: int, rng: np.random.Generator) -> list[JobArrival]:
    """A steady-state population: jobs picked length-biased (by RU-seconds) from the
    workload, each with a uniform share of its work left, until ``busy`` RUs."""
    if not jobs or busy <= 0:
        return []
    weights = np.array([a.job.ru_count * a.duration_s for a in jobs])
    weights /= weights.sum()
    residents: list[JobArrival] = []
    held = 0
    while held < busy:
        source = jobs[int(rng.choice(len(jobs), p=weights))]
        left = max(float(rng.random()) * source.duration_s, 0.01)
        job = replace(source.job, id=f"resident-{len(residents)}", expected_duration_s=left)
        residents.append(JobArrival(job, 0.0, left))
        held += job.ru_count
    return residents


def run_policy(bench: Workbench, policy: str, *, seed: int | None = None) -> ModelResult:
    """Replay the workbench's jobs under ``policy`` (one of ``POLICY_NAMES``)."""
    scenario = bench.scenario
    state = RUState(bench.topology, deferred=True)
    shared = SharedState(state)
    rng = np.random.default_rng(scenario.seed if seed is None else seed)
    tarcil = policy == "tarcil"
    admission = None
    profiles: ProfileSource = bench.book
    live = LiveProfiles(bench.book) if tarcil and scenario.correct_profiles else None
    if live is not None:
        profiles = live
    learned = profiles  # what the scheduler learned, before any caution
    if tarcil and scenario.caution > 0:
        profiles = CautiousProfiles(profiles, scenario.caution)
    if tarcil:
        admission = AdmissionControl(
            state,
            AdmissionSettings(
                miss_probability=scenario.miss_probability, cap=scenario.cap,
                max_wait_s=scenario.max_wait_s, seed=scenario.seed,
            ),
        )  # fmt: skip
    settings = TarcilSettings(
        scenario.miss_probability, scenario.cap, protect=scenario.protect,
        directed=scenario.directed,
    )  # fmt: skip
    placer = make_placer(policy, profiles, settings, admission)
    scheduler = (
        AgentPool(
            shared,
            placer,
            AgentSettings(
                scenario.agents, scenario.sync_interval_s, check_quality=scenario.check_quality
            ),
            rng,
        )
        if tarcil and scenario.agents > 1
        else DirectScheduler(shared, placer, rng)
    )
    model_settings = ModelSettings(
        scenario.slope,
        scenario.horizon_s,
        scenario.horizon_s * scenario.measure_share,
        check_slots=scenario.check_slots,
    )
    monitoring = None
    if isinstance(placer, TarcilPlacer):
        monitoring = Monitoring(
            MonitorSettings(
                interval_s=scenario.monitor_interval_s, slack=scenario.slack,
                close=scenario.close_servers, migrate=scenario.migrate,
                migration_cost_s=scenario.migration_cost_s, correct=live is not None,
            ),
            placer, live, np.random.default_rng(scenario.seed + 13),
        )  # fmt: skip
    warm = DirectScheduler(shared, placer, np.random.default_rng(scenario.seed + 11))
    model = ClusterModel(
        state, scheduler, bench.truth, profiles, model_settings, admission, warm, monitoring
    )
    result = model.run(bench.jobs, bench.residents)
    result.profiles = learned
    return result


def check_policy(name: str) -> str:
    if name not in POLICY_NAMES:
        raise InputError(f"unknown placement policy {name!r} (known: {', '.join(POLICY_NAMES)})")
    return name


__all__ = ["PlacementJob", "Scenario", "Workbench", "prepare", "run_policy"]
