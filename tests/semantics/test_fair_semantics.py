"""The Fair Scheduler's decisions as YARN 3.4 computes them (ComputeFairShares,
FSLeafQueue.canRunAppAM, FairSharePolicy and DominantResourceFairnessPolicy's
comparators), worked by hand."""

from __future__ import annotations

import pytest

from yarn_adapt.semantics import fair as fs


@pytest.mark.parametrize(
    ("weights", "minimums", "maximums", "total", "shares"),
    [
        ((1.0, 1.0), (0.0, 0.0), (1e18, 1e18), 8192.0, [4096.0, 4096.0]),
        ((1.0, 3.0), (0.0, 0.0), (1e18, 1e18), 8192.0, [2048.0, 6144.0]),
        # a minimum above its weighted share is kept, the rest is re-divided
        ((1.0, 1.0), (6144.0, 0.0), (1e18, 1e18), 8192.0, [6144.0, 2048.0]),
        # a maximum caps, and what it leaves goes to the other
        ((1.0, 1.0), (0.0, 0.0), (1024.0, 1e18), 8192.0, [1024.0, 7168.0]),
        # weight 0 gets its minimum, maximum 0 gets nothing
        ((0.0, 1.0, 1.0), (512.0, 0.0, 0.0), (1e18, 0.0, 1e18), 8192.0, [512.0, 0.0, 7680.0]),
        # shares are floored to whole units (the cast to long), and the search settles
        # on the least ratio whose floored shares reach the total: 3 x 333 = 999 is
        # short, so YARN gives 334 each (1002 > 1000)
        ((1.0, 1.0, 1.0), (0.0, 0.0, 0.0), (1e18, 1e18, 1e18), 1000.0, [334.0, 334.0, 334.0]),
        # fractional bounds (a percentage of the cluster) are whole units, as YARN's
        # longs are: maximums 1638.4 each cap the shares at 1638
        ((1.0, 1.0), (0.0, 0.0), (1638.4, 1638.4), 8192.0, [1638.0, 1638.0]),
    ],
)
def test_fair_shares(
    weights: tuple[float, ...],
    minimums: tuple[float, ...],
    maximums: tuple[float, ...],
    total: float,
    shares: list[float],
) -> None:
    assert fs.fair_shares(weights, minimums, maximums, total) == shares


@pytest.mark.parametrize(
    ("am_used", "fair_share", "share", "allowed"),
    [
        ((0, 0), (4096.0, 4.0), 0.5, True),  # 1024 fits 2048
        ((1024, 1), (4096.0, 4.0), 0.5, True),  # 2048 fits 2048
        ((2048, 2), (4096.0, 4.0), 0.5, False),  # 3072 > 2048
        ((2048, 2), (4096.0, 4.0), -1.0, True),  # -1 disables the check
        # no fair share (memory-only policy: vcores 0): min(available, max) stands in
        ((0, 0), (4096.0, 0.0), 0.5, True),
        ((0, 0), (0.0, 0.0), 0.5, True),  # min(8192 available, 16384) x 0.5
    ],
)
def test_max_am_share(
    am_used: tuple[float, float], fair_share: tuple[float, float], share: float, allowed: bool
) -> None:
    found = fs.max_am_share_allows(
        am_used=am_used,
        am_request=(1024, 1),
        fair_share=fair_share,
        max_share=(16384.0, 16.0),
        available=(8192.0, 8.0),
        max_am_share=share,
    )
    assert found is allowed


def test_fair_share_order_needy_first_then_usage_per_weight() -> None:
    keys = {
        # below min(minShare 4096, demand 8192): needy, ratio 1024 / 4096
        "needy": fs.fair_share_key(used=1024, demand=8192, min_share=4096, weight=1, position=2),
        # min share capped by demand 1024: not needy; 1024 / weight 2 = 512
        "satisfied": fs.fair_share_key(
            used=1024, demand=1024, min_share=4096, weight=2, position=1
        ),
        "heavy": fs.fair_share_key(used=4096, demand=8192, min_share=0, weight=1, position=0),
        "zero weight": fs.fair_share_key(used=0, demand=8192, min_share=0, weight=0, position=3),
        "no demand": fs.fair_share_key(used=0, demand=0, min_share=0, weight=1, position=4),
    }
    assert sorted(keys, key=keys.__getitem__) == [
        "needy",
        "satisfied",
        "heavy",
        "zero weight",
        "no demand",
    ]


