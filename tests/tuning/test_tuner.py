"""The tuner: triggers (§3.1), proposals that YARN's rules accept, predictions that
favour the configuration the comparator finds better, the cluster-level split, and
states read from a simulator or a snapshot."""

from __future__ import annotations

import gc
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from distributed import LocalCluster

from rules.comparator import Comparator
from rules.inputs import GroupConfig, GroupResources, JobMix, MixJob, QueueConfig, RunningTasks
from tests.tuning.factories import CONTAINER, sleep_model, spec
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    Application,
    AppState,
    CapacityQueue,
    CapacitySchedulerConfig,
    ClusterInfo,
    ClusterMetrics,
    ClusterSnapshot,
    FairQueue,
    FairSchedulerConfig,
    FinalStatus,
    HAState,
    JobSpec,
    Node,
    NodeState,
    Percentage,
    QueueStatus,
    Resources,
    SchedulerConfig,
    SchedulerKind,
    SchedulerStatus,
    TaskSpec,
    TaskType,
)
from yarn_adapt.semantics.capacity import maximum_applications
from yarn_adapt.sim import JobInProgress, SimulationStart
from yarn_adapt.tuning import tuner as tuner_module
from yarn_adapt.tuning.apply import apply_ratios, groups_of
from yarn_adapt.tuning.bridge import GroupBase
from yarn_adapt.tuning.cli_support import proposal_xml, render_proposal
from yarn_adapt.tuning.executors import open_executor
from yarn_adapt.tuning.group_tuning import AppLimits
from yarn_adapt.tuning.paper import PaperCluster, capacity_base, fair_base
from yarn_adapt.tuning.proposal import GroupDecision, finish_proposal
from yarn_adapt.tuning.settings import TunerSettings
from yarn_adapt.tuning.space import GroupSetting, QueueSetting, Scheduler, SpaceSettings
from yarn_adapt.tuning.split import group_bounds, spread_leftover
from yarn_adapt.tuning.state import (
    TuningState,
    group_share,
    in_progress_count,
    state_from_snapshot,
    state_mix,
)
from yarn_adapt.tuning.tuner import propose
from yarn_adapt.yarn.confxml import parse_capacity_xml, parse_fair_xml, validate, yarn_refuses

SETTINGS = TunerSettings(interval_s=60.0, space=SpaceSettings(d=5), levels=4)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return sleep_model()


def state(*jobs: JobSpec, now: float = 100.0, containers: int = 8) -> TuningState:
    start = SimulationStart(now, tuple(JobInProgress(j) for j in jobs))
    return TuningState(now, start, PaperCluster(containers).spec())


def static_capacity(q1: float) -> CapacitySchedulerConfig:
    leaves = (
        CapacityQueue("root.q1", capacity=Percentage(q1), maximum_capacity=Percentage(q1)),
        CapacityQueue(
            "root.q2", capacity=Percentage(100 - q1), maximum_capacity=Percentage(100 - q1)
        ),
    )
    return CapacitySchedulerConfig(CapacityQueue("root", children=leaves))


def test_a_starved_busy_queue_gets_more_capacity(model) -> None:  # type: ignore[no-untyped-def]
    current = static_capacity(10)  # q1 holds at most one of eight containers
    jobs = [spec(f"j{i}", "q1", 90.0 + i) for i in range(4)]
    proposal = propose(state(*jobs), current, model, SETTINGS)
    assert proposal.changed
    root = proposal.groups[0]
    assert root.triggered and root.after_s < root.before_s
    new_q1 = proposal.config.find("root.q1")
    assert new_q1 is not None and new_q1.capacity.percent > 10  # type: ignore[union-attr]
    assert proposal.cluster_after_s < proposal.cluster_before_s
    assert len(proposal.reasons) == len(proposal.changes)


@pytest.mark.parametrize("base", [capacity_base(["q1", "q2"]), fair_base(["q1", "q2"])])
def test_proposals_validate_and_render_as_yarn_files(model, base) -> None:  # type: ignore[no-untyped-def]
    jobs = [spec("a", "q1", 95.0, maps=8), spec("b", "q2", 99.0, maps=2, seconds=10)]
    proposal = propose(state(*jobs), base, model, SETTINGS)
    assert not yarn_refuses(validate(proposal.config, base))
    text = proposal_xml(proposal)
    parse = parse_capacity_xml if isinstance(base, CapacitySchedulerConfig) else parse_fair_xml
    assert parse(text).config == proposal.config
    assert "Predicted mean job latency" in render_proposal(proposal)


