"""GetKPreemptedTasks(): which K tasks each strategy picks, in what order, with what share."""

from __future__ import annotations

import random

import pytest

from preemption.model import Amount, Locality
from preemption.strategies import SelectionSettings, Strategy, select, tasks_needed

from .factories import cid, task

NOW = 1000.0
C = SelectionSettings(per_task=Amount(1000, 512), floor=Amount(100, 256))

# Five tasks started at t = 100, 400, 700, 850, 950 (task 5 is the newest, 1 the longest).
TASKS = (
    task(1, 100.0, locality=Locality.LOCAL),
    task(2, 400.0, locality=Locality.NON_LOCAL),
    task(3, 700.0, locality=Locality.UNKNOWN),
    task(4, 850.0, locality=Locality.LOCAL, baseline=(2000, 2048)),
    task(5, 950.0, locality=Locality.NON_LOCAL),
)


def picked(strategy: Strategy, demand: Amount, **kwargs: object) -> list[tuple[int, int]]:
    chosen = select(strategy, TASKS, demand, C, now_s=NOW, **kwargs)  # type: ignore[arg-type]
    return [(int(a.container_id[-6:]), a.amount.cpu_millicores) for a in chosen]


@pytest.mark.parametrize(
    ("demand", "per_task", "expected"),
    [
        (Amount(1, 0), Amount(1000, 512), 1),
        (Amount(1000, 0), Amount(1000, 512), 1),
        (Amount(1001, 0), Amount(1000, 512), 2),
        (Amount(2500, 0), Amount(1000, 512), 3),
        (Amount(500, 1100), Amount(1000, 512), 3),  # memory needs ⌈1100/512⌉ = 3
        (Amount(0, 0), Amount(1000, 512), 0),
    ],
)
def test_k_is_the_ceiling_of_r_over_c(demand: Amount, per_task: Amount, expected: int) -> None:
    assert tasks_needed(demand, per_task) == expected


@pytest.mark.parametrize(
    ("strategy", "demand", "expected"),
    [
        # NTF: the newest first; r = 1500 -> K = 2 tasks, 750 each.
        (Strategy.NTF, Amount(1500, 0), [(5, 750), (4, 750)]),
        # LTF: the longest-running first.
        (Strategy.LTF, Amount(1500, 0), [(1, 750), (2, 750)]),
        # NLTF: non-local (5 newer than 2), then unknown (3), then local.
        (Strategy.NLTF, Amount(2500, 0), [(5, 834), (2, 834), (3, 832)]),
        # LP: fewest tasks, the most reclaimable first: task 4 gives 1500 alone.
        (Strategy.LP, Amount(1500, 0), [(4, 1500)]),
        # LP beyond one task: task 4 to its floor (1900), then the rest from task 1.
        (Strategy.LP, Amount(2500, 0), [(4, 1900), (1, 600)]),
        # Kill: newest containers whole until their allocations cover r.
        (Strategy.KILL, Amount(2500, 0), [(5, 1000), (4, 2000)]),
        # r <= c: one task gives all of it.
        (Strategy.NTF, Amount(400, 0), [(5, 400)]),
    ],
)
def test_each_strategy_picks_its_tasks_in_its_order(
    strategy: Strategy, demand: Amount, expected: list[tuple[int, int]]
) -> None:
    assert picked(strategy, demand) == expected


def test_rb_draws_k_tasks_at_random_reproducibly() -> None:
    first = picked(Strategy.RB, Amount(1800, 0), rng=random.Random(7))
    again = picked(Strategy.RB, Amount(1800, 0), rng=random.Random(7))
    assert first == again
    assert len(first) == 2 and all(share == 900 for _, share in first)
    draws = {tuple(n for n, _ in picked(Strategy.RB, Amount(1800, 0), rng=random.Random(s)))
             for s in range(30)}  # fmt: skip
    assert len(draws) > 5  # not a fixed order


def test_blacklisted_and_floored_tasks_are_never_chosen() -> None:
    floored = task(6, 990.0, baseline=(1000, 1024), limit=(100, 1024))  # at its CPU floor
    tasks = (*TASKS, floored)
    chosen = select(
        Strategy.NTF, tasks, Amount(1500, 0), C, blacklist=frozenset({cid(5)}), now_s=NOW
    )
    assert [a.container_id for a in chosen] == [cid(4), cid(3)]


def test_a_task_near_its_floor_gives_what_it_can_and_the_next_covers_the_rest() -> None:
    nearly = task(7, 999.0, baseline=(1000, 1024), limit=(300, 1024))  # 200 left above floor
    chosen = select(Strategy.NTF, (*TASKS, nearly), Amount(1500, 0), C, now_s=NOW)
    shares = [(a.container_id, a.amount.cpu_millicores) for a in chosen]
    assert shares == [(cid(7), 200), (cid(5), 750), (cid(4), 550)]
    assert sum(s for _, s in shares) == 1500


def test_memory_is_reclaimed_only_when_asked() -> None:
    chosen = select(Strategy.NTF, TASKS, Amount(0, 600), C, now_s=NOW)
    assert [(a.container_id, a.amount) for a in chosen] == [
        (cid(5), Amount(0, 300)),
        (cid(4), Amount(0, 300)),
    ]


def test_nothing_is_chosen_when_nothing_is_asked_or_everyone_is_excluded() -> None:
    assert select(Strategy.NTF, TASKS, Amount(0, 0), C, now_s=NOW) == ()
    everyone = frozenset(t.container_id for t in TASKS)
    assert select(Strategy.LP, TASKS, Amount(500, 0), C, blacklist=everyone, now_s=NOW) == ()


def test_strategy_names_parse_case_insensitively() -> None:
    assert Strategy.parse("ntf") is Strategy.NTF
    assert Strategy.parse("kill") is Strategy.KILL
    with pytest.raises(ValueError, match="unknown strategy 'FIFO'"):
        Strategy.parse("FIFO")