def test_drf_min_share_is_checked_on_the_dominant_resource() -> None:
    cluster = (16384.0, 16.0)
    # memory 4096 (25 %) is below its min share 8192, but vcores (8 of 16, 50 %) are
    # dominant and above the vcore min share 2: not needy under DRF -- where
    # FairSharePolicy, on memory, would call it needy.
    cpu_heavy = fs.drf_key(
        used=(4096, 8), min_share=(8192, 2), cluster=cluster, weight=1, position=0
    )
    # dominant memory 6144 (37.5 %) below its min share 8192: needy.
    memory_heavy = fs.drf_key(
        used=(6144, 1), min_share=(8192, 2), cluster=cluster, weight=1, position=1
    )
    assert memory_heavy < cpu_heavy
    assert cpu_heavy[0] == 1.0 and memory_heavy[0] == 0.0


def test_drf_order_by_dominant_share_per_weight_then_the_other() -> None:
    cluster = (16384.0, 16.0)
    a = fs.drf_key(used=(4096, 3), min_share=(0, 0), cluster=cluster, weight=1, position=0)
    b = fs.drf_key(used=(2048, 4), min_share=(0, 0), cluster=cluster, weight=1, position=1)
    c = fs.drf_key(used=(8192, 4), min_share=(0, 0), cluster=cluster, weight=2, position=2)
    # dominant shares 0.25, 0.25 and 0.5 / 2; the other share (3/16, 2/16, 4/16 / 2)
    # breaks the tie, then the position
    assert sorted([("a", a), ("b", b), ("c", c)], key=lambda kv: kv[1])[0][0] == "b"
    assert a[1] == b[1] == c[1] == 0.25


def test_a_container_must_fit_max_resources_on_both_resources() -> None:
    assert fs.fits_max_share(6144, 3, 2048, 1, 8192, 4)
    assert not fs.fits_max_share(6144, 3, 2048, 2, 8192, 4)  # vcores over
    assert not fs.fits_max_share(7168, 1, 2048, 1, 8192, 4)  # memory over


def test_max_running_apps_of_the_user_and_every_queue() -> None:
    inf = float("inf")
    assert fs.can_app_be_runnable(1, 2, [(3, 4), (9, inf)])
    assert not fs.can_app_be_runnable(2, 2, [(3, 4), (9, inf)])  # the user's limit
    assert not fs.can_app_be_runnable(0, inf, [(3, 4), (10, 10)])  # an ancestor's


@pytest.mark.parametrize(
    ("multiple", "most", "dynamic", "limit"),
    [
        (False, 10, False, 1),
        (False, 10, True, 1),
        (True, 10, False, 10),
        (True, 0, False, fs.UNLIMITED_ASSIGNMENTS),  # maxassign <= 0: no count limit
        (True, 10, True, fs.UNLIMITED_ASSIGNMENTS),  # dynamic: the amount limit instead
    ],
)
def test_assignments_per_heartbeat(multiple: bool, most: int, dynamic: bool, limit: int) -> None:
    assert (
        fs.heartbeat_assignments(assign_multiple=multiple, max_assign=most, dynamic=dynamic)
        == limit
    )


def test_dynamic_max_assign_stops_past_half_of_what_was_free() -> None:
    # a node that had 8 GiB / 8 vcores free: 4 GiB granted still "fits in" half
    assert fs.keep_assigning((4096, 2), (8192, 8))
    assert not fs.keep_assigning((5120, 2), (8192, 8))
    assert not fs.keep_assigning((2048, 5), (8192, 8))


def test_drf_ties_on_the_dominant_share_go_to_the_other_resource() -> None:
    cluster = (100 * 1024.0, 100.0)
    # both hold 10 % of memory (dominant); a holds fewer vcores, so a goes first
    a = fs.drf_key(used=(10240, 2), min_share=(0, 0), cluster=cluster, weight=1, position=1)
    b = fs.drf_key(used=(10240, 5), min_share=(0, 0), cluster=cluster, weight=1, position=0)
    assert a < b


def test_drf_weight_zero_never_gives_nan() -> None:
    cluster = (1024.0, 10.0)
    idle = fs.drf_key(used=(0, 0), min_share=(0, 0), cluster=cluster, weight=0, position=0)
    busy = fs.drf_key(used=(512, 1), min_share=(0, 0), cluster=cluster, weight=0, position=1)
    assert all(value == value for value in idle + busy)
    assert idle < busy