def test_a_group_whose_every_candidate_predicts_alike_says_so(model) -> None:  # type: ignore[no-untyped-def]
    """One small job on a large cluster: whatever the split, it runs at once."""
    current = static_capacity(50)
    small = propose(state(spec("j", "q1", 95.0, maps=1), containers=64), current, model, SETTINGS)
    root = small.groups[0]
    assert root.triggered and root.indifferent and not root.changed
    assert root.evaluations > 1 and root.worst_s == root.before_s
    assert "does not matter at its current resources" in root.reason
    busy = [spec(f"j{i}", "q1", 90.0 + i) for i in range(4)]
    starved = propose(state(*busy), static_capacity(10), model, SETTINGS).groups[0]
    assert not starved.indifferent and starved.worst_s > starved.after_s


def test_a_group_given_one_container_of_a_large_cluster_keeps_a_valid_share() -> None:
    """Algorithm 3 may give a group 1 of 48,000 containers (0.002 %): its capacity
    must not round to 0 %, which YARN refuses for a parent with children (the tuner
    would then drop every group's change)."""
    groups = tuple(
        CapacityQueue(
            f"root.g{i}",
            capacity=Percentage(share),
            children=(CapacityQueue(f"root.g{i}.g{i}q1", capacity=Percentage(100.0)),),
        )
        for i, share in enumerate((50.0, 50.0))
    )
    current = CapacitySchedulerConfig(CapacityQueue("root", children=groups))
    proposed = apply_ratios(current, {"root.g0": 1 / 48_000, "root.g1": 1 - 1 / 48_000})
    tiny = proposed.find("root.g0")
    assert isinstance(tiny, CapacityQueue) and isinstance(tiny.capacity, Percentage)
    assert 100 / 48_000 < tiny.capacity.percent < 100 / 48_000 + 1e-5  # 0.002084 %
    assert not yarn_refuses(validate(proposed, current))


@pytest.mark.parametrize("scheduler", ["capacity", "fair"])
def test_cluster_shares_read_back_the_containers_algorithm3_gave(scheduler: str) -> None:
    """500 groups of a 6,400-container cluster, most given 2 to 9 containers: each
    group's written share, read back as the tuner reads it (a floor of share x
    cluster), holds every container it was given -- at 0.01 % a group of 2 read back
    1.92 (its AM alone), and Fair weights at 10^-4 read back 1.9968."""
    rng = np.random.default_rng(7)
    counts = [int(c) for c in rng.integers(2, 10, size=499)]
    counts.append(6_400 - sum(counts))
    names = [f"root.g{i}" for i in range(len(counts))]
    if scheduler == "capacity":
        current: SchedulerConfig = CapacitySchedulerConfig(
            CapacityQueue(
                "root",
                children=tuple(
                    CapacityQueue(n, capacity=Percentage(0.2), children=(CapacityQueue(f"{n}.q"),))
                    for n in names
                ),
            )
        )
    else:
        groups = tuple(FairQueue(n, children=(FairQueue(f"{n}.q"),)) for n in names)
        current = FairSchedulerConfig(FairQueue("root", children=groups))
    proposed = apply_ratios(current, {n: c / 6_400 for n, c in zip(names, counts, strict=True)})
    read = [math.floor(6_400 * group_share(proposed, group)) for group in groups_of(proposed)]
    given = dict(zip(names, counts, strict=True))
    short = {
        g.parent: (r, given[g.parent])
        for g, r in zip(groups_of(proposed), read, strict=True)
        if r < given[g.parent] and g.parent != names[-1]
    }
    assert not short
    assert read[-1] >= counts[-1] - 1  # the largest gives up at most a fraction


