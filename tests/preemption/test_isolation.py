"""The isolation loop's decisions, table by table: the suppress formula (floor, step
limits, dead band), the split over containers, batch's weight on v1 and v2, the
composition with Algorithm 2's squeeze (the stricter wins), memory pressure with its
hysteresis, the memory eviction's conditions, CPU lists and /proc readings."""

from __future__ import annotations

import pytest

from preemption.cgroups.base import MIB, MemoryPolicy, Usage
from preemption.cgroups.caps import NO_CAPS, Caps, capped, lowered_weight, quota_ratio
from preemption.errors import NodeStatError
from preemption.isolation import (
    CpuUse,
    EvictionRules,
    EvictionState,
    MemoryHolder,
    MemoryInfo,
    MemorySettings,
    SuppressSettings,
    batch_budget,
    cpu_list,
    memory_victim,
    next_quota,
    parse_cpu_list,
    split_quota,
    track_pressure,
    under_pressure,
)
from preemption.nodestat import parse_cpu_ticks, parse_meminfo, used_millicores

DEFAULTS = SuppressSettings()


# ----------------------------------------------------------------- the budget


@pytest.mark.parametrize(
    ("capacity", "node", "batch", "settings", "budget"),
    [
        # Koordinator's formula: capacity x 65 % - what is not batch - reserve.
        (4000, 1000, 1000, DEFAULTS, 2600),  # only batch runs: 65 % of the node
        (4000, 3000, 1000, DEFAULTS, 600),  # the rest uses 2 cores
        (4000, 3000, 1000, SuppressSettings(reserve_millicores=300), 300),
        (4000, 4000, 500, DEFAULTS, 200),  # nothing left: the floor
        (4000, 2000, 2500, DEFAULTS, 2600),  # batch counted above the node: nothing else
        (1000, 500, 100, DEFAULTS, 250),  # a one-CPU node
        (1000, 1000, 0, DEFAULTS, 200),  # ... at its floor
        (100, 100, 0, DEFAULTS, 100),  # a node smaller than the floor: never above it
        (4000, 1000, 0, SuppressSettings(target_utilisation=0.9), 2600),
    ],
)
def test_the_batch_budget_follows_koordinators_formula_and_never_falls_below_the_floor(
    capacity: int, node: float, batch: float, settings: SuppressSettings, budget: int
) -> None:
    assert batch_budget(CpuUse(capacity, node, batch), settings) == budget


@pytest.mark.parametrize(
    ("previous", "budget", "quota", "change"),
    [
        (None, 900, 900, "first"),  # from no quota: the budget at once
        (2000, 600, 600, "decrease"),  # down at once, however far
        (600, 2600, 1000, "increase-bounded"),  # up by at most 10 % of 4000 per interval
        (1000, 1300, 1300, "increase"),  # within the step: all of it
        (1000, 1039, 1000, "dead-band"),  # under 1 % of the node: not made
        (1000, 961, 1000, "dead-band"),  # ... either way
        (1000, 1040, 1040, "increase"),  # 1 % is a change
        (1000, 960, 960, "decrease"),
    ],
)
def test_the_quota_goes_down_at_once_up_in_bounded_steps_and_skips_small_changes(
    previous: int | None, budget: int, quota: int, change: str
) -> None:
    step = next_quota(previous, budget, 4000, DEFAULTS)
    assert (step.quota_millicores, step.change, step.budget_millicores) == (quota, change, budget)


def test_a_rising_budget_is_reached_in_steps_of_a_tenth_of_the_node() -> None:
    quotas, quota = [], 200
    for _ in range(5):
        quota = next_quota(quota, 650, 1000, DEFAULTS).quota_millicores
        quotas.append(quota)
    assert quotas == [300, 400, 500, 600, 650]


@pytest.mark.parametrize(
    ("quota", "weights", "shares"),
    [
        (1000, {"a": 1000, "b": 1000}, {"a": 500, "b": 500}),
        (900, {"a": 2000, "b": 1000}, {"a": 600, "b": 300}),  # by vcores
        (20, {"a": 1000, "b": 1000, "c": 1000}, {"a": 10, "b": 10, "c": 10}),  # kernel's min
        (500, {}, {}),
    ],
)
def test_the_quota_is_split_over_containers_by_their_vcores(
    quota: int, weights: dict[str, int], shares: dict[str, int]
) -> None:
    assert split_quota(quota, weights) == shares


# ----------------------------------------------------------------- weights


@pytest.mark.parametrize(
    ("original", "lowest", "weight"),
    [
        (1024, 2, 2),  # v1: a group of default weight -> the kernel's minimum
        (4096, 2, 8),  # v1: YARN's 4 vcores x 1024 -> 2 per vcore, its opportunistic weight
        (2048, 2, 4),
        (100, 1, 1),  # v2: a group of default weight -> the minimum
        (400, 1, 1),  # v2: YARN's 4 vcores x 100
        (10000, 1, 20),  # v2: YARN's cap of 10000
    ],
)
def test_batch_weight_maps_yarns_v1_and_v2_weights_down(
    original: int, lowest: int, weight: int
) -> None:
    assert lowered_weight(original, 0.002, lowest) == weight


