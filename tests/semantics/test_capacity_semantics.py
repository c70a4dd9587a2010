"""The Capacity Scheduler's decisions as YARN 3.4 computes them, worked by hand from
Hadoop's formulas (UsersManager.computeUserLimit, AbstractLeafQueue's AM limits and
activateApplications, PriorityUtilizationQueueOrderingPolicy)."""

from __future__ import annotations

import pytest

from yarn_adapt.semantics import capacity as cs

STEP = 1024


@pytest.mark.parametrize(
    ("case", "kwargs", "limit"),
    [
        # one active user, queue below its guarantee: the even split of (used + step)
        # is 2048 + 1024 = 3072, the minimum-user-limit term 100 % of 8192 = 8192;
        # capped by capacity x factor 1 = 8192.
        (
            "one user below capacity",
            {"queue_used": 2048, "active_used": 2048, "active_users": 1},
            8192,
        ),
        # over the guarantee: current = used + step = 9216; capped by 8192 x 1.
        (
            "one user over capacity",
            {"queue_used": 8192, "active_used": 8192, "active_users": 1},
            8192,
        ),
        # factor 2 lifts the cap to 16384: the limit is current = 9216.
        (
            "factor two",
            {"queue_used": 8192, "active_used": 8192, "active_users": 1, "user_limit_factor": 2.0},
            9216,
        ),
        # two active users at 50 %: max(ceil((6144 + 1024) / 2), 50 % x 8192) = 4096
        (
            "two users, half each",
            {
                "queue_used": 6144,
                "active_used": 6144,
                "active_users": 2,
                "minimum_user_limit_percent": 50,
            },
            4096,
        ),
        # a user that asks for nothing holds 4096 but is not active: only the active
        # user's 2048 is split (ceil((2048 + 1024) / 1) = 3072 -> rounded 3072), the
        # 50 % term gives 4096
        (
            "an inactive user does not count",
            {
                "queue_used": 6144,
                "active_used": 2048,
                "active_users": 1,
                "minimum_user_limit_percent": 50,
            },
            4096,
        ),
        # factor -1: the queue's maximum caps the user instead of capacity x factor
        (
            "factor -1",
            {
                "queue_used": 12288,
                "active_used": 12288,
                "active_users": 1,
                "user_limit_factor": -1,
                "queue_maximum": 16384,
            },
            13312,
        ),
        # a tiny guarantee still lets a user have a container (queueCapacity >= step)
        (
            "miniscule capacity",
            {"guaranteed": 100.0, "queue_used": 0, "active_used": 0, "active_users": 1},
            1024,
        ),
    ],
)
def test_user_limit(case: str, kwargs: dict[str, float], limit: float) -> None:
    base: dict[str, float] = {
        "guaranteed": 8192.0,
        "minimum_user_limit_percent": 100.0,
        "user_limit_factor": 1.0,
        "queue_maximum": 16384.0,
    }
    base.update(kwargs)
    assert cs.user_limit(step=STEP, **base) == limit, case  # type: ignore[arg-type]


def test_a_user_may_go_one_container_past_the_limit() -> None:
    assert cs.can_assign_to_user(4096, 4096)
    assert not cs.can_assign_to_user(5120, 4096)


def test_active_users_are_the_ones_asking() -> None:
    assert cs.active_usage([(2048, 1), (4096, 0), (1024, 2)]) == (3072, 2)
    assert cs.is_active_user(1) and not cs.is_active_user(0)


@pytest.mark.parametrize(
    ("guaranteed", "current", "percent", "limit"),
    [
        (8192.0, 8192.0, 0.1, 1024),  # 819.2 rounds up to a container
        (8192.0, 16384.0, 0.1, 2048),  # the current limit is larger: 1638.4 -> 2048
        (16384.0, 4096.0, 0.5, 8192),  # never below the guarantee: 8192
    ],
)
def test_queue_am_limit(guaranteed: float, current: float, percent: float, limit: float) -> None:
    assert cs.am_limit(guaranteed, current, percent, STEP) == limit


@pytest.mark.parametrize(
    ("users", "minimum", "factor", "limit"),
    [
        (1, 100.0, 1.0, 2048),  # 16384 x 0.1 x 1 x 1 = 1638.4 -> 2048
        (4, 25.0, 1.0, 1024),  # x max(0.25, 1/4) = 409.6 -> 1024
        (4, 100.0, 1.0, 2048),  # minimum-user-limit-percent 100 keeps the share at 1
        (1, 100.0, -1.0, 2048),  # factor -1: the guarantee x AM percent
        (1, 100.0, 5.0, 4096),  # x 5 = 8192, capped by the queue's AM limit 4096
    ],
)
def test_user_am_limit(users: int, minimum: float, factor: float, limit: float) -> None:
    found = cs.user_am_limit(
        guaranteed=16384.0,
        am_percent=0.1,
        minimum_user_limit_percent=minimum,
        active_users=users,
        user_limit_factor=factor,
        queue_am_limit=4096.0,
        step=STEP,
    )
    assert found == limit