def test_a_pass_keeps_the_heap_out_of_full_collections_and_gives_it_back(
    model, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Within a pass the collector leaves what existed before out of its full
    collections (gc.freeze); after it, and after a pass that fails, nothing stays
    frozen."""
    frozen_during: list[int] = []
    measured = tuner_module._tune_group

    def tune_group(work):  # type: ignore[no-untyped-def]
        frozen_during.append(gc.get_freeze_count())
        return measured(work)

    monkeypatch.setattr(tuner_module, "_tune_group", tune_group)
    jobs = [spec(f"j{i}", "q1", 90.0 + i) for i in range(4)]
    assert propose(state(*jobs), static_capacity(10), model, SETTINGS).changed
    assert frozen_during and min(frozen_during) > 1000
    assert gc.get_freeze_count() == 0

    def fails(work):  # type: ignore[no-untyped-def]
        raise SettingsError("a group that cannot be tuned")

    monkeypatch.setattr(tuner_module, "_tune_group", fails)
    with pytest.raises(SettingsError):
        propose(state(*jobs), static_capacity(10), model, SETTINGS)
    assert gc.get_freeze_count() == 0


def test_a_group_without_new_submissions_is_not_retuned(model) -> None:  # type: ignore[no-untyped-def]
    current = static_capacity(10)
    old = [spec(f"j{i}", "q1", 10.0 + i) for i in range(4)]  # submitted long before the interval
    proposal = propose(state(*old), current, model, SETTINGS)
    assert not proposal.changed
    assert proposal.groups[0].triggered is False
    assert "no job submitted" in proposal.groups[0].reason


def test_a_frozen_group_is_left_alone(model) -> None:  # type: ignore[no-untyped-def]
    current = static_capacity(10)
    jobs = [spec(f"j{i}", "q1", 95.0) for i in range(4)]
    proposal = propose(state(*jobs), current, model, SETTINGS, frozen=frozenset({"root"}))
    assert not proposal.changed
    assert "frozen" in proposal.groups[0].reason


def two_groups() -> CapacitySchedulerConfig:
    def group(name: str) -> CapacityQueue:
        leaves = tuple(
            CapacityQueue(
                f"root.{name}.{name}{i}", capacity=Percentage(50), maximum_capacity=Percentage(100)
            )
            for i in (1, 2)
        )
        return CapacityQueue(
            f"root.{name}",
            capacity=Percentage(50),
            maximum_capacity=Percentage(50),
            children=leaves,
        )

    return CapacitySchedulerConfig(CapacityQueue("root", children=(group("a"), group("b"))))


def _with_leaves(config: CapacitySchedulerConfig, group: str, shares: tuple[float, float]):  # type: ignore[no-untyped-def]
    parent = config.find(group)
    assert isinstance(parent, CapacityQueue)
    leaves = tuple(
        replace(leaf, capacity=Percentage(share))
        for leaf, share in zip(parent.children, shares, strict=True)
    )
    return config.with_queue(replace(parent, children=leaves))


def _decision(group: str, shares: tuple[float, float]) -> GroupDecision:
    leaf = f"{group}.{group[-1]}"
    queues = tuple(
        QueueSetting(f"{leaf}{i}", share, "fifo") for i, share in zip((1, 2), shares, strict=True)
    )
    setting = GroupSetting(Scheduler.CAPACITY, group, queues)
    return GroupDecision(group, (), True, "tuned", 3, 10.0, 5.0, setting)


def test_a_group_yarn_would_refuse_keeps_its_queues_and_the_others_still_change() -> None:
    """One group's refused change (its leaves no longer add up to 100 %) is left
    out; another group's valid change and the cluster-level split stay."""
    current = two_groups()
    root_a = current.find("root.a")
    assert isinstance(root_a, CapacityQueue)
    split = current.with_queue(replace(root_a, capacity=Percentage(60)))
    root_b = split.find("root.b")
    assert isinstance(root_b, CapacityQueue)
    split = split.with_queue(replace(root_b, capacity=Percentage(40)))
    proposed = _with_leaves(_with_leaves(split, "root.a", (30, 30)), "root.b", (70, 30))
    assert yarn_refuses(validate(proposed, current))
    decisions = [_decision("root.a", (30, 30)), _decision("root.b", (70, 30))]
    proposal = finish_proposal(current, proposed, decisions)
    assert not yarn_refuses(validate(proposal.config, current))
    changed = {c.queue for c in proposal.changes}
    assert {"root.a", "root.b", "root.b.b1", "root.b.b2"} <= changed
    assert not {"root.a.a1", "root.a.a2"} & changed
    refused, kept = proposal.groups
    assert refused.setting is None and "YARN would refuse" in refused.reason
    assert refused.after_s == refused.before_s
    assert kept.setting is not None and kept.after_s == 5.0


def test_when_refusals_name_no_group_every_group_keeps_its_queues() -> None:
    current = two_groups()
    proposed = _with_leaves(_with_leaves(current, "root.a", (60, 40)), "root.b", (70, 30))
    root_b = proposed.find("root.b")
    assert isinstance(root_b, CapacityQueue)
    proposed = proposed.with_queue(replace(root_b, capacity=Percentage(20)))  # root: 70 %
    assert yarn_refuses(validate(proposed, current))
    decisions = [_decision("root.a", (60, 40)), _decision("root.b", (70, 30))]
    proposal = finish_proposal(current, proposed, decisions)
    assert not proposal.changes
    assert all(d.setting is None for d in proposal.groups)


def test_algorithm3_moves_cluster_share_to_the_loaded_group(model) -> None:  # type: ignore[no-untyped-def]
    current = two_groups()
    jobs = [spec(f"a{i}", "a1", 95.0, maps=8) for i in range(4)] + [spec("b", "b1", 99.0, maps=1)]
    proposal = propose(state(*jobs, containers=16), current, model, SETTINGS)
    a = proposal.config.find("root.a")
    assert a is not None and a.capacity.percent > 50  # type: ignore[union-attr]
    assert not yarn_refuses(validate(proposal.config, current))
    assert any("Algorithm 3" in r for r in proposal.reasons)


def test_no_leaf_is_left_admitting_fewer_applications_than_it_holds(model) -> None:  # type: ignore[no-untyped-def]
    """maximum-applications follows a leaf's absolute capacity (24 x it here): a
    share Algorithm 3 or the group search would give a1 that admits too few
    applications for its 3 jobs and a burst more makes YARN refuse submissions, so
    the tuner predicts it never finishes them and keeps a1 above it (without the
    limit a1 got 1/2 of 1/3: 1 app)."""
    limited = replace(
        two_groups(), global_properties=(("yarn.scheduler.capacity.maximum-applications", "24"),)
    )
    jobs = [spec(f"a{i}", "a1", 95.0 + i, maps=1, seconds=5) for i in range(3)]
    jobs += [spec(f"b{i}", "b1", 95.0 + i, maps=8) for i in range(4)]
    proposal = propose(state(*jobs, containers=16), limited, model, SETTINGS)
    a, a1 = proposal.config.find("root.a"), proposal.config.find("root.a.a1")
    assert isinstance(a, CapacityQueue) and isinstance(a1, CapacityQueue)
    absolute = a.capacity.percent / 100 * a1.capacity.percent / 100  # type: ignore[union-attr]
    assert maximum_applications(None, 24, absolute) >= 6  # twice its jobs: room for a burst
    b = proposal.config.find("root.b")
    assert b is not None and b.capacity.percent > 50  # type: ignore[union-attr]


def test_yarns_own_admission_rule_is_headroom_one() -> None:
    """app_headroom 1.0 asks what YARN asks (no fewer applications than the jobs in
    view, exactly); the tuner's default asks twice as many, at least two more."""
    config = GroupConfig("capacity", (QueueConfig("a1", "fifo", capacity=50.0),))
    exact = AppLimits(cluster_units=100, system=100, own={}, apps={"a1": 5}, headroom=1.0)
    margin = replace(exact, headroom=2.0)
    assert not exact.refuses(config, 10)  # 100 x 10 % x 50 % = 5 apps for 5 jobs
    assert exact.refuses(config, 9)  # 4 apps
    assert margin.refuses(config, 10) and not margin.refuses(config, 21)  # 10 apps
    with pytest.raises(SettingsError, match="app_headroom"):
        TunerSettings(app_headroom=0.5)


def test_a_group_algorithm3_moves_runs_the_configuration_its_curve_assumed(model) -> None:  # type: ignore[no-untyped-def]
    """Algorithm 3 gives a group the containers its curve priced with that level's
    best configuration: the proposal carries that configuration (or keeps the running
    one when it predicts as well there), and the group's predicted latency is what
    the comparator says of the proposed configuration at those containers."""
    current = two_groups()
    jobs = [spec(f"a{i}", "a1", 95.0, maps=8) for i in range(4)] + [spec("b", "b1", 99.0, maps=1)]
    tuning_state = state(*jobs, containers=16)
    proposal = propose(tuning_state, current, model, SETTINGS)
    moved = [d for d in proposal.groups if "Algorithm 3 gives it" in d.reason]
    assert moved, [d.reason for d in proposal.groups]
    for decision in moved:
        group = next(g for g in groups_of(current) if g.parent == decision.group)
        given = int(re.search(r"at the (\d+) containers", decision.reason).group(1))  # type: ignore[union-attr]
        mix = state_mix(tuning_state, model, group.leaf_names, SETTINGS)
        unit = tuning_state.cluster.minimum_allocation
        resources = GroupResources(Resources(given * unit.memory_mb, given * unit.vcores), unit)
        config = GroupBase.of(proposal.config, group).config
        comparator = Comparator(mix, resources, uncertainty=SETTINGS.uncertainty)
        assert comparator.latency(config) == pytest.approx(decision.after_s, rel=1e-9)


@pytest.mark.parametrize("executor", ["serial", "process:2", "dask"])
def test_the_cluster_curves_in_parallel_give_the_inline_proposal(model, executor) -> None:  # type: ignore[no-untyped-def]
    """The groups' searches at every resource level run serially, on a process pool or
    on a Dask cluster (tuner, comparator and compiled mechanism go to the workers) and
    agree with the inline pass."""
    current = two_groups()
    jobs = [spec(f"a{i}", "a1", 95.0, maps=8) for i in range(4)] + [spec("b", "b1", 99.0, maps=1)]
    tuning_state = state(*jobs, containers=16)
    inline = propose(tuning_state, current, model, SETTINGS)
    if executor == "dask":
        with LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=1, threads_per_worker=2, processes=False, protocol="tcp",
            host="127.0.0.1", dashboard_address=None,
        ) as cluster:  # fmt: skip
            address = cluster.scheduler_address.replace("tcp://", "dask://")
            with open_executor(address) as handle:
                parallel = propose(tuning_state, current, model, SETTINGS, executor=handle)
    else:
        with open_executor(executor) as handle:
            parallel = propose(tuning_state, current, model, SETTINGS, executor=handle)
    assert parallel.config == inline.config
    assert parallel.reasons == inline.reasons