# ----------------------------------------------------------------- composition

NONE = str(1 << 62)
V1 = {"cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000", "cpu.shares": "4096",
      "memory.soft_limit_in_bytes": NONE, "memory.limit_in_bytes": NONE}  # fmt: skip
V2 = {"cpu.max": "max 100000", "cpu.weight": "400", "memory.high": "max", "memory.max": "max"}
POLICY = MemoryPolicy(hard_headroom_mb=128)


@pytest.mark.parametrize(
    ("squeezed", "caps", "expected"),
    [
        ({}, NO_CAPS, {}),  # no squeeze, no caps: the originals
        ({}, Caps(cpu_millicores=300), {"cpu.cfs_quota_us": "30000"}),  # the suppress share
        ({"cpu.cfs_quota_us": "80000", "cpu.shares": "3277"}, Caps(cpu_millicores=300),
         {"cpu.cfs_quota_us": "30000", "cpu.shares": "3277"}),  # suppress stricter
        ({"cpu.cfs_quota_us": "20000", "cpu.shares": "819"}, Caps(cpu_millicores=500),
         {"cpu.cfs_quota_us": "20000", "cpu.shares": "819"}),  # the squeeze stricter
        ({}, Caps(weight_fraction=0.002), {"cpu.shares": "8"}),  # batch's weight
        ({"cpu.cfs_quota_us": "10000", "cpu.shares": "410"}, Caps(weight_fraction=0.5),
         {"cpu.cfs_quota_us": "10000", "cpu.shares": "410"}),  # squeeze's weight lower
        ({}, Caps(memory_mb=300), {"memory.soft_limit_in_bytes": str(300 * MIB)}),
        ({"memory.soft_limit_in_bytes": str(200 * MIB)}, Caps(memory_mb=300),
         {"memory.soft_limit_in_bytes": str(200 * MIB)}),
    ],
)  # fmt: skip
def test_v1_caps_and_the_squeeze_compose_to_the_stricter_of_the_two(
    squeezed: dict[str, str], caps: Caps, expected: dict[str, str]
) -> None:
    values = {**V1, **squeezed}
    del values["cpu.cfs_period_us"]  # desired values never name the period
    assert capped(values, V1, Usage(0, 100 * MIB), caps, POLICY) == {**values, **expected}


def test_a_v1_cap_follows_the_groups_own_period() -> None:
    originals = {**V1, "cpu.cfs_period_us": "50000"}
    values = capped({"cpu.cfs_quota_us": "-1"}, originals, Usage(0, 0), Caps(400), POLICY)
    assert values == {"cpu.cfs_quota_us": "20000"}


@pytest.mark.parametrize(
    ("squeezed", "caps", "usage_mb", "expected"),
    [
        ({}, Caps(cpu_millicores=300), 0, {"cpu.max": "30000 100000"}),
        ({"cpu.max": "20000 100000"}, Caps(cpu_millicores=300), 0, {"cpu.max": "20000 100000"}),
        ({"cpu.max": "60000 100000"}, Caps(cpu_millicores=300), 0, {"cpu.max": "30000 100000"}),
        ({}, Caps(weight_fraction=0.002), 0, {"cpu.weight": "1"}),  # 400 x 0.002 -> minimum 1
        # memory.high at what it holds, never below usage + headroom (the floor rule)
        ({}, Caps(memory_mb=300), 300, {"memory.high": str((300 + 128) * MIB)}),
        ({}, Caps(memory_mb=600), 300, {"memory.high": str(600 * MIB)}),
        ({"memory.high": str(400 * MIB)}, Caps(memory_mb=600), 100,
         {"memory.high": str(400 * MIB)}),
        ({}, Caps(cpus="2-3"), 0, {"cpuset.cpus": "2-3"}),
    ],
)  # fmt: skip
def test_v2_caps_and_the_squeeze_compose_to_the_stricter_of_the_two(
    squeezed: dict[str, str], caps: Caps, usage_mb: int, expected: dict[str, str]
) -> None:
    values = {**V2, **squeezed}
    del values["memory.max"]
    result = capped(values, V2, Usage(0, usage_mb * MIB), caps, POLICY)
    assert result == {**values, **expected}


def test_a_v2_memory_cap_never_rises_above_the_original() -> None:
    originals = {**V2, "memory.high": str(200 * MIB)}
    values = {"cpu.max": "max 100000", "cpu.weight": "400", "memory.high": str(200 * MIB)}
    result = capped(values, originals, Usage(0, 300 * MIB), Caps(memory_mb=300), POLICY)
    assert result["memory.high"] == str(200 * MIB)


@pytest.mark.parametrize(
    ("values", "ratio"),
    [
        ({"cpu.cfs_quota_us": "-1"}, float("inf")),
        ({"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"}, 0.5),
        ({"cpu.max": "max 100000"}, float("inf")),
        ({"cpu.max": "25000 50000"}, 0.5),
        ({"cpu.weight": "100"}, float("inf")),
    ],
)
def test_the_quota_ratio_compares_v1_and_v2_quotas(values: dict[str, str], ratio: float) -> None:
    assert quota_ratio(values) == ratio


