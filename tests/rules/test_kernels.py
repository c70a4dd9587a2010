"""What each kernel the rules can choose does, on small table cases (containers of
one unit, tasks of 100 s unless said)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

import pytest

from rules.comparator import Comparator
from rules.engine import Algorithm1
from rules.inputs import NO_CONSTRAINTS, GroupConfig, JobMix, MixJob, QueueConfig, RunningTasks
from rules.paths import Decisions
from rules.state import JobState, QueueState
from tests.rules.factories import capacity, containers, fair, job, latencies, mix, run
from yarn_adapt.model import Resources
from yarn_adapt.model.fair import parse_fair_resources


def held_at(grants: list[tuple[float, str, bool]], moment: float) -> dict[str, int]:
    """Task containers granted up to ``moment`` per job."""
    counts: dict[str, int] = {}
    for time, job_id, is_am in grants:
        if time <= moment and not is_am:
            counts[job_id] = counts.get(job_id, 0) + 1
    return dict(sorted(counts.items()))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param(capacity(("q1", 25, 25), ("q2", 75, 75)), {"a": 1}, id="static-guarantee"),
        pytest.param(
            capacity(("q1", 25, 75), ("q2", 75, 75), user_limit_factor=-1),
            {"a": 3},
            id="elastic-to-maximum",
        ),
        pytest.param(
            capacity(("q1", 25, 100), ("q2", 75, 75), user_limit_factor=-1),
            {"a": 4},
            id="elastic-to-whole-group",
        ),
        pytest.param(
            capacity(("q1", 50, 100), ("q2", 50, 50)),
            {"a": 3},
            id="user-limit-factor-1-one-past-capacity",
        ),
    ],
)
def test_capacity_guarantees_elasticity_and_user_limit(
    config: GroupConfig, expected: dict[str, int]
) -> None:
    _, grants = run(config, mix(job("a", "q1", maps=8)), containers(4))
    assert held_at(grants, 0.0) == expected


def test_capacity_serves_the_least_used_over_guaranteed_queue_first() -> None:
    config = capacity(("q1", 25, 100), ("q2", 75, 100), user_limit_factor=-1)
    jobs = mix(job("a", "q1", maps=8), job("b", "q2", maps=8))
    _, grants = run(config, jobs, containers(4))
    assert held_at(grants, 0.0) == {"a": 1, "b": 3}


@pytest.mark.parametrize(
    ("weights", "expected"),
    [((1, 1), {"a": 2, "b": 2}), ((1, 3), {"a": 1, "b": 3}), ((3, 1), {"a": 3, "b": 1})],
)
def test_fair_shares_by_weight(weights: tuple[int, int], expected: dict[str, int]) -> None:
    config = fair(("q1", weights[0]), ("q2", weights[1]))
    jobs = mix(job("a", "q1", maps=8), job("b", "q2", maps=8))
    _, grants = run(config, jobs, containers(4))
    assert held_at(grants, 0.0) == expected


def test_fair_queue_below_its_min_resources_is_served_first() -> None:
    minimum = parse_fair_resources("75%")
    config = GroupConfig(
        "fair",
        (
            QueueConfig("q1", "fair", weight=1, min_resources=minimum),
            QueueConfig("q2", "fair", weight=3),
        ),
    )
    jobs = mix(job("a", "q1", maps=8), job("b", "q2", maps=8))
    _, grants = run(config, jobs, containers(4))
    assert held_at(grants, 0.0) == {"a": 3, "b": 1}


@pytest.mark.parametrize(
    ("policy", "first"),
    [("fifo", "high"), ("fair", "high"), ("lrtf", "short"), ("edf", "urgent")],
)
def test_job_policies_pick_the_first_job(policy: str, first: str) -> None:
    jobs = mix(
        job("low", "q", maps=1, submit=0.0, priority=1, deadline=500),
        job("high", "q", maps=1, submit=1.0, priority=5, deadline=400),
        job("short", "q", maps=1, seconds=10, submit=2.0, priority=1, deadline=300),
        job("urgent", "q", maps=1, submit=3.0, priority=1, deadline=50),
        job("blocker", "q", maps=0, running=(RunningTasks(1, 10.0),)),
    )
    # one container, held by a running task until 10; then the policy picks
    _, grants = run(capacity(("q", 100, 100), policy=policy), jobs, containers(1))
    after_blocker = [job_id for time, job_id, _ in grants if time == 10.0]
    if policy == "fair":  # all hold nothing: least used ties go to the earliest submitted
        first = "low"
    assert after_blocker == [first]


def _granted_at(grants: list[tuple[float, str, bool]], moment: float) -> dict[str, int]:
    return held_at([g for g in grants if g[0] == moment], moment)


def test_fair_policy_spreads_containers_fifo_does_not() -> None:
    # a holds all four until 100; then its next four compete with b's
    jobs = mix(job("a", "q", maps=8), job("b", "q", maps=4, submit=0.5))
    _, fifo_grants = run(fair(("q", 1), policy="fifo"), jobs, containers(4))
    _, fair_grants = run(fair(("q", 1), policy="fair"), jobs, containers(4))
    assert _granted_at(fifo_grants, 100.0) == {"a": 4}
    assert _granted_at(fair_grants, 100.0) == {"a": 2, "b": 2}


def test_capacity_am_limit_activates_one_job_at_a_time() -> None:
    jobs = mix(*(job(f"j{i}", "q", maps=1) for i in range(3)), am=True)
    config = capacity(("q", 100, 100))  # am share 0.1 of 8 containers: one AM
    estimate, grants = run(config, jobs, containers(8))
    assert [job_id for _, job_id, is_am in grants if is_am] == ["j0", "j1", "j2"]
    assert latencies(estimate, jobs) == {"j0": 100.0, "j1": 200.0, "j2": 300.0}


def test_a_larger_am_share_runs_jobs_side_by_side() -> None:
    jobs = mix(*(job(f"j{i}", "q", maps=1) for i in range(3)), am=True)
    config = capacity(("q", 100, 100), am_share=1.0)
    estimate, _ = run(config, jobs, containers(8))
    assert latencies(estimate, jobs) == {"j0": 100.0, "j1": 100.0, "j2": 100.0}


def test_placement_constraint_caps_a_job() -> None:
    jobs = mix(job("a", "q", maps=4, allowed_share=0.5))
    estimate, grants = run(capacity(("q", 100, 100)), jobs, containers(4))
    assert held_at(grants, 0.0) == {"a": 2}
    assert latencies(estimate, jobs) == {"a": 200.0}


def test_fair_grants_one_container_per_node_heartbeat() -> None:
    jobs = mix(job("a", "q", maps=4))
    _, on_heartbeats = run(fair(("q", 1)), jobs, containers(4, per_node=4))
    _, anywhere = run(fair(("q", 1)), jobs, containers(4))
    assert [t for t, _, _ in on_heartbeats] == [0.5, 1.5, 2.5, 3.5]
    assert [t for t, _, _ in anywhere] == [0.0] * 4


def test_capacity_grants_many_per_heartbeat_and_frees_at_the_next_one() -> None:
    jobs = mix(job("a", "q", maps=8, seconds=10.2))
    estimate, grants = run(capacity(("q", 100, 100), user_limit_factor=-1), jobs, containers(4, 4))
    assert [t for t, _, _ in grants] == [0.5] * 4 + [11.5] * 4
    assert latencies(estimate, jobs) == {"a": pytest.approx(21.7)}


def test_reduces_start_after_the_last_map() -> None:
    jobs = mix(job("a", "q", maps=2, seconds=10, reduces=1, reduce_seconds=5))
    estimate, grants = run(capacity(("q", 100, 100)), jobs, containers(1))
    assert [t for t, _, _ in grants] == [0.0, 10.0, 20.0]
    assert latencies(estimate, jobs) == {"a": 25.0}


def test_a_running_job_keeps_its_containers_until_its_tasks_end() -> None:
    running = job("r", "q", maps=1, seconds=10, running=(RunningTasks(2, 30.0),), am_running=True)
    jobs = JobMix((running, job("new", "q", maps=1, seconds=10)), am_containers=False)
    estimate, grants = run(capacity(("q", 100, 100), user_limit_factor=-1), jobs, containers(3))
    assert held_at(grants, 0.0) == {"r": 1}  # r's pending map takes the third container
    assert latencies(estimate, jobs) == {"r": 30.0, "new": 20.0}  # waits for r's map


def test_a_running_jobs_am_frees_its_node_when_the_job_ends() -> None:
    # two nodes of one container, heartbeats: "r" was running when the mix starts
    # (its AM on one node, its last map on the other); "new" needs an AM and a map.
    # When r ends, its AM's node must take containers again: before the fix an
    # adopted AM was released without its node, which stayed full for the rest of
    # the run (mid-run predictions of a backlog came out 60 % too slow).
    running = job("r", "q", maps=0, running=(RunningTasks(1, 10.0),), am_running=True)
    jobs = JobMix((running, job("new", "q", maps=1, seconds=10)), am_containers=True)
    config = GroupConfig("fair", (QueueConfig("q", "fair", weight=1, am_share=0.5),))
    estimate, grants = run(config, jobs, containers(2, per_node=1))
    assert estimate.unfinished == 0
    assert [(j, am) for _, j, am in grants] == [("new", True), ("new", False)]
    assert latencies(estimate, jobs)["new"] < 30.0


@pytest.mark.parametrize("per_node", [None, 2], ids=["anywhere", "heartbeats"])
def test_running_jobs_that_only_ask_are_scheduled_from_the_start(per_node: int | None) -> None:
    # A snapshot taken as the jobs' last containers ended: every job holds its AM and
    # asks for a map, no container is busy and nothing else arrives. Before the fix
    # no event ever came, nothing was scheduled and every configuration predicted
    # that the jobs starve (CI s1: the tuner on the real RM said "never" while YARN
    # ran them).
    asking = [job(f"r{i}", "q", maps=1, seconds=10, am_running=True) for i in range(3)]
    jobs = JobMix(tuple(asking), am_containers=True)
    estimate, grants = run(capacity(("q", 100, 100)), jobs, containers(6, per_node))
    assert estimate.unfinished == 0
    assert sorted(j for _, j, am in grants if not am) == ["r0", "r1", "r2"]
    assert all(not am for _, _, am in grants)
    assert max(latencies(estimate, jobs).values()) <= 10.0 + (0 if per_node is None else 1.0)


def test_a_job_no_node_can_hold_never_runs_and_makes_the_estimate_infinite() -> None:
    # YARN refuses an ask above the largest node; the other job is not held up
    jobs = mix(job("big", "q", maps=1, task=Resources(8192, 1)), job("ok", "q"))
    estimate, _ = run(capacity(("q", 100, 100)), jobs, containers(4))
    assert estimate.unfinished == 1
    assert math.isinf(estimate.mean_latency_s)
    assert latencies(estimate, jobs)["ok"] == 100.0


def test_a_capacity_ask_over_the_queue_limit_blocks_the_smaller_asks_behind_it() -> None:
    wide = job("wide", "q1", maps=1, task=Resources(3072, 1))
    narrow = job("narrow", "q1", maps=1, submit=1.0)
    holder = job("holder", "q1", maps=0, running=(RunningTasks(2, 50.0),))
    jobs = mix(holder, wide, narrow)
    # q1 may hold 4 of 8 GiB; 2 GiB held, "wide" needs 3 more: it waits, and so does "narrow"
    capacity_run, _ = run(
        capacity(("q1", 50, 50), ("q2", 50, 50), user_limit_factor=-1), jobs, containers(8)
    )
    fair_run, _ = run(fair(("q1", 1), ("q2", 1), policy="fifo"), jobs, containers(8))
    assert latencies(capacity_run, jobs)["narrow"] == 149.0  # after "wide" (50..150)
    assert latencies(fair_run, jobs)["narrow"] < 149.0


def test_containers_held_at_the_start_do_not_make_later_asks_look_too_big() -> None:
    holder = job("holder", "q", maps=0, running=(RunningTasks(2, 30.0),))
    jobs = mix(holder, job("later", "q", maps=1, seconds=10, task=Resources(2048, 1)))
    estimate, _ = run(capacity(("q", 100, 100), user_limit_factor=-1), jobs, containers(4, 2))
    assert estimate.unfinished == 0


def _with_two_am_sizes(jobs: Iterable[MixJob], big_every: int) -> JobMix:
    """The jobs as a mix with AM containers: one unit each, two units for every
    ``big_every``-th job (the first included)."""
    sized = (
        replace(j, am=Resources(2048, 1) if i % big_every == 0 else Resources(1024, 1))
        for i, j in enumerate(jobs)
    )
    return mix(*sized, am=True)


class _Counting(Algorithm1):
    asked = 0

    def _am_allows(self, queue: QueueState, job: JobState, used: tuple[int, int]) -> bool:
        self.asked += 1
        return super()._am_allows(queue, job, used)


class _EveryAppAsked(_Counting):
    """activateApplications as YARN writes it: every waiting app asked in turn."""

    def _activate_waiting(self, queue: QueueState) -> bool:
        used = (self.totals.memory - self.free_mem, self.totals.vcores - self.free_vc)
        kicked = False
        for waiting in list(queue.waiting):
            if self._am_allows(queue, waiting, used):
                queue.waiting.remove(waiting)
                queue.am_used_mem += waiting.am_mem
                queue.am_used_vc += waiting.am_vc
                queue.users.setdefault(waiting.user, [0, 0, 0, 0])[2] += waiting.am_mem
                kicked |= self._activate(waiting)
        return kicked


@pytest.mark.parametrize("keep_path", [False, True])
def test_skipping_apps_whose_user_was_refused_changes_no_latency(keep_path: bool) -> None:
    """A queue of waiting apps from three users, with AMs of two sizes, behind
    binding queue and user AM limits: the engine, which skips an app whose user was
    refused a no-larger AM earlier in the same pass, finishes every job exactly when
    asking each app does, with and without a kept path."""
    jobs = _with_two_am_sizes(
        (
            job(
                f"j{i}",
                "q1" if i % 3 else "q2",
                maps=2 + i % 4,
                seconds=30.0 + 7 * i,
                submit=5.0 * i,
                user=f"u{i % 3}",
            )
            for i in range(40)
        ),
        big_every=5,
    )
    config = capacity(("q1", 60, 100), ("q2", 40, 100), am_share=0.3, minimum_user_limit_percent=50)
    resources = containers(12, 4)
    comparator = Comparator(jobs, resources, NO_CONSTRAINTS)
    mechanism = comparator.mechanism(config)
    decisions = Decisions() if keep_path else None
    skipping = _Counting(mechanism, config, jobs, resources, NO_CONSTRAINTS, decisions=decisions)
    asking = _EveryAppAsked(mechanism, config, jobs, resources, NO_CONSTRAINTS)
    fast, plain = skipping.run(), asking.run()
    assert fast.latencies == plain.latencies and fast.unfinished == plain.unfinished == 0
    assert max(fast.latencies) > 2 * min(fast.latencies)  # the limits held apps back
    assert skipping.asked < asking.asked / 2


class _EveryJobSorted(Algorithm1):
    """The queue's jobs as the kernels order them, every one sorted and asked each
    time a container is handed out (the engine keeps the jobs waiting for their AM
    in key order and stops asking them once every AM left is too big)."""

    def _pick_job(self, queue: QueueState, free_mem: int, free_vc: int) -> JobState | None:
        jobs = sorted(
            (j for j in queue.active if j.awaiting_am or j.pending > 0),
            key=self.ordering[queue.position],
        )
        refused_am = math.inf
        for candidate in jobs:
            memory, vcores = candidate.request
            if candidate.awaiting_am and memory >= refused_am:
                continue
            if not self.no_user_limit and not self._user_allows(queue, candidate):
                continue
            if self._over_ceiling(queue, memory, vcores):
                if self.block_at_ceiling:
                    return None
                continue
            if candidate.used_mem + memory > candidate.cap_mem:
                continue
            am_asked = candidate.awaiting_am and self.fair_am
            if am_asked and not self._am_allows(queue, candidate, self._used()):
                refused_am = memory
                continue
            if memory > free_mem or vcores > free_vc:
                continue
            return candidate
        return None


@pytest.mark.parametrize("policy", ["fifo", "fair", "drf"])
@pytest.mark.parametrize("keep_path", [False, True])
def test_the_kept_order_of_jobs_awaiting_an_am_grants_what_sorting_all_does(
    policy: str, keep_path: bool
) -> None:
    """Fair queues behind a binding maxAMShare, with many apps waiting for AMs of two
    sizes beside apps asking for tasks: the engine grants every container to the
    same job at the same moment as sorting and asking every job does, and a kept
    path records the same decisions."""
    jobs = _with_two_am_sizes(
        (
            job(
                f"j{i}",
                "q1" if i % 3 else "q2",
                maps=1 + i % 5,
                seconds=20.0 + 9 * (i % 7),
                submit=2.0 * i,
                priority=i % 2,
                user=f"u{i % 4}",
            )
            for i in range(60)
        ),
        big_every=4,
    )
    config = fair(("q1", 2.0), ("q2", 1.0), policy=policy)
    config = replace(config, queues=tuple(replace(q, am_share=0.2) for q in config.queues))
    resources = containers(16, 4)
    mechanism = Comparator(jobs, resources, NO_CONSTRAINTS).mechanism(config)
    engines = [
        kind(
            mechanism,
            config,
            jobs,
            resources,
            NO_CONSTRAINTS,
            record=True,
            decisions=Decisions() if keep_path else None,
        )
        for kind in (Algorithm1, _EveryJobSorted)
    ]
    kept, sorting = engines[0].run(), engines[1].run()
    assert kept == sorting and kept.unfinished == 0
    assert engines[0].grants == engines[1].grants
    assert engines[0].decisions == engines[1].decisions
    assert max(kept.latencies) > 3 * min(kept.latencies)  # the AM share held apps back
