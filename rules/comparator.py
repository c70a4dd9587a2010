"""The comparator: L(R·c_i, J_i, C_i, S_i) for many candidate configurations of one
group (AdaptiveConfig §3.3.1-3.3.2).

:class:`Comparator` holds what does not change between candidates -- the job mix,
the resources, the constraints, the rule book -- and answers
:meth:`Comparator.latency` for each :class:`~rules.inputs.GroupConfig`. The rules
compile a mechanism per categorical signature (cached); the numeric engine runs
Algorithm 1 with it on each sample of what the comparator cannot know -- task
durations as the task-time model predicts them with its measured error, heartbeat
phases (:class:`~rules.uncertainty.Uncertainty`); one sample is the point estimate.
Every candidate runs on the same samples (common random numbers), so
:meth:`Comparator.choose` can pick the one most likely to be best
(:mod:`rules.decision`).

A search asks about many configurations that take the same path through Algorithm
1 -- the same decision at every point where the configuration matters. The
comparator keeps the paths it ran (:mod:`rules.paths`) and answers a configuration
that follows one of them with that path's estimate, exactly what running the mix
would give, at a fraction of the cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rules.compiler import MechanismCompiler, signature
from rules.decision import Choice, DecisionRule, choose
from rules.inputs import NO_CONSTRAINTS, GroupConfig, GroupConstraints, GroupResources, JobMix
from rules.mechanism import Mechanism
from rules.native import evaluation_module
from rules.paths import Path
from rules.rulebook import DEFAULT_BOOK, RuleBook
from rules.state import Estimate
from rules.uncertainty import POINT_ESTIMATE, Uncertainty, heartbeat_phases, sample_mixes

__all__ = ["POINT_ESTIMATE", "Comparator", "Ranked", "Uncertainty", "expected"]


@dataclass(frozen=True)
class Ranked:
    """One candidate's place in a comparison."""

    index: int
    config: GroupConfig
    estimate: Estimate


# Paths kept per mechanism, queues and resources: the most recently followed first.
PATHS_KEPT = 32


def expected(estimates: Sequence[Estimate]) -> Estimate:
    """The mean of several estimates of the same mix, job by job; ``samples`` keeps
    each one's mean latency."""
    count = len(estimates)
    latencies = tuple(
        sum(lat) / count for lat in zip(*(e.latencies for e in estimates), strict=True)
    )
    means = tuple(e.mean_latency_s for e in estimates)
    return Estimate(sum(means) / count, latencies, max(e.unfinished for e in estimates), means)


class Comparator:
    """Compares candidate configurations of one group on one job mix."""

    def __init__(
        self,
        mix: JobMix,
        resources: GroupResources,
        constraints: GroupConstraints = NO_CONSTRAINTS,
        *,
        book: RuleBook = DEFAULT_BOOK,
        compiler: MechanismCompiler | None = None,
        uncertainty: Uncertainty = POINT_ESTIMATE,
    ) -> None:
        self.mix = mix
        self.resources = resources
        self.constraints = constraints
        self.compiler = compiler or MechanismCompiler(book)
        self.uncertainty = uncertainty
        self.evaluations = 0
        self.paths_followed = 0
        self._paths: dict[tuple[int, Mechanism, tuple[str, ...], GroupResources], list[Path]] = {}
        self._mixes = sample_mixes(mix, uncertainty)
        self._phases: dict[tuple[int, int, float], tuple[float, ...] | None] = {}

    def mechanism(self, config: GroupConfig, resources: GroupResources | None = None) -> Mechanism:
        """What the rules decide for ``config`` on this mix."""
        facts = signature(config, self.mix, self.constraints, resources or self.resources)
        return self.compiler.compile(facts)

    def estimate(self, config: GroupConfig, resources: GroupResources | None = None) -> Estimate:
        """Algorithm 1 for ``config`` (on ``resources``, default the comparator's)."""
        self.evaluations += 1
        resources = resources or self.resources
        mechanism = self.mechanism(config, resources)
        estimates = [
            self._evaluate(index, mechanism, config, resources) for index in range(len(self._mixes))
        ]
        return estimates[0] if len(estimates) == 1 else expected(estimates)

    def _evaluate(
        self, index: int, mechanism: Mechanism, config: GroupConfig, resources: GroupResources
    ) -> Estimate:
        """Algorithm 1 on mix ``index``; a configuration that follows a kept path (one
        that decides alike wherever the configuration matters, see
        :mod:`rules.paths`) gets that path's estimate without running the mix."""
        key = (index, mechanism, tuple(q.name for q in config.queues), resources)
        # rules.evaluation, or its compiled copy when it is built (rules.native)
        estimate, followed = evaluation_module().estimate_on_paths(
            self._paths.setdefault(key, []),
            PATHS_KEPT,
            mechanism,
            config,
            self._mixes[index],
            resources,
            self.constraints,
            self._phases_of(index, resources),
        )
        self.paths_followed += followed
        return estimate  # type: ignore[no-any-return]

    def _phases_of(self, index: int, resources: GroupResources) -> tuple[float, ...] | None:
        """Sample ``index``'s heartbeat phases of the nodes of ``resources``."""
        key = (index, len(resources.nodes), resources.heartbeat_s)
        if key not in self._phases:
            self._phases[key] = heartbeat_phases(
                len(resources.nodes), resources.heartbeat_s, self.uncertainty, index
            )
        return self._phases[key]

    def latency(self, config: GroupConfig, resources: GroupResources | None = None) -> float:
        """Mean job latency (s) under ``config``: the value the searches minimise."""
        return self.estimate(config, resources).mean_latency_s

    def rank(self, configs: Iterable[GroupConfig]) -> list[Ranked]:
        """Candidates from the lowest estimated mean latency up (ties keep input order)."""
        ranked = [Ranked(i, c, self.estimate(c)) for i, c in enumerate(configs)]
        return sorted(ranked, key=lambda r: (r.estimate.mean_latency_s, r.index))

    def best(self, configs: Sequence[GroupConfig]) -> Ranked:
        return self.rank(configs)[0]

    def choose(
        self,
        configs: Sequence[GroupConfig],
        rule: DecisionRule = DecisionRule.MOST_LIKELY_BEST,
        resources: GroupResources | None = None,
    ) -> Choice:
        """The candidate ``rule`` picks, every candidate on the same samples."""
        return choose([self.sample_latencies(c, resources) for c in configs], rule)

    def sample_latencies(
        self, config: GroupConfig, resources: GroupResources | None = None
    ) -> tuple[float, ...]:
        """``config``'s mean latency in each sample."""
        found = self.estimate(config, resources)
        return found.samples or (found.mean_latency_s,)