def mix_job(job_id: str, queue: str, maps: int, running: int = 0) -> MixJob:
    started = (RunningTasks(running, 10.0),) if running else ()
    return MixJob(job_id, queue, 0.0, (((maps, 30.0),),), running=started)


@pytest.mark.parametrize(
    ("jobs", "am_containers", "pool", "bounds"),
    [
        # 3 AMs + a task per queue; every AM and the widest stages at once: 3 + 8 + 8 + 1
        ([("a", "q1", 8, 0), ("b", "q1", 8, 0), ("c", "q2", 1, 0)], True, 40, (5, 20)),
        ([("a", "q1", 8, 0), ("b", "q1", 8, 0), ("c", "q2", 1, 0)], False, 40, (2, 17)),
        ([("a", "q1", 8, 0), ("b", "q1", 8, 0), ("c", "q2", 1, 0)], True, 16, (5, 16)),
        ([("a", "q1", 8, 0), ("b", "q1", 8, 0), ("c", "q2", 1, 0)], True, 3, (3, 3)),
        ([("a", "q1", 2, 3)], True, 40, (2, 6)),  # running tasks hold containers too
    ],
)
def test_algorithm3_bounds_are_an_am_per_job_and_demand_saturation(
    jobs: list[tuple[str, str, int, int]], am_containers: bool, pool: int, bounds: tuple[int, int]
) -> None:
    mix = JobMix(tuple(mix_job(*job) for job in jobs), am_containers=am_containers)
    found = group_bounds(mix, Resources(1024, 1), pool)
    assert (found.lower, found.upper) == bounds


