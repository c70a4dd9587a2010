"""Fair Scheduler semantics, one small hand-checked scenario per rule.

The Fair Scheduler grants one container per node heartbeat by default, so a
single node of N containers is full after N heartbeats; scenarios read the grants
once that has happened (every task runs far longer).
"""

from __future__ import annotations

import pytest

from tests.sim.factories import (
    fair_amount,
    fair_leaf,
    fair_tree,
    granted_by,
    job,
    run,
)
from yarn_adapt.model import FairQueue, Resources
from yarn_adapt.sim import JobStatus, SimulationOptions
from yarn_adapt.sim.semantics_fair import fair_shares

WITH_AMS = SimulationOptions(record_allocations=True)
INF = float("inf")


@pytest.mark.parametrize(
    ("weights", "minimums", "maximums", "total", "expected"),
    [
        ([1, 3], [0, 0], [INF, INF], 8192, [2048, 6144]),
        ([1, 1], [6000, 0], [INF, INF], 8192, [6000, 2192]),  # min share first
        ([1, 1], [0, 0], [1000, INF], 8192, [1000, 7192]),  # capped by max share
        ([1, 1], [0, 0], [1000, 1000], 8192, [1000, 1000]),  # total above all maxima
        ([0, 1], [500, 0], [INF, INF], 8192, [500, 7692]),  # weight 0 keeps its min
    ],
)
def test_fair_shares(
    weights: list[float],
    minimums: list[float],
    maximums: list[float],
    total: float,
    expected: list[float],
) -> None:
    assert fair_shares(weights, minimums, maximums, total) == expected


def test_weights_one_to_three_split_the_cluster() -> None:
    config = fair_tree(fair_leaf("a", 1), fair_leaf("b", 3))
    jobs = [job("x", "a", maps=20), job("y", "b", maps=20)]
    result = run(jobs, config, containers_per_node=8)
    assert granted_by(result, 30.0) == {"x": 2, "y": 6}


@pytest.mark.parametrize(
    ("policy", "granted"),
    [
        # fair compares memory only: b's 1 GiB containers count half of a's 2 GiB
        ("fair", {"mem-heavy": 4, "cpu-heavy": 6}),
        # drf equalises dominant shares: memory for a, vcores for b
        ("drf", {"mem-heavy": 5, "cpu-heavy": 5}),
    ],
)
def test_drf_and_fair_order_different_container_shapes(
    policy: str, granted: dict[str, int]
) -> None:
    config = fair_tree(fair_leaf("a", 1, policy), fair_leaf("b", 1, policy), root_policy=policy)
    jobs = [
        job("mem-heavy", "a", maps=20, container=Resources(2048, 1)),
        job("cpu-heavy", "b", maps=20, container=Resources(1024, 2)),
    ]
    result = run(jobs, config, containers_per_node=16)  # 16 GiB, 16 vcores
    assert granted_by(result, 60.0) == granted


@pytest.mark.parametrize(
    ("minimum", "granted"),
    [(None, {"x": 1, "y": 3}), (3, {"x": 3, "y": 1})],
)
def test_min_resources_are_served_first(minimum: int | None, granted: dict[str, int]) -> None:
    min_resources = None if minimum is None else fair_amount(1024 * minimum, minimum)
    config = fair_tree(fair_leaf("a", 1, min_resources=min_resources), fair_leaf("b", 3))
    jobs = [job("x", "a", maps=10), job("y", "b", maps=10)]
    result = run(jobs, config, containers_per_node=4)
    assert granted_by(result, 30.0) == granted


def test_max_resources_cap_a_queue_and_its_children() -> None:
    parent = FairQueue(
        "root.p",
        max_resources=fair_amount(3072, 3),
        children=(
            FairQueue("root.p.a", max_resources=fair_amount(2048, 2)),
            FairQueue("root.p.b"),
        ),
    )
    jobs = [job("x", "p.a", maps=10), job("y", "p.b", maps=10)]
    result = run(jobs, fair_tree(parent), containers_per_node=8)
    granted = granted_by(result, 30.0)
    assert granted["x"] == 2
    assert granted["x"] + granted["y"] == 3


@pytest.mark.parametrize(
    ("max_running_apps", "defaults", "second_start"),
    [
        (1, [], 100.0),
        (None, [("queueMaxAppsDefault", "1")], 100.0),
        (None, [("userMaxAppsDefault", "1")], 100.0),
        (None, [], 0.0),
    ],
)
def test_max_running_apps_hold_apps_back(
    max_running_apps: int | None, defaults: list[tuple[str, str]], second_start: float
) -> None:
    config = fair_tree(fair_leaf("a", max_running_apps=max_running_apps), defaults=defaults)
    jobs = [job("first", "a", duration=100), job("second", "a", duration=100)]
    result = run(jobs, config, containers_per_node=4)
    start = result.job("second").start_s
    assert start is not None
    assert second_start <= start < second_start + 5.0


@pytest.mark.parametrize(
    ("max_am_share", "started_at_once"),
    [(0.2, 2), (0.5, 4), (-1.0, 4)],
)
def test_max_am_share_limits_running_ams(max_am_share: float, started_at_once: int) -> None:
    config = fair_tree(fair_leaf("a", max_am_share=max_am_share))
    jobs = [job(f"j{i}", "a", duration=100) for i in range(4)]
    result = run(jobs, config, containers_per_node=10, options=WITH_AMS)
    early = [j for j in result.jobs if (j.start_s or 0.0) < 50.0]
    assert len(early) == started_at_once


def test_unknown_queue_is_created_under_root() -> None:
    result = run([job("x", "adhoc")], fair_tree(fair_leaf("a")))
    assert result.job("x").status is JobStatus.FINISHED
    assert result.job("x").queue == "root.adhoc"
    assert "root.adhoc" in result.queue_usage


def test_queue_under_a_leaf_is_rejected() -> None:
    result = run([job("x", "a.b")], fair_tree(fair_leaf("a")))
    assert result.job("x").status is JobStatus.REJECTED


def test_drf_min_share_is_not_capped_by_demand() -> None:
    # a (min 8 GiB, asks 4 GiB) and b (min 4 GiB) are both below their min shares;
    # YARN orders them by usage / min share (DominantResourceFairnessComparator2: no
    # cap by demand), so a at 2/8 ties b at 1/4 and wins by name: a, b, a, a. Capping
    # a's min share by its 4 GiB demand would alternate a, b, a, b.
    config = fair_tree(
        fair_leaf("a", 1, policy="drf", min_resources=fair_amount(8192, 8)),
        fair_leaf("b", 1, policy="drf", min_resources=fair_amount(4096, 4)),
        root_policy="drf",
    )
    result = run([job("x", "a", maps=4), job("y", "b", maps=20)], config, containers_per_node=10)
    assert granted_by(result, 4.0) == {"x": 3, "y": 1}
