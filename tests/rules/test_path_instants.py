"""Kept paths and the instants that met every ask (rules.granting._orders_matter):
under continuous timing the order the queues were served in at such an instant is
not part of the path, so a configuration that ranks the queues otherwise there
follows it -- and gets exactly what running the mix would give it."""

from __future__ import annotations

import pytest

from rules.comparator import Comparator
from rules.engine import Algorithm1
from rules.inputs import GroupConfig, GroupResources
from rules.kernels import AmLimit, NoAm, Totals
from rules.mechanism import KernelChoice
from rules.paths import Decisions
from rules.state import JobState, QueueState, plan_of
from tests.rules.factories import CONTAINER, capacity, containers, fair, job, mix
from tests.rules.pinned_scenarios import ten_jobs
from yarn_adapt.model import Resources

ROOMY = mix(
    job("a1", "a", maps=3, seconds=30.0),
    job("b1", "b", maps=4, seconds=20.0, submit=5.0),
    job("a2", "a", maps=2, seconds=12.0, submit=5.0, reduces=1),
    am=True,
)


def split(kind: str, share: float, user_limit_factor: float = 1.0) -> GroupConfig:
    if kind == "capacity":
        return capacity(
            ("a", share, 100.0),
            ("b", 100.0 - share, 100.0),
            user_limit_factor=user_limit_factor,
        )
    return fair(("a", share), ("b", 100.0 - share))


def unlimited(share: float) -> GroupConfig:
    """A Capacity split whose users may take the whole group (no limit binds)."""
    return split("capacity", share, user_limit_factor=100.0)


def recorded(config: GroupConfig, resources: GroupResources) -> Decisions:
    comparator = Comparator(ROOMY, resources)
    decisions = Decisions()
    Algorithm1(
        comparator.mechanism(config), config, ROOMY, resources, comparator.constraints,
        decisions=decisions,
    ).run()  # fmt: skip
    return decisions


def test_when_every_ask_is_met_the_queue_ranking_is_not_recorded() -> None:
    """Room for everything at once: no instant leaves an ask waiting, so no ranking
    is kept, and configurations that rank the two queues otherwise follow the
    first one's path with its very estimate."""
    roomy = containers(40)
    assert not recorded(unlimited(20.0), roomy).orders
    shared = Comparator(ROOMY, roomy)
    first = shared.estimate(unlimited(20.0))
    for share in (80.0, 50.0, 35.0):
        assert shared.estimate(unlimited(share)) == first
        assert Comparator(ROOMY, roomy).estimate(unlimited(share)) == first
    assert shared.paths_followed == 3


def test_an_instant_that_leaves_an_ask_waiting_keeps_its_ranking() -> None:
    assert recorded(unlimited(20.0), containers(4)).orders


@pytest.mark.parametrize(
    ("kind", "resources"),
    [
        ("capacity", containers(9)),
        ("capacity", containers(30)),
        ("fair", containers(12)),
        ("fair", containers(40)),
    ],
)
def test_followed_paths_give_what_a_fresh_run_gives(kind: str, resources: GroupResources) -> None:
    """Many splits through one comparator (kept paths answer some) against a fresh
    comparator for each, with AMs and two users: every estimate the same."""
    jobs = ten_jobs(5)
    shared = Comparator(jobs, resources)
    for share in (10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 85.0, 90.0, 45.0, 12.0):
        config = split(kind, share)
        assert shared.estimate(config) == Comparator(jobs, resources).estimate(config)


def test_a_grant_time_am_check_reads_the_groups_use_only_through_a_zero_fair_share() -> None:
    totals = Totals.of(Resources(8192, 8), Resources(1024, 1))
    at_grant = AmLimit(KernelChoice("am_limit", (("base", "fair_share"),)), totals)
    queue = QueueState("a", 0)
    queue.am_fraction, queue.fair_mem, queue.fair_vc = 0.5, 4096.0, 0.0
    am = JobState(0, job("j", "a"), queue, plan_of(job("j", "a"), CONTAINER, False))
    assert am.am_vc == 0 and not at_grant.reads_used(queue, am)  # memory only
    am.am_vc = 1  # an AM vcore against no vcore fair share: min(available, max)
    assert at_grant.reads_used(queue, am)
    queue.am_fraction = -1.0  # no AM limit
    assert not at_grant.reads_used(queue, am)
    queue.am_fraction, queue.fair_mem = 0.5, 0.0
    am.am_vc = 0
    assert at_grant.reads_used(queue, am)  # memory's base is the group's room
    at_activation = AmLimit(KernelChoice("am_limit", (("base", "queue_limit"),)), totals)
    assert at_activation.reads_used(queue, am)
    assert not NoAm(KernelChoice("no_am"), totals).reads_used(queue, am)