def test_algorithm3_gives_a_saturated_group_no_more_than_it_can_use(model) -> None:  # type: ignore[no-untyped-def]
    current = two_groups()
    jobs = [spec(f"a{i}", "a1", 95.0, maps=8) for i in range(4)] + [spec("b", "b1", 99.0, maps=1)]
    proposal = propose(state(*jobs, containers=16), current, model, SETTINGS)
    b = proposal.config.find("root.b")
    assert b is not None and b.capacity.percent <= 100 * 2 / 16 + 0.01  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("chosen", "uppers", "pool", "spread"),
    [
        ({"a": 10, "b": 4}, {"a": 32, "b": 4}, 32, {"a": 28.0, "b": 4.0}),  # b is saturated
        ({"a": 6, "b": 2}, {"a": 12, "b": 12}, 16, {"a": 12.0, "b": 4.0}),  # in proportion
        ({"a": 3, "b": 1}, {"a": 3, "b": 1}, 8, {"a": 6.0, "b": 2.0}),  # all saturated
        ({"a": 5, "b": 3}, {"a": 9, "b": 9}, 8, {"a": 5.0, "b": 3.0}),  # nothing left over
    ],
)
def test_containers_no_group_needs_go_to_groups_below_saturation(
    chosen: dict[str, int], uppers: dict[str, int], pool: int, spread: dict[str, float]
) -> None:
    assert spread_leftover(chosen, uppers, pool) == spread


