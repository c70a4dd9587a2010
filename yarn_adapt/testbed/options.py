"""The testbed's options: the phases it measures, :class:`TestbedOptions`, and the
``--set KEY=VALUE`` keys of ``yarn-adapt testbed`` and ``bench testbed``
(:func:`options_from`). The guard's and the agents' own settings are not options:
they are the product's, in ``conf/testbed/`` (:mod:`yarn_adapt.testbed.product`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from yarn_adapt.colocation.model import GuardPolicy
from yarn_adapt.errors import SettingsError
from yarn_adapt.set_keys import SetSpec, field_keys, whole, word

OFF, GUARD, ON = "off", "guard", "on"
# the baselines (``baselines``): what an operator would try first, and the guard's two
# other policies, each with the node agents as "on" has them
STATIC, SLACK_ONLY, PAPER = "static", "slack-only", "toposch-paper"
BASELINES = (STATIC, SLACK_ONLY, PAPER)


PHASES = {
    "alone": "the application without batch work",
    OFF: "batch, no guard, no agent: YARN with its CPU weights",
    GUARD: "batch, the guard alone (node visibility); no agent runs",
    ON: "batch, the guard and the node agents (visibility + gradual reclaim)",
    STATIC: "batch, no guard; the risky node (pricing's) closed to batch by the testbed "
    "(its total at the guard's floor, set once through the RM, as an operator would)",
    SLACK_ONLY: "batch, the guard's slack-only policy (Heracles-style: slack decides "
    "whether, every node of the path gives way) and the node agents",
    PAPER: "batch, the guard's toposch-paper policy (TopoSch as published: min-max risk "
    "x nu) and the node agents",
}
# The row of ``policies`` in the JSON each phase measures.
POLICY_ROWS = {OFF: "off", STATIC: "static", SLACK_ONLY: "slack-only", PAPER: "toposch-paper",
               ON: "yarn-adapt", GUARD: "yarn-adapt-no-agents"}  # fmt: skip
# The guard's policy in each phase it runs in (ON and GUARD: ``policy``).
PHASE_POLICIES = {SLACK_ONLY: "slack-only", PAPER: "toposch-paper"}
AGENT_PHASES = (ON, SLACK_ONLY, PAPER)  # the phases the node agents run in


DEMANDS = ("settings", "observed", "learned", "none")
PROFILES = ("steady", "steps")  # the load generator's
BATCH_MIXES = ("cpu", "mix")


@dataclass(frozen=True, kw_only=True)
class TestbedOptions:
    rate_rps: float = 20.0  # the load's mean
    # steady, or steps: low, high, low and a burst over each phase_s (loadgen.STEPS),
    # so every window sees one whole cycle
    load_profile: str = "steps"
    warmup_s: float = 5.0
    alone_s: float = 15.0
    phase_s: float = 20.0
    repeats: int = 3
    settle_max_s: float = 15.0
    burn_s: float = 1.5  # CPU seconds per streaming batch container
    # cpu: arithmetic burners; mix: half of the containers copy 64 MB buffers instead
    # (a memory-bandwidth hog; burner.py)
    batch_mix: str = "mix"
    container_mb: int = 512
    makespan: bool = True
    job_containers: int = 8
    job_burn_s: float = 3.0
    cpu_shares: int = 8192  # the testbed's cpu cgroup weight on the shared host
    policy: str = "slack"  # the guard's: slack, or toposch-paper (TopoSch as published)
    guard_only: bool = True  # also measure the guard without the agents
    baselines: bool = True  # also measure static, slack-only and toposch-paper
    # YARN's CPU weights: each container in hadoop-yarn-<node>/<id>, cpu.shares 1024 x
    # vcores (yarncgroups.py); off: batch and services compete as equal tasks
    yarn_cgroups: bool = True
    qos_target_factor: float = 1.2  # the QoS target: x the traced run-alone P95
    # the guard's [colocation] demand: "settings" (as conf/testbed/yarn-adapt.toml
    # says), or observed, learned, none instead
    demand: str = "settings"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.rate_rps <= 0 or self.phase_s <= 0 or self.alone_s <= 0:
            raise ValueError("repeats, rate_rps, phase_s and alone_s must be positive")
        if self.policy not in {str(p) for p in GuardPolicy}:
            raise ValueError(f"policy {self.policy!r}: one of {', '.join(map(str, GuardPolicy))}")
        if self.cpu_shares <= 0:
            raise ValueError("cpu_shares must be positive (the agents' cgroups live in it)")
        if self.load_profile not in PROFILES:
            raise ValueError(f"load_profile {self.load_profile!r}: one of {', '.join(PROFILES)}")
        if self.batch_mix not in BATCH_MIXES:
            raise ValueError(f"batch_mix {self.batch_mix!r}: one of {', '.join(BATCH_MIXES)}")
        if self.demand not in DEMANDS:
            raise ValueError(f"demand {self.demand!r}: one of {', '.join(DEMANDS)}")
        if self.qos_target_factor <= 0:
            raise ValueError("qos_target_factor must be positive")

    @property
    def alone_window_s(self) -> float:
        """An alone window's length: ``alone_s``, made whole cycles of the load's steps
        (each ``phase_s`` long) so it sees the same load as the phases."""
        if self.load_profile == "steady":
            return self.alone_s
        return math.ceil(self.alone_s / self.phase_s) * self.phase_s

    @property
    def phases(self) -> tuple[str, ...]:
        """The phases a repeat measures, each once."""
        guard = (GUARD,) if self.guard_only else ()
        return (ON, OFF, *guard, *(BASELINES if self.baselines else ()))

    @property
    def order(self) -> list[str]:
        """Counterbalanced: repeat ``r`` runs :attr:`phases` rotated right by ``r``, a
        cyclic Latin square (on off guard | guard on off | off guard on; on off | off
        on without guard): over as many repeats as phases each phase takes every
        position once. The first phase is ``on``: the stream's first containers all
        start at once, a burst that another phase would add to its own figure."""
        phases = self.phases
        rows = [phases[-r:] + phases[:-r] if r else phases for r in range(len(phases))]
        return [phase for r in range(self.repeats) for phase in rows[r % len(rows)]]

    @property
    def jobs(self) -> tuple[str, ...]:
        """The phases a makespan job runs in (``makespan``)."""
        guard = (GUARD,) if self.guard_only else ()
        return (OFF, *guard, ON, *(BASELINES if self.baselines else ()))


QUICK = {"alone_s": 6.0, "phase_s": 8.0, "repeats": 3, "settle_max_s": 8.0,
         "job_containers": 4, "job_burn_s": 2.0}  # fmt: skip


class Knobs:
    """The ``--set`` keys of a kind of their own; every other :class:`TestbedOptions`
    field is a key of its type (:func:`~yarn_adapt.set_keys.field_keys`)."""

    policy = word("policy", tuple(str(p) for p in GuardPolicy), str(GuardPolicy.SLACK))
    demand = word("demand", DEMANDS, "settings")
    load_profile = word("load_profile", PROFILES, "steps")
    batch_mix = word("batch_mix", BATCH_MIXES, "mix")
    seed = whole("seed", None)  # default: --seed


OWN_KINDS = {"policy", "seed", "demand", "load_profile", "batch_mix"}
SET_KEYS = SetSpec.of("testbed", Knobs).with_keys(
    *(k for k in field_keys(TestbedOptions(), quick=QUICK) if k.name not in OWN_KINDS)
)


def options_from(quick: bool, seed: int, overrides: Mapping[str, str]) -> TestbedOptions:
    """The testbed's options: the full or quick form, then ``KEY=VALUE`` overrides
    (a field of :class:`TestbedOptions`); a bad key or value is a SettingsError."""
    values = SET_KEYS.read(overrides, quick=quick).by_name()
    if values["seed"] is None:
        values["seed"] = seed
    try:
        return TestbedOptions(**values)
    except ValueError as exc:
        raise SettingsError(f"testbed: {exc}") from exc
