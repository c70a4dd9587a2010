"""One evaluation of a candidate on one sample of the mix: follow a kept path, or
run Algorithm 1 and keep its path (:mod:`rules.paths`).

This is the comparator's whole use of the numeric engine, so it is the entry point
of the engine's compiled copy (:mod:`rules.native`): the paths it keeps hold that
copy's objects, and only code of the same copy reads them.
"""

from __future__ import annotations

from rules.engine import Algorithm1
from rules.inputs import GroupConfig, GroupConstraints, GroupResources, JobMix
from rules.judging import PathJudge
from rules.mechanism import Mechanism
from rules.paths import Decisions, Path
from rules.state import Estimate


def estimate_on_paths(
    paths: list[Path],
    kept: int,
    mechanism: Mechanism,
    config: GroupConfig,
    mix: JobMix,
    resources: GroupResources,
    constraints: GroupConstraints,
    phases: tuple[float, ...] | None,
) -> tuple[Estimate, bool]:
    """``config``'s estimate on ``mix`` and whether it came from a kept path.

    ``paths``: the paths kept for this mechanism, queues and resources, the most
    recently followed first; a configuration that follows one (decides alike
    wherever the configuration matters) gets its estimate without running the mix,
    else the run's path is put first. At most ``kept`` are kept."""
    if paths:
        judge = PathJudge(mechanism, config, resources, constraints)
        for position, path in enumerate(paths):
            if judge.follows(path):
                paths.insert(0, paths.pop(position))
                return path.estimate, True
    decisions = Decisions()
    engine = Algorithm1(
        mechanism, config, mix, resources, constraints, decisions=decisions, phases=phases
    )
    estimate = engine.run()
    paths.insert(0, Path(decisions, estimate, engine.jobs))
    del paths[kept:]
    return estimate, False
