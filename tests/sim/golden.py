"""Scenarios whose simulated results are pinned exactly, and their fingerprints.

The simulator is the ground truth of every decision bench, so a change to its
engine must not change any result. Each scenario here runs one simulation (real
traces, both schedulers, preemption, the calibration options, hooks, a snapshot
start, a horizon) and :func:`fingerprint` reduces the result to exact figures:
every job's queue, status, submit, start and finish time (``repr`` of the float,
so one ulp shows), the event count, preempted containers, the end time,
utilisation and a digest of the usage samples and allocations.

``tests/sim/test_golden.py`` checks the ``quick`` scenarios against
``tests/sim/fixtures/golden.json``, recorded before the engine was reworked for
scale (issue 15). The whole set is the before/after evidence::

    PYTHONPATH=OLD python tests/sim/golden.py dump before.json
    PYTHONPATH=NEW python tests/sim/golden.py dump after.json
    python tests/sim/golden.py compare before.json after.json

(``GOLDEN_ENGINE=python|native`` picks the core of a checkout that has both.)

It imports only ``yarn_adapt`` so that it runs against any checkout of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from yarn_adapt.model import (
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairSchedulerConfig,
    JobSpec,
    Percentage,
    Resources,
    Workload,
)
from yarn_adapt.model.fair import FairResources
from yarn_adapt.sim import (
    CapacityChange,
    ClusterSpec,
    FixedLongRunning,
    HeartbeatMode,
    JobInProgress,
    LongRunningContainer,
    PlacementRequest,
    PreemptionOptions,
    RunningContainer,
    ScheduledNodeCapacity,
    SimulationHooks,
    SimulationOptions,
    SimulationResult,
    SimulationStart,
    simulate,
)
from yarn_adapt.sim.hooks import ClusterView
from yarn_adapt.workload import load_trace
from yarn_adapt.workload.bundled import GOOGLE_2011, bundled_trace

DRC = "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator"
CONTAINER = Resources(2048, 1)
SMALL = Resources(1024, 1)


@cache
def fb_day() -> Workload:
    return load_trace(bundled_trace(), seed=1)


@cache
def google_slice() -> Workload:
    return load_trace(bundled_trace(GOOGLE_2011))


@cache
def contended() -> Workload:
    """400 FB-shaped jobs in 72 minutes on two queues: queues go over their share
    and preemption takes containers back."""
    from yarn_adapt.sim.bench import synthetic_fb_workload

    jobs = synthetic_fb_workload(seed=3, jobs=400).jobs
    return Workload(
        tuple(
            replace(j, queue="q1" if i % 3 else "q2", submit_s=j.submit_s / 20)
            for i, j in enumerate(jobs)
        )
    )


def preempting(seed: int) -> SimulationOptions:
    return SimulationOptions(seed=seed, preemption=PreemptionOptions(enabled=True))


def hours(workload: Workload, first: float, last: float) -> Workload:
    jobs = tuple(j for j in workload.jobs if first * 3600 <= j.submit_s < last * 3600)
    return Workload(jobs, source=workload.source)


def first_jobs(workload: Workload, count: int) -> Workload:
    return Workload(workload.jobs[:count], source=workload.source)


def nodes(count: int, containers: int = 8, container: Resources = CONTAINER) -> ClusterSpec:
    return ClusterSpec.uniform(count, container * containers)


def two_queue_capacity(*globals_: tuple[str, str]) -> CapacitySchedulerConfig:
    q1 = CapacityQueue("root.q1", capacity=Percentage(70), maximum_capacity=Percentage(100))
    q2 = CapacityQueue(
        "root.q2",
        capacity=Percentage(30),
        maximum_capacity=Percentage(60),
        ordering_policy="fair",
        user_limit_factor=2.0,
    )
    return CapacitySchedulerConfig(CapacityQueue("root", children=(q1, q2)), tuple(globals_))


def nested_capacity(*globals_: tuple[str, str]) -> CapacitySchedulerConfig:
    parent = CapacityQueue(
        "root.p",
        capacity=Percentage(60),
        maximum_capacity=Percentage(90),
        children=(
            CapacityQueue("root.p.q1", capacity=Percentage(50), user_limit_factor=3.0),
            CapacityQueue(
                "root.p.q2",
                capacity=Percentage(50),
                ordering_policy="fair",
                minimum_user_limit_percent=50,
            ),
        ),
    )
    other = CapacityQueue("root.o", capacity=Percentage(40), maximum_capacity=Percentage(70))
    return CapacitySchedulerConfig(CapacityQueue("root", children=(parent, other)), globals_)


def two_queue_fair(policy: str = "fair") -> FairSchedulerConfig:
    q1 = FairQueue(
        "root.q1",
        weight=2.0,
        scheduling_policy=policy,
        min_resources=FairResources.absolute(Resources(40 * 2048, 40)),
    )
    q2 = FairQueue("root.q2", weight=1.0, scheduling_policy="fifo" if policy == "fair" else policy)
    defaults = (
        ("defaultFairSharePreemptionTimeout", "20"),
        ("defaultMinSharePreemptionTimeout", "10"),
    )
    return FairSchedulerConfig(FairQueue("root", children=(q1, q2)), defaults)


def users(workload: Workload, count: int) -> Workload:
    """The same jobs spread over ``count`` users (user limits come into play)."""
    jobs = tuple(replace(j, user=f"u{i % count}") for i, j in enumerate(workload.jobs))
    return Workload(jobs, source=workload.source)


def nested_queues(workload: Workload) -> Workload:
    names = {"q1": "q1", "q2": "q2"}
    jobs = tuple(
        replace(j, queue="o" if i % 5 == 0 else names.get(j.queue, j.queue))
        for i, j in enumerate(workload.jobs)
    )
    return Workload(jobs, source=workload.source)


class RandomFitPlacement:
    """A placement policy other than the heartbeating node: a random node that fits
    among a few sampled, or decline."""

    def choose_node(
        self,
        request: PlacementRequest,
        heartbeat_node: str,
        cluster: ClusterView,
        rng: random.Random,
    ) -> str | None:
        ids = cluster.node_ids
        for _ in range(3):
            node = ids[rng.randrange(len(ids))]
            if cluster.fits(node, request.resources):
                return node
        return None


def hooks_scenario() -> tuple[Workload, ClusterSpec, SimulationOptions]:
    cluster = nodes(20)
    ids = [n.id for n in cluster.nodes]
    half = Resources(4 * 2048, 4)
    changes = tuple(
        CapacityChange(600.0 * k, ids[(3 * k) % len(ids)], half if k % 2 else CONTAINER * 8)
        for k in range(1, 12)
    )
    lras = tuple(
        LongRunningContainer(f"lra{k}", ids[k], Resources(4096, 2), 300.0 * k, 300.0 * k + 2000)
        for k in range(6)
    )
    hooks = SimulationHooks(
        node_capacity=ScheduledNodeCapacity(((ids[0], half),), changes),
        placement=RandomFitPlacement(),
        long_running=FixedLongRunning(lras),
    )
    options = SimulationOptions(seed=3, hooks=hooks, record_allocations=True)
    return hours(fb_day(), 0, 3), cluster, options


def snapshot_start() -> tuple[Workload, SimulationStart]:
    """Jobs 'observed' at t = 3,600 s: some with AMs and containers running, some
    still waiting for their AM, the rest arriving later."""
    day = hours(fb_day(), 0, 3)
    before = [j for j in day.jobs if j.submit_s < 3600]
    after = [j for j in day.jobs if j.submit_s >= 3600]
    progress = []
    cluster_ids = [n.id for n in nodes(30).nodes]
    for i, job in enumerate(before[-40:]):
        if i % 3 == 0:
            progress.append(JobInProgress(job))
            continue
        started = job.tasks[: min(4, len(job.tasks) // 2)]
        running = tuple(
            RunningContainer(task, 3600.0 - 3.0 * k, cluster_ids[(i + k) % 30] if k % 2 else None)
            for k, task in enumerate(started)
        )
        rest = replace(job, tasks=job.tasks[len(started) :])
        progress.append(JobInProgress(rest, running, 3590.0, cluster_ids[i % 30]))
    return Workload(tuple(after)), SimulationStart(3600.0, tuple(progress))


Run = Callable[[str | None], SimulationResult]


@dataclass(frozen=True)
class Scenario:
    """``run(engine)``: the simulation on a core (``None``: the default one)."""

    name: str
    run: Run
    quick: bool = False


def on(engine: str | None) -> dict[str, Any]:
    """``simulate``'s keyword for the core (none for the default: older engines
    have no choice of core)."""
    return {} if engine is None else {"engine": engine}


def replicated(workload: Workload, copies: int) -> Workload:
    """``copies`` of every job with fresh ids, each copy shifted by a fraction of
    the mean gap between submissions (the bench's ``replicate``, written out here
    so that the old engine runs it too)."""
    span = workload.span_s
    gap = span / max(1, len(workload.jobs) - 1)
    jobs: list[JobSpec] = []
    for copy in range(copies):
        shift = gap * copy / copies
        jobs.extend(
            replace(j, id=f"{j.id}~{copy}" if copy else j.id, submit_s=j.submit_s + shift)
            for j in workload.jobs
        )
    jobs.sort(key=lambda j: j.submit_s)
    return Workload(tuple(jobs), source=workload.source)


def fidelity_scenarios(engine: str | None = None) -> SimulationResult:
    """The sim-fidelity bench's scenarios, simulated as its ``compare`` does, with
    the recorded overheads and every app submitted 2 s after its offset."""
    from yarn_adapt.bench.sim_fidelity.compare import scenario_workload
    from yarn_adapt.bench.sim_fidelity.scenarios import SCENARIOS
    from yarn_adapt.sim.calibration import RECORDED_OVERHEADS, simulation_options

    results = []
    for scenario in SCENARIOS:
        run = _fidelity_run(scenario)
        options = simulation_options(RECORDED_OVERHEADS, scenario.scheduler, seed=1)
        results.append(
            simulate(
                scenario_workload(run, RECORDED_OVERHEADS),
                scenario.config(),
                run.cluster,
                options,
                **on(engine),
            )
        )
    return _merged(results)


def _fidelity_run(scenario: Any) -> Any:
    from yarn_adapt.bench.sim_fidelity.real import RealApp, RealRun
    from yarn_adapt.model import Application, AppState, FinalStatus

    epoch = 1_800_000_000.0
    apps = []
    for i, spec in enumerate(scenario.apps):
        submitted = int((epoch + spec.offset_s + 2.0) * 1000)
        app = Application(
            id=f"application_1800000000000_{i + 1:04d}",
            name=f"t-{i}",
            user="root",
            queue=f"root.{spec.queue}",
            state=AppState.FINISHED,
            final_status=FinalStatus.SUCCEEDED,
            application_type="YARN",
            submitted_ms=submitted,
            finished_ms=submitted + 60_000,
        )
        apps.append(RealApp(spec, app, None, None))
    cluster = ClusterSpec.uniform(3, Resources(4096, 8), minimum_allocation=Resources(128, 1))
    return RealRun(scenario, tuple(apps), cluster, wall_s=60.0)


def _merged(results: Sequence[SimulationResult]) -> SimulationResult:
    first = results[0]
    return SimulationResult(
        jobs=tuple(j for r in results for j in r.jobs),
        queue_usage=first.queue_usage,
        cluster_usage=first.cluster_usage,
        utilisation=first.utilisation,
        end_s=sum(r.end_s for r in results),
        events=sum(r.events for r in results),
        preempted_containers=sum(r.preempted_containers for r in results),
        allocations=tuple(a for r in results for a in r.allocations),
    )


def _equal_share(names: Iterable[str]) -> CapacitySchedulerConfig:
    from yarn_adapt.sim.bench import equal_share_config

    return equal_share_config(list(names))


def _scenarios() -> list[Scenario]:
    preempt = PreemptionOptions(enabled=True)
    fair_preempt = PreemptionOptions(enabled=True, fair_share_timeout_s=30.0)
    calibrated = SimulationOptions(
        seed=2,
        am_startup_s=3.0,
        am_teardown_s=1.0,
        out_of_band_heartbeats=True,
        am_allocate_interval_s=1.0,
        container_start_spread_s=0.05,
        off_switch_requests=True,
    )

    def sim(
        workload: Callable[[], Workload],
        config: Callable[[], Any],
        cluster: ClusterSpec,
        options: SimulationOptions | None = None,
    ) -> Run:
        return lambda engine: simulate(workload(), config(), cluster, options, **on(engine))

    def hooked(engine: str | None) -> SimulationResult:
        workload, cluster, options = hooks_scenario()
        return simulate(workload, two_queue_capacity(), cluster, options, **on(engine))

    def started(engine: str | None) -> SimulationResult:
        workload, start = snapshot_start()
        options = SimulationOptions(seed=4, am_startup_s=2.0, preemption=preempt)
        return simulate(
            workload, two_queue_capacity(), nodes(30), options, start=start, **on(engine)
        )

    def started_fair(engine: str | None) -> SimulationResult:
        workload, start = snapshot_start()
        options = SimulationOptions(seed=4, out_of_band_heartbeats=True)
        return simulate(workload, two_queue_fair(), nodes(30), options, start=start, **on(engine))

    fb = fb_day
    equal = lambda: _equal_share(["q1", "q2"])  # noqa: E731
    drc = ("yarn.scheduler.capacity.resource-calculator", DRC)
    google = ClusterSpec.uniform(6, Resources(32768, 12))
    small_google = ClusterSpec.uniform(2, Resources(32768, 12))
    quick = [
        Scenario(
            "fb-30min-fair-drf-maxassign-preempt",
            sim(
                lambda: users(hours(fb(), 1, 1.5), 3),
                lambda: two_queue_fair("drf"),
                nodes(6),
                SimulationOptions(
                    seed=7,
                    fair_assign_multiple=True,
                    fair_dynamic_max_assign=False,
                    fair_max_assign=3,
                    preemption=fair_preempt,
                ),
            ),
            quick=True,
        ),
        Scenario(
            "fb-1h-capacity-nested-drc-users-preempt",
            sim(
                lambda: nested_queues(users(hours(fb(), 2, 3), 4)),
                lambda: nested_capacity(drc),
                nodes(8),
                SimulationOptions(seed=8, am_startup_s=1.5, preemption=preempt),
            ),
            quick=True,
        ),
        Scenario(
            "fb-20min-calibrated-options",
            sim(lambda: hours(fb(), 4, 4.34), two_queue_capacity, nodes(10), calibrated),
            quick=True,
        ),
        Scenario(
            "fb-30min-continuous",
            sim(
                lambda: hours(fb(), 8, 8.5),
                two_queue_capacity,
                nodes(10),
                SimulationOptions(heartbeat_mode=HeartbeatMode.CONTINUOUS, seed=9),
            ),
            quick=True,
        ),
        Scenario(
            "google-50-capacity-drc-preempt",
            sim(
                lambda: first_jobs(google_slice(), 50),
                lambda: two_queue_capacity(drc),
                small_google,
                SimulationOptions(seed=11, preemption=preempt),
            ),
            quick=True,
        ),
        Scenario(
            "google-25-fair-preempt",
            sim(
                lambda: first_jobs(google_slice(), 25),
                lambda: two_queue_fair("drf"),
                small_google,
                SimulationOptions(seed=12, preemption=fair_preempt, fair_assign_multiple=True),
            ),
            quick=True,
        ),
        Scenario(
            "synthetic-capacity-preempt",
            sim(contended, two_queue_capacity, nodes(8, container=SMALL), preempting(1)),
            quick=True,
        ),
        Scenario(
            "synthetic-capacity-drc-preempt",
            sim(
                contended, lambda: two_queue_capacity(drc), nodes(8, container=SMALL), preempting(2)
            ),
            quick=True,
        ),
        Scenario("hooks-placement-capacity-lras", hooked, quick=True),
        Scenario("snapshot-start-capacity-preempt", started, quick=True),
        Scenario("snapshot-start-fair-oob", started_fair, quick=True),
        Scenario("sim-fidelity-scenarios", fidelity_scenarios, quick=True),
    ]
    full = [
        Scenario("fb-day-capacity-600x8", sim(fb, equal, nodes(600))),
        Scenario(
            "fb-day-capacity-contended-preempt",
            sim(
                fb,
                two_queue_capacity,
                nodes(40),
                SimulationOptions(seed=5, am_startup_s=1.0, am_teardown_s=0.5, preemption=preempt),
            ),
        ),
        Scenario(
            "fb-day-fair-preempt-assignmultiple",
            sim(
                fb,
                two_queue_fair,
                nodes(40),
                SimulationOptions(
                    seed=6, preemption=fair_preempt, fair_assign_multiple=True, am_startup_s=1.0
                ),
            ),
        ),
        Scenario(
            "fb-6h-fair-drf-maxassign",
            sim(
                lambda: users(hours(fb(), 0, 6), 3),
                lambda: two_queue_fair("drf"),
                nodes(25),
                SimulationOptions(
                    seed=7,
                    fair_assign_multiple=True,
                    fair_dynamic_max_assign=False,
                    fair_max_assign=3,
                ),
            ),
        ),
        Scenario(
            "fb-4h-capacity-nested-drc-users",
            sim(
                lambda: nested_queues(users(hours(fb(), 2, 6), 4)),
                lambda: nested_capacity(drc),
                nodes(20),
                SimulationOptions(seed=8, am_startup_s=1.5, preemption=preempt),
            ),
        ),
        Scenario(
            "fb-4h-calibrated-options",
            sim(lambda: hours(fb(), 4, 8), two_queue_capacity, nodes(30), calibrated),
        ),
        Scenario(
            "fb-day-continuous",
            sim(
                fb,
                two_queue_capacity,
                nodes(60),
                SimulationOptions(heartbeat_mode=HeartbeatMode.CONTINUOUS, seed=9),
            ),
        ),
        Scenario(
            "fb-day-horizon-contended",
            sim(
                fb,
                equal,
                nodes(15),
                SimulationOptions(horizon_s=30_000.0, seed=10, record_allocations=True),
            ),
        ),
        Scenario(
            "google-capacity-drc-preempt",
            sim(
                google_slice,
                lambda: two_queue_capacity(drc),
                google,
                SimulationOptions(seed=11, preemption=preempt),
            ),
        ),
        Scenario(
            "google-fair-preempt",
            sim(
                google_slice,
                lambda: two_queue_fair("drf"),
                google,
                SimulationOptions(seed=12, preemption=fair_preempt, fair_assign_multiple=True),
            ),
        ),
        Scenario(
            "fb-day-replicated-x3-1800x8", sim(lambda: replicated(fb(), 3), equal, nodes(1800))
        ),
    ]
    return quick + full


SCENARIOS = _scenarios()


def fingerprint(result: SimulationResult) -> dict[str, Any]:
    """Exact figures of a result (floats as ``repr``)."""
    jobs = [
        (
            j.id,
            j.queue,
            j.user,
            repr(j.submit_s),
            repr(j.start_s),
            repr(j.finish_s),
            str(j.status),
            j.tasks,
            j.reason,
        )
        for j in result.jobs
    ]
    usage = hashlib.sha256()
    for path, series in sorted(result.queue_usage.items()):
        usage.update(path.encode())
        for array in (series.times_s, series.memory_mb, series.vcores):
            usage.update(array.tobytes())
    for array in (result.cluster_usage.times_s, result.cluster_usage.memory_mb):
        usage.update(array.tobytes())
    allocations = hashlib.sha256(repr(result.allocations).encode()).hexdigest()
    return {
        "jobs": len(jobs),
        "jobs_digest": hashlib.sha256(repr(jobs).encode()).hexdigest(),
        "events": result.events,
        "preempted": result.preempted_containers,
        "end_s": repr(result.end_s),
        "utilisation": [repr(result.utilisation.memory), repr(result.utilisation.vcores)],
        "usage_digest": usage.hexdigest(),
        "allocations": len(result.allocations),
        "allocations_digest": allocations,
        "job_rows": jobs,
    }


def dump(path: Path, names: Sequence[str], engine: str | None = None) -> None:
    out: dict[str, Any] = {}
    for scenario in SCENARIOS:
        if names and scenario.name not in names:
            continue
        began = time.process_time()
        out[scenario.name] = fingerprint(scenario.run(engine))
        cpu = time.process_time() - began
        print(
            f"{scenario.name}: {out[scenario.name]['events']} events, {cpu:.2f} s cpu", flush=True
        )
    path.write_text(json.dumps(out))


def compare(before: Path, after: Path) -> int:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    failures = 0
    for name in old:
        if name not in new:
            print(f"{name}: missing after")
            failures += 1
            continue
        differing = [k for k in old[name] if old[name][k] != new[name].get(k)]
        if differing:
            failures += 1
            print(f"{name}: DIFFERENT {differing}")
            rows_old, rows_new = old[name]["job_rows"], new[name]["job_rows"]
            for a, b in zip(rows_old, rows_new, strict=False):
                if a != b:
                    print(f"  first differing job: {a} -> {b}")
                    break
        else:
            print(f"{name}: identical ({old[name]['jobs']} jobs, {old[name]['events']} events)")
    return 1 if failures else 0


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "dump":
        dump(Path(sys.argv[2]), sys.argv[3:], os.environ.get("GOLDEN_ENGINE"))
    elif command == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(f"usage: {sys.argv[0]} dump FILE [SCENARIO...] | compare BEFORE AFTER")
