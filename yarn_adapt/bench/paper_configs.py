"""The configurations AdaptiveConfig's evaluation compares (§4.4), for the SWIM and
the Google parts of ``bench adaptive-latency`` alike: the representative static
configurations, the tuner's search space, and a one-point space that asks the tuner
about one static configuration."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from yarn_adapt.bench.comparator import SchedulerSetting
from yarn_adapt.errors import SettingsError
from yarn_adapt.tuning.paper import leaf_paths
from yarn_adapt.tuning.space import (
    FAIR_POLICIES,
    GridSpace,
    GroupSetting,
    Parameter,
    ParameterKind,
    QueueSetting,
    Scheduler,
    table2_space,
)


def static_settings(
    setting: SchedulerSetting, containers: int = 8, *, elastic: bool = False
) -> list[GroupSetting]:
    """The representative static configurations of §4.4, for ``containers``: Capacity
    2 queues i and C - i containers (C = 8: the paper's c1..c7); 4 queues the
    permutations of (1, 1, 1, C - 3) and (1, 1, (C - 2) / 2, (C - 2) / 2) containers
    (C = 8: the paper's 10 combinations of 1, 3 and 5); Fair: Table 2."""
    paths = leaf_paths(setting.mapping.queues)
    if setting.scheduler is Scheduler.FAIR:
        space = table2_space("root", paths)
        return [space.decode(p) for p in space.points()]
    if setting.queue_count == 2:
        splits: Sequence[tuple[int, ...]] = [(i, containers - i) for i in range(1, containers)]
    else:
        half = (containers - 2) // 2
        combos = ((1, 1, 1, containers - 3), (1, 1, half, containers - 2 - half))
        splits = sorted({p for combo in combos for p in itertools.permutations(combo)})
    return [_capacity_setting(paths, split, elastic) for split in splits]


def _capacity_setting(paths: Sequence[str], parts: Sequence[int], elastic: bool) -> GroupSetting:
    shares = [round(100.0 * e / sum(parts), 2) for e in parts]
    queues = tuple(
        QueueSetting(p, share, "fifo", None if elastic else share)
        for p, share in zip(paths, shares, strict=True)
    )
    return GroupSetting(Scheduler.CAPACITY, "root", queues)


def adaptive_space(
    setting: SchedulerSetting, containers: int = 8, *, elastic: bool = False
) -> GridSpace:
    """§4.4's search space: Capacity capacities in C - 1 equal steps per queue (the
    paper's 7 for 8 containers), static like the baselines; Fair weights
    {25, 50, 75} per queue x FIFO/Fair/DRF."""
    paths = tuple(leaf_paths(setting.mapping.queues))
    if setting.scheduler is Scheduler.CAPACITY:
        static = Parameter("static", ParameterKind.ELASTICITY, paths, (0.0,), True)
        step = 100.0 / containers
        if setting.queue_count == 2:
            splits = tuple((step * i, step * (containers - i)) for i in range(1, containers))
            shares: tuple[Parameter, ...] = (
                Parameter("split", ParameterKind.SPLIT, paths, splits, True),
            )
        else:
            steps = tuple(step * i for i in range(1, containers))
            shares = tuple(
                Parameter(f"{p}.share", ParameterKind.SHARE, (p,), steps, True) for p in paths
            )
        held = () if elastic else (static,)
        return GridSpace(Scheduler.CAPACITY, "root", paths, (*shares, *held), "fifo")
    weights = tuple(
        Parameter(f"{p}.weight", ParameterKind.SHARE, (p,), (25.0, 50.0, 75.0), True) for p in paths
    )
    policy = Parameter("policy", ParameterKind.POLICY, paths, FAIR_POLICIES, False)
    return GridSpace(Scheduler.FAIR, "root", paths, (*weights, policy), "fair")


def fixed_space(setting: GroupSetting, elastic: bool) -> GridSpace:
    """A space with one point, ``setting`` (a static configuration of
    :func:`static_settings`), for asking the tuner about it."""
    paths = tuple(q.path for q in setting.queues)
    shares = tuple(
        Parameter(f"{q.path}.share", ParameterKind.SHARE, (q.path,), (q.share,), True)
        for q in setting.queues
    )
    if setting.scheduler is Scheduler.CAPACITY:
        static = Parameter("static", ParameterKind.ELASTICITY, paths, (0.0,), True)
        held = () if elastic else (static,)
        return GridSpace(Scheduler.CAPACITY, setting.parent, paths, (*shares, *held), "fifo")
    policies = {q.policy for q in setting.queues}
    if len(policies) != 1:
        raise SettingsError(f"static {setting.describe()}: one policy for every queue expected")
    policy = Parameter("policy", ParameterKind.POLICY, paths, (policies.pop(),), False)
    return GridSpace(Scheduler.FAIR, setting.parent, paths, (*shares, policy), "fair")
