"""A candidate's C_i made directly (GroupBase.with_setting) is what writing the
setting into the configuration and reading the group back gives; canonical keys
tell apart exactly what differs in whole containers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rules.compiler import MechanismCompiler, signature
from rules.inputs import NO_CONSTRAINTS, GroupConfig, GroupResources, JobMix
from tests.rules.factories import job
from yarn_adapt.model import CapacityQueue, CapacitySchedulerConfig, Percentage, Resources
from yarn_adapt.tuning.apply import Group, apply_setting
from yarn_adapt.tuning.bridge import GroupBase, canonical_key, group_config
from yarn_adapt.tuning.paper import capacity_base, fair_base
from yarn_adapt.tuning.space import Scheduler, SpaceSettings, paper_space, quantized_space

QUEUES = ("root.q1", "root.q2", "root.q3", "root.q4")


def capacity_with_maximums() -> CapacitySchedulerConfig:
    leaves = tuple(
        CapacityQueue(path, capacity=Percentage(25.0), maximum_capacity=maximum)
        for path, maximum in zip(
            QUEUES, (Percentage(40.0), None, Percentage(90.0), Percentage(25.0)), strict=True
        )
    )
    return CapacitySchedulerConfig(CapacityQueue("root", children=leaves))


CASES = [
    (capacity_base(QUEUES), quantized_space(Scheduler.CAPACITY, "root", QUEUES)),
    (
        capacity_with_maximums(),
        quantized_space(Scheduler.CAPACITY, "root", QUEUES, SpaceSettings(d=3, tune_maximum=True)),
    ),
    (capacity_with_maximums(), paper_space(Scheduler.CAPACITY, "root", QUEUES)),
    (fair_base(QUEUES), paper_space(Scheduler.FAIR, "root", QUEUES)),
    (fair_base(QUEUES[:2]), quantized_space(Scheduler.FAIR, "root", QUEUES[:2])),
]


@pytest.mark.parametrize(("config", "space"), CASES)
def test_a_setting_gives_the_group_config_yarn_would_read(config, space) -> None:  # type: ignore[no-untyped-def]
    group = Group("root", space.queues)
    base = GroupBase.of(config, group)
    points = list(space.points())
    for point in points[:: max(1, len(points) // 40)]:
        setting = space.decode(point)
        written = group_config(apply_setting(config, setting), group)
        assert relative(base.with_setting(setting)) == relative(written)


def relative(config: GroupConfig) -> GroupConfig:
    """Fair weights only count relative to each other (apply_setting keeps the
    written numbers when the new weights are the old ones scaled)."""
    total = sum(q.weight for q in config.queues)
    queues = tuple(replace(q, weight=round(q.weight / total, 9)) for q in config.queues)
    return replace(config, queues=queues)


def test_canonical_keys_are_whole_containers() -> None:
    config = capacity_base(QUEUES[:2])
    group = Group("root", QUEUES[:2])
    base = GroupBase.of(config, group).config
    mix = JobMix((job("j", "q1", maps=4), job("k", "q2", maps=2)))
    compiler = MechanismCompiler()
    resources = GroupResources.of_containers(10, Resources(1024, 1))

    def key(first: float, units: int = 10) -> object:
        queues = (
            replace(base.queues[0], capacity=first),
            replace(base.queues[1], capacity=100 - first),
        )
        config = replace(base, queues=queues)
        mechanism = compiler.compile(signature(config, mix, NO_CONSTRAINTS, resources))
        return canonical_key(config, mechanism, units)

    assert key(31.0) == key(33.0)  # 3.1 and 3.3 containers: 3 either way
    assert key(31.0) != key(36.0)  # 3 against 4
    assert key(31.0, units=100) != key(33.0, units=100)  # 31 against 33
