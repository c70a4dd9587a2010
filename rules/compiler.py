"""Facts in, mechanism out: the bridge between the comparator's inputs and the rules.

:func:`signature` reduces a candidate (configuration, job mix, constraints) to the
categorical facts the rules reason over -- scheduler kind, elasticity, parent
policy, resource calculator, each queue's policy, the mix's container shapes,
deadlines, AM containers, placement constraints, framework. Numbers (capacities,
weights, durations) are not facts: they are the kernels' inputs. A
:class:`MechanismCompiler` posts the facts of a signature to the rule engine once and
caches the :class:`~rules.mechanism.Mechanism`; a search evaluating thousands of
points of one group pays the rule engine only for the few signatures it meets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rules.inputs import GroupConfig, GroupConstraints, GroupResources, JobMix
from rules.mechanism import KernelChoice, Mechanism
from rules.rulebook import (
    ALLOCATION,
    CONSTRAINTS,
    DEFAULT_BOOK,
    ESTIMATION,
    ORDERING,
    UNSUPPORTED,
    RuleBook,
    decide,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.model.resources import Resources

CONSTRAINT_KINDS = ("queue_bounds", "am", "placement", "user_limit", "resource_fit", "heartbeat")


@dataclass(frozen=True)
class Signature:
    """The categorical facts of one candidate."""

    scheduler: str
    elastic: bool
    parent_policy: str
    calculator: str
    policies: tuple[str, ...]
    uniform_shape: bool
    deadlines: bool
    am_containers: bool
    placement: bool
    bounded: bool
    framework: str
    nodes_known: bool
    multiple_assignments: str

    def allocation_facts(self) -> dict[str, object]:
        return {
            "scheduler": self.scheduler,
            "elastic": self.elastic,
            "parent_policy": self.parent_policy,
        }

    def ordering_facts(self, policy: str) -> dict[str, object]:
        return {
            "scheduler": self.scheduler,
            "policy": policy,
            "uniform_shape": self.uniform_shape,
            "deadlines": self.deadlines,
        }

    def constraint_facts(self, kind: str) -> dict[str, object]:
        return {
            "kind": kind,
            "scheduler": self.scheduler,
            "bounded": self.bounded,
            "enabled": self.am_containers,
            "constrained": self.placement,
            "calculator": self.calculator,
            "nodes_known": self.nodes_known,
            "multiple": self.multiple_assignments,
        }


def signature(
    config: GroupConfig,
    mix: JobMix,
    constraints: GroupConstraints,
    resources: GroupResources,
) -> Signature:
    shapes, deadlines, placement = mix.signature_facts
    return Signature(
        scheduler=config.scheduler,
        elastic=any(q.maximum > q.capacity for q in config.queues),
        parent_policy=config.parent_policy,
        calculator=config.calculator,
        policies=tuple(q.policy.lower() for q in config.queues),
        uniform_shape=_uniform(shapes),
        deadlines=deadlines,
        am_containers=mix.am_containers,
        placement=placement,
        bounded=constraints.bounded,
        framework=mix.framework,
        nodes_known=bool(resources.nodes),
        multiple_assignments=_tristate(config.multiple_assignments),
    )


def _tristate(value: bool | None) -> str:
    return "default" if value is None else ("yes" if value else "no")


def _uniform(shapes: Iterable[Resources]) -> bool:
    """One container shape, up to scale, counts as uniform: shares then order jobs the
    same way in every dimension."""
    ratios = {(s.memory_mb / s.vcores) if s.vcores else None for s in shapes}
    return len(ratios) <= 1


class MechanismCompiler:
    """Signature -> Mechanism through ``book``'s rules, cached."""

    def __init__(self, book: RuleBook = DEFAULT_BOOK) -> None:
        self.book = book
        self._cache: dict[Signature, Mechanism] = {}
        self.rule_engine_calls = 0

    def __reduce__(self) -> tuple[object, tuple[dict[Signature, Mechanism]]]:
        """Pickled for an executor's worker: the default rule book is rebuilt there
        (its rules hold durable-rules closures), the mechanisms compiled so far go
        along so the worker need not ask the rules again."""
        if self.book is not DEFAULT_BOOK:
            raise TypeError("only a compiler of the default rule book can go to a worker")
        return (_default_compiler, (dict(self._cache),))

    def compile(self, facts: Signature) -> Mechanism:
        found = self._cache.get(facts)
        if found is None:
            found = self._cache[facts] = self._ask_rules(facts)
        return found

    def _ask_rules(self, facts: Signature) -> Mechanism:
        allocation = self._decide(ALLOCATION, facts.allocation_facts())
        ordering = tuple(self._decide(ORDERING, facts.ordering_facts(p)) for p in facts.policies)
        constraints = tuple(
            self._decide(CONSTRAINTS, facts.constraint_facts(kind)) for kind in CONSTRAINT_KINDS
        )
        estimation = self._decide(ESTIMATION, {"framework": facts.framework})
        return Mechanism(allocation, ordering, constraints, estimation)

    def _decide(self, group: str, facts: dict[str, object]) -> KernelChoice:
        self.rule_engine_calls += 1
        choice = decide(self.book, group, facts)
        if choice.kernel == UNSUPPORTED:
            shown = ", ".join(f"{k}={v}" for k, v in facts.items())
            raise SettingsError(f"the comparator has no {group} rule for {shown}")
        return choice


def _default_compiler(cache: dict[Signature, Mechanism]) -> MechanismCompiler:
    compiler = MechanismCompiler()
    compiler._cache.update(cache)
    return compiler