# ----------------------------------------------------------------- memory

MEMORY = MemorySettings()  # pressure under 10 % available, released above 12 %


@pytest.mark.parametrize(
    ("was", "available", "now"),
    [
        (False, 2000, False),
        (False, 999, True),  # below 10 % of 10000 MiB
        (True, 1100, True),  # between 10 % and 12 %: still under pressure
        (False, 1100, False),  # ... but not starting one
        (True, 1200, False),  # released at 12 %
    ],
)
def test_memory_pressure_starts_below_the_threshold_and_ends_above_it_plus_the_margin(
    was: bool, available: int, now: bool
) -> None:
    assert under_pressure(was, MemoryInfo(10000, available), MEMORY) is now


HOLDERS = [MemoryHolder("c1", "app", 100 * MIB), MemoryHolder("c2", "app", 300 * MIB)]
RULES = EvictionRules(enabled=True, grace_period_s=60.0, cooldown_s=30.0)


@pytest.mark.parametrize(
    ("state", "now", "rules", "victim"),
    [
        (EvictionState(), 1000.0, RULES, None),  # no pressure
        (EvictionState(pressure_since_s=950.0), 1000.0, RULES, None),  # grace not over
        (EvictionState(pressure_since_s=900.0), 1000.0, RULES, "c2"),  # most memory first
        (EvictionState(900.0, 980.0), 1000.0, RULES, None),  # cooling down
        (EvictionState(900.0, 960.0, frozenset({"c2"})), 1000.0, RULES, "c1"),  # c2 going
        (EvictionState(pressure_since_s=900.0), 1000.0,
         EvictionRules(enabled=False, grace_period_s=60.0, cooldown_s=30.0), None),  # never
    ],
)  # fmt: skip
def test_a_batch_container_is_evicted_only_where_allowed_after_the_grace_period(
    state: EvictionState, now: float, rules: EvictionRules, victim: str | None
) -> None:
    chosen = memory_victim(state, now, HOLDERS, rules)
    assert (chosen.container_id if chosen else None) == victim


def test_pressure_keeps_its_start_and_evicted_containers_are_forgotten_once_gone() -> None:
    state = track_pressure(EvictionState(), True, 100.0, frozenset({"c1"}))
    state = track_pressure(state, True, 150.0, frozenset({"c1"}))
    assert state.pressure_since_s == 100.0
    state = EvictionState(100.0, 120.0, frozenset({"c1", "c2"}))
    state = track_pressure(state, False, 160.0, frozenset({"c2"}))
    assert (state.pressure_since_s, state.evicting) == (None, frozenset({"c2"}))


# ----------------------------------------------------------------- edges


@pytest.mark.parametrize(
    ("text", "cpus", "again"),
    [("0-3,6", {0, 1, 2, 3, 6}, "0-3,6"), ("", set(), ""), ("1", {1}, "1"),
     (" 2 , 0-1", {0, 1, 2}, "0-2")],
)  # fmt: skip
def test_cpu_lists_parse_and_print(text: str, cpus: set[int], again: str) -> None:
    assert parse_cpu_list(text) == cpus
    assert cpu_list(frozenset(cpus)) == again


@pytest.mark.parametrize("text", ["a", "3-1", "1-", "-2", "0,,x"])
def test_a_bad_cpu_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"CPU number or range|ends before it starts"):
        parse_cpu_list(text)


STAT = """cpu  100 0 100 800 0 0 0 0 0 0
cpu0 {u0} 0 0 {i0} 0 0 0 0 0 0
cpu1 {u1} 0 0 {i1} 10 0 0 0 0 0
intr 1 2 3
"""


def test_node_use_is_the_busy_share_of_the_ticks_of_the_nodes_cpus() -> None:
    before = parse_cpu_ticks(STAT.format(u0=100, i0=900, u1=0, i1=990), frozenset())
    after = parse_cpu_ticks(STAT.format(u0=175, i0=925, u1=50, i1=1040), frozenset())
    assert used_millicores(before, after) == pytest.approx(2000 * 125 / 200)
    cpu0 = [parse_cpu_ticks(STAT.format(u0=u, i0=i, u1=0, i1=0), frozenset({0}))
            for u, i in ((100, 900), (175, 925))]  # fmt: skip
    assert used_millicores(*cpu0) == pytest.approx(750.0)
    with pytest.raises(NodeStatError, match="no line for CPU 5"):
        parse_cpu_ticks(STAT.format(u0=1, i0=1, u1=1, i1=1), frozenset({5}))


def test_meminfo_gives_total_and_available() -> None:
    text = "MemTotal:       16000000 kB\nMemFree: 100 kB\nMemAvailable:    4096000 kB\n"
    assert parse_meminfo(text) == MemoryInfo(15625, 4000)
    with pytest.raises(NodeStatError, match="MemAvailable"):
        parse_meminfo("MemTotal: 1 kB\n")