@pytest.mark.parametrize(
    ("queue_used", "user_used", "allowed"),
    [
        (0, 0, True),  # nothing running: one app always starts, whatever the limits
        (1024, 0, True),  # 1024 + 1024 fits the queue's 2048 and the user's 1024
        (2048, 0, False),  # over the queue's AM limit
        (1024, 1024, False),  # over the user's AM limit
    ],
)
def test_activation(queue_used: float, user_used: float, allowed: bool) -> None:
    assert (
        cs.may_activate(
            am_request=1024,
            queue_am_used=queue_used,
            queue_am_limit=2048,
            user_am_used=user_used,
            user_am_limit=1024,
        )
        is allowed
    )


def test_queue_order_least_used_first_then_larger_guarantee_then_configuration() -> None:
    queues = {
        "a": cs.queue_order_key(2048, 4096, 0, cluster=16384),  # 0.5
        "b": cs.queue_order_key(1024, 4096, 1, cluster=16384),  # 0.25
        "c": cs.queue_order_key(4096, 8192, 2, cluster=16384),  # 0.5, larger guarantee
        "d": cs.queue_order_key(0, 0, 3, cluster=16384),  # no guarantee: last
    }
    assert sorted(queues, key=queues.__getitem__) == ["b", "c", "a", "d"]


def test_the_guarantee_is_whole_mib_floored_as_the_real_rm_reports() -> None:
    # the recorded Hadoop 3.4.3 RM: 30 % of 8192 MiB is an effectiveMinResource of 2457,
    # and with a 256 MiB minimum allocation its one user's limit is 2560
    assert cs.effective_capacity(8192 * 0.3) == 2457
    limit = cs.user_limit(
        guaranteed=8192 * 0.3,
        queue_used=1024,
        active_used=1024,
        active_users=1,
        minimum_user_limit_percent=100,
        user_limit_factor=1,
        queue_maximum=8192,
        step=256,
    )
    assert limit == 2560
    # 66.67 % of six 2 GiB containers is 8192.4 MiB: four containers, not five
    two_thirds = 12288 * 0.6667
    assert (
        cs.user_limit(
            guaranteed=two_thirds,
            queue_used=8192,
            active_used=8192,
            active_users=1,
            minimum_user_limit_percent=100,
            user_limit_factor=1,
            queue_maximum=11059,
            step=2048,
        )
        == 8192
    )


def test_a_child_grows_to_its_maximum_within_what_its_parent_leaves() -> None:
    # parent limited to 10 GiB, holding 8 GiB of which the child 2 GiB: the child may
    # reach 10 - 8 + 2 = 4 GiB, below its own maximum of 6 GiB
    assert cs.child_limit(6144, 10240, 8192, 2048) == 4096
    # a quiet parent: the child's own maximum binds
    assert cs.child_limit(6144, 10240, 2048, 2048) == 6144


@pytest.mark.parametrize(
    ("queue", "system", "absolute", "most"),
    [
        (None, None, 0.25, 2500),  # 10000 x 25 %
        (None, 400, 0.3, 120),  # the system-wide setting x absolute capacity
        (None, 10, 0.333, 3),  # cast to int: 3.33 -> 3
        (7, 400, 0.3, 7),  # the queue's own setting wins
    ],
)
def test_maximum_applications(
    queue: int | None, system: int | None, absolute: float, most: int
) -> None:
    assert cs.maximum_applications(queue, system, absolute) == most


@pytest.mark.parametrize(
    ("multiple", "maximum", "off_switch", "off_max", "limit"),
    [
        (True, None, False, None, 100),  # 3.4's default
        (False, 50, False, None, 1),  # multiple assignments off: one per heartbeat
        (True, -1, False, None, cs.UNLIMITED_ASSIGNMENTS),
        (True, 0, False, None, 1),
        (True, None, True, None, 1),  # ANY-only asks: the off-switch default of 1
        (True, 8, True, 3, 3),
        (True, 2, True, 3, 2),
    ],
)
def test_assignments_per_heartbeat(
    multiple: bool, maximum: int | None, off_switch: bool, off_max: int | None, limit: int
) -> None:
    assert (
        cs.heartbeat_assignments(
            multiple_enabled=multiple,
            maximum_assignments=maximum,
            off_switch_only=off_switch,
            maximum_offswitch=off_max,
        )
        == limit
    )
