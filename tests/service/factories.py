"""Small builders for service tests: settings, a simulated cluster and backend, a
service around them, and a stand-in proposer (the service's decisions are under
test, not the tuner's)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

from yarn_adapt.model import (
    CapacitySchedulerConfig,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
    Workload,
)
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, TaskSpec
from yarn_adapt.service.backend import Observed, SimulatedView
from yarn_adapt.service.demo.simcluster import SimulatedBackend, SimulatedCluster
from yarn_adapt.service.service import Service
from yarn_adapt.service.settings import Settings, settings_from_mapping
from yarn_adapt.service.state.records import GroupPrediction, Suggestion
from yarn_adapt.sim import ClusterSpec
from yarn_adapt.yarn.apply import ApplySettings, PollSettings
from yarn_adapt.yarn.confxml import read_capacity

TOKEN = "s3cret-token-for-tests"
CONTAINER = Resources(2048, 1)


def demo_file(name: str = "capacity-scheduler.xml") -> Path:
    return Path(str(resources.files("yarn_adapt") / "data" / "demo" / name))


def settings_for(tmp_path: Path, **tables: dict[str, object]) -> Settings:
    raw: dict[str, dict[str, object]] = {"state": {"dir": str(tmp_path / "state")}}
    for table, values in tables.items():
        raw.setdefault(table, {}).update(values)
    return settings_from_mapping(raw, "test.toml")


def with_capacities(config: SchedulerConfig, **percent: float) -> SchedulerConfig:
    assert isinstance(config, CapacitySchedulerConfig)
    for name, value in percent.items():
        queue = config.find(f"root.{name}")
        assert queue is not None
        config = config.with_queue(replace(queue, capacity=Percentage(value)))
    return config


def small_workload(jobs: int = 12, spacing_s: float = 20.0) -> Workload:
    specs = tuple(
        JobSpec(
            id=f"job_{i:03d}",
            submit_s=i * spacing_s,
            queue="q1" if i % 3 else "q2",
            tasks=tuple(TaskSpec(TaskType.MAP, 30.0 + 5 * (i % 4), CONTAINER) for _ in range(4)),
            am_resources=CONTAINER,
        )
        for i in range(jobs)
    )
    return Workload(specs, "test")


@dataclass
class FixedProposer:
    """Stands in for the tuner: proposes the capacities given (``q1``/``q2`` of the
    demo file, or ``capacities`` by leaf name) with the predictions given, every time
    it is asked; records which groups the service froze."""

    q1: float = 70.0
    q2: float = 30.0
    before_s: float = 100.0
    after_s: float = 80.0
    triggered: bool = True
    capacities: dict[str, float] | None = None
    frozen_seen: list[frozenset[str]] = field(default_factory=list)
    jobs: int = 5
    population: bool = False  # name the jobs in progress (a simulated view's) as its own

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        self.frozen_seen.append(frozen)
        if not self.triggered:
            return None
        wanted = self.capacities or {"q1": self.q1, "q2": self.q2}
        config = with_capacities(observed.config, **wanted)
        group = GroupPrediction("root", self.before_s, self.after_s, jobs=self.jobs)
        view = observed.view
        if self.population and isinstance(view, SimulatedView):
            ids = tuple(p.job.id for p in view.start.jobs)
            group = replace(group, population=ids, jobs=len(ids))
        reasons = tuple(f"root.{leaf} capacity -> {value:g}" for leaf, value in wanted.items())
        return Suggestion(config, (group,), self.before_s, self.after_s, reasons, ("root",))


def simulated_backend(tmp_path: Path, workload: Workload | None = None) -> SimulatedBackend:
    path = tmp_path / "conf" / "capacity-scheduler.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(demo_file().read_text())
    nodes = ClusterSpec.uniform(2, CONTAINER * 8)
    cluster = SimulatedCluster(workload or small_workload(), nodes, read_capacity(path).config)
    apply_settings = ApplySettings(
        state_dir=tmp_path / "state", verify=PollSettings(timeout_s=1.0, interval_s=0.05)
    )
    return SimulatedBackend(cluster, path, apply_settings, step_s=60.0)


def sim_service(
    tmp_path: Path,
    proposer: FixedProposer | None = None,
    **tables: dict[str, object],
) -> Service:
    settings = settings_for(tmp_path, **tables)
    return Service.build(
        settings, simulated_backend(tmp_path), proposer or FixedProposer(), token=TOKEN
    )


@dataclass
class FairWeights:
    """Stands in for the tuner on a Fair tree: proposes ``weights`` (queue path ->
    weight), predicting ``after_s`` against 100 s for the root group's 5 jobs."""

    weights: dict[str, float]
    after_s: float = 50.0

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion:
        config = observed.config
        assert isinstance(config, FairSchedulerConfig)
        for path, weight in self.weights.items():
            queue = config.find(path)
            assert queue is not None
            config = config.with_queue(replace(queue, weight=weight))
        group = GroupPrediction("root", 100.0, self.after_s, jobs=5)
        return Suggestion(config, (group,), 100.0, self.after_s, ("weights",), ("root",))