def snapshot(now_ms: int) -> ClusterSnapshot:
    resources = Resources(4096, 2)
    nodes = tuple(
        Node(f"n{i}:8041", f"n{i}", "/rack", NodeState.RUNNING, resources, resources)
        for i in range(4)
    )
    apps = (
        Application(
            "app_1",
            "sleep",
            "alice",
            "root.q1",
            AppState.RUNNING,
            FinalStatus.UNDEFINED,
            "MAPREDUCE",
            now_ms - 50_000,
            now_ms - 49_000,
            progress=50.0,
            running_containers=3,
        ),
        Application(
            "app_2",
            "sleep",
            "bob",
            "root.q1",
            AppState.ACCEPTED,
            FinalStatus.UNDEFINED,
            "MAPREDUCE",
            now_ms - 10_000,
        ),
        Application(
            "app_0",
            "sleep",
            "bob",
            "root.q2",
            AppState.FINISHED,
            FinalStatus.SUCCEEDED,
            "MAPREDUCE",
            now_ms - 90_000,
            now_ms - 89_000,
            now_ms - 60_000,
        ),
    )
    metrics = ClusterMetrics(
        3, 1, 1, 1, 0, 0, resources, resources, resources, Resources(0, 0), 3, 0, 4, 4, 0, 0
    )
    info = ClusterInfo("c", "STARTED", HAState.ACTIVE, "3.4.3", "3.4.3", 0)
    scheduler = SchedulerStatus(SchedulerKind.CAPACITY, QueueStatus("root"))
    return ClusterSnapshot(now_ms, info, metrics, scheduler, nodes, apps)


def test_state_from_a_snapshot_keeps_unfinished_apps_with_history_shapes() -> None:
    history = [spec("old", "q1", 0.0, maps=6)]
    history[0] = JobSpec("old", 0.0, "q1", history[0].tasks, name="sleep")
    found = state_from_snapshot(snapshot(1_000_000), history, CONTAINER)
    jobs = {p.job.id: p for p in found.start.jobs}
    assert set(jobs) == {"app_1", "app_2"}
    assert len(jobs["app_2"].job.tasks) == 6 and jobs["app_2"].am_started_s is None
    # half done: 3 of 6 started, two of them still running (3 containers - the AM)
    assert len(jobs["app_1"].running) == 2 and len(jobs["app_1"].job.tasks) == 3
    assert found.cluster.total == Resources(4 * 4096, 8)
    assert math.isclose(found.now_s, 1000.0)


@pytest.mark.parametrize(
    ("reported", "expected"),
    [(Resources(128, 1), Resources(128, 1)), (None, Resources(1024, 1))],
)
def test_the_state_rounds_requests_to_the_rms_minimum_allocation(
    reported: Resources | None, expected: Resources
) -> None:
    """The RM's minimum allocation, else YARN's default: a 256 MB AM counted as 1 GB
    filled a 30 % queue's user limit in the model, and the running configuration
    predicted that four small jobs starve."""
    base = snapshot(1_000_000)
    scheduler = replace(base.scheduler, minimum_allocation=reported)
    found = state_from_snapshot(replace(base, scheduler=scheduler), [], CONTAINER)
    assert found.cluster.minimum_allocation == expected


