"""What the rules decide: a compiled mechanism.

The rule engine reasons over the facts of a candidate configuration and emits, per
activation group, one :class:`KernelChoice`: the name of a numeric kernel and its
*bindings* -- which configured value feeds which kernel input (say, the Capacity
Scheduler's ceiling is ``maximum`` when queues are elastic, ``capacity`` when they
are not). :class:`Mechanism` gathers the four groups' choices; the numeric engine
(:mod:`rules.engine`) runs Algorithm 1 with the kernels it names and never decides
mechanism itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelChoice:
    """A kernel name, its bindings, and the rule that chose it (for explanations)."""

    kernel: str
    bindings: tuple[tuple[str, str], ...] = ()
    rule: str = ""

    def binding(self, key: str, default: str = "") -> str:
        return next((v for k, v in self.bindings if k == key), default)

    @classmethod
    def of(cls, kernel: str, rule: str, bindings: Mapping[str, str]) -> KernelChoice:
        return cls(kernel, tuple(sorted(bindings.items())), rule)


@dataclass(frozen=True)
class Mechanism:
    """The four activation groups' decisions for one configuration signature.

    ``allocation``: resource allocation among queues; ``ordering``: the job policy of
    each queue (queue order); ``constraints``: one checker per constraint kind
    (queue bounds, AM containers, machine placement); ``estimation``: how a job's
    tasks turn containers into execution time."""

    allocation: KernelChoice
    ordering: tuple[KernelChoice, ...]
    constraints: tuple[KernelChoice, ...]
    estimation: KernelChoice

    def constraint(self, kind: str) -> KernelChoice:
        return next(c for c in self.constraints if c.binding("kind") == kind)

    def rules_fired(self) -> tuple[str, ...]:
        choices = (self.allocation, *self.ordering, *self.constraints, self.estimation)
        return tuple(c.rule for c in choices)