def test_a_running_apps_sizes_are_what_the_rm_says_it_holds_not_its_templates() -> None:
    """Four 256 MB distributed-shell AMs once borrowed a MapReduce job's 1.5 GB AM
    (the latest finished job of any name), which filled their queue's user limit in
    the model."""
    now_ms = 1_000_000
    base = snapshot(now_ms)
    template = JobSpec(
        "mr", 0.0, "q1", (TaskSpec(TaskType.MAP, 5.0, Resources(1024, 1)),),
        name="Sleep job", am_resources=Resources(1536, 1),
    )  # fmt: skip

    def app(app_id: str, containers: int, held: Resources) -> Application:
        return Application(
            app_id, "shell", "u", "root.q1", AppState.RUNNING, FinalStatus.UNDEFINED,
            "YARN", now_ms - 5_000, now_ms - 4_000,
            allocated=held, running_containers=containers,
        )  # fmt: skip

    apps = (
        app("am_only", 1, Resources(256, 1)),
        app("busy", 3, Resources(768, 3)),
        app("unreported", 2, Resources(0, 0)),
    )
    found = state_from_snapshot(replace(base, apps=apps), [template], CONTAINER)
    jobs = {p.job.id: p.job for p in found.start.jobs}
    assert jobs["am_only"].am_resources == Resources(256, 1)
    assert [t.resources for t in jobs["am_only"].tasks] == [Resources(1024, 1)]
    # a borrowed shape with several containers: each the size the app holds on average
    assert jobs["busy"].am_resources == Resources(256, 1)
    assert {t.resources for t in jobs["busy"].tasks} <= {Resources(256, 1)}
    # the RM said nothing of what it holds: the template's sizes
    assert jobs["unreported"].am_resources == Resources(1536, 1)


def test_the_forecast_brings_the_recent_submissions_again_intervals_ahead(model) -> None:  # type: ignore[no-untyped-def]
    """With ``forecast``, the jobs submitted in the last interval come again one
    interval on (and with ``forecast_intervals=3`` also two and three intervals on),
    only in the group whose leaves they were submitted to; without it the mix is the
    jobs in progress alone."""
    running = spec("run", "a1", 95.0)
    recent = (spec("new-a", "a2", 90.0, maps=2), spec("new-b", "b1", 80.0))
    start = SimulationStart(100.0, (JobInProgress(running),))
    tuning_state = TuningState(100.0, start, PaperCluster(8).spec(), recent)
    leaves = ("a1", "a2")
    plain = state_mix(tuning_state, model, leaves, TunerSettings())
    assert [j.id for j in plain.jobs] == ["run"]
    once = state_mix(tuning_state, model, leaves, TunerSettings(forecast=True, interval_s=60.0))
    assert [(j.id, j.submit_s) for j in once.jobs] == [("run", 95.0), ("new-a+next", 150.0)]
    ahead = TunerSettings(forecast=True, interval_s=60.0, forecast_intervals=3)
    thrice = state_mix(tuning_state, model, leaves, ahead)
    assert [(j.id, j.submit_s) for j in thrice.jobs[1:]] == [
        ("new-a+next", 150.0),
        ("new-a+next2", 210.0),
        ("new-a+next3", 270.0),
    ]
    assert thrice.jobs[3].stages == once.jobs[1].stages  # the same job, later
    with pytest.raises(SettingsError, match="forecast_intervals"):
        TunerSettings(forecast=True, forecast_intervals=0)


def test_a_groups_mix_keeps_the_order_its_jobs_have_in_the_state(model) -> None:  # type: ignore[no-untyped-def]
    """Jobs of one group's two leaves, interleaved with another group's in the state
    (a leaf named by its full path or alone): the group's mix and its count of jobs
    in progress hold exactly its jobs, in the state's order."""
    queues = ("root.a.a1", "b1", "a2", "root.a.a1", "root.b.b1", "root.a.a2")
    tuning_state = state(*(spec(f"j{i}", q, float(i)) for i, q in enumerate(queues)))
    mix = state_mix(tuning_state, model, ("a2", "a1"), TunerSettings())
    assert [j.id for j in mix.jobs] == ["j0", "j2", "j3", "j5"]
    assert in_progress_count(tuning_state, ["a1", "a2", "a1"]) == 4
    assert in_progress_count(tuning_state, ["nowhere"]) == 0
