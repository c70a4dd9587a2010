"""The ``[cilantro]`` table of ``yarn-adapt.toml``: the Cilantro proposer's policy
and each queue's SLO (read when ``[tuning] proposer = "cilantro"``).

``queues`` overrides the defaults per queue, one string each:
``"root.a latency_s=60 fraction=0.95 utility=sqrt"`` (any of the keys), or
``"root.b demand_vcores=16"``: a stated demand (§5's fallback) instead of a learned one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from yarn_adapt.demand.utility import QueueObjective, UtilityShape
from yarn_adapt.errors import SettingsError

POLICIES = ("njc", "sw", "ew")
OVERRIDES = ("latency_s", "fraction", "utility", "demand_vcores")
PROPOSERS = ("adaptiveconfig", "cilantro")


@dataclass(frozen=True, kw_only=True)
class CilantroSection:
    policy: str = "njc"
    latency_s: float = 600.0
    fraction: float = 0.9
    utility: str = "linear"
    queues: tuple[str, ...] = ()
    max_step: float = 0.1
    beta: float = 0.75
    confidence: float = 0.9
    lipschitz: float = 0.5
    max_vcores_per_app: float = 64.0


def check_cilantro(section: CilantroSection, source: str) -> None:
    """Ranges and choices; every ``queues`` entry must parse."""
    rules = [
        ("policy", section.policy in POLICIES, f"one of {', '.join(POLICIES)}"),
        ("latency_s", section.latency_s > 0, "must be positive"),
        ("fraction", 0 < section.fraction <= 1, "in (0, 1]"),
        ("utility", section.utility in tuple(UtilityShape), "linear, quadratic or sqrt"),
        ("max_step", 0 < section.max_step <= 1, "in (0, 1] (a fraction of the cluster)"),
        ("beta", 0 <= section.beta <= 1, "in [0, 1]"),
        ("confidence", 0 < section.confidence < 1, "in (0, 1)"),
        ("lipschitz", section.lipschitz > 0, "must be positive"),
        ("max_vcores_per_app", section.max_vcores_per_app > 0, "must be positive"),
    ]
    for key, ok, expectation in rules:
        if not ok:
            raise SettingsError(
                f"{source}: [cilantro] {key}: {getattr(section, key)!r} {expectation}"
            )
    queue_objectives(section, (), source)


def queue_objectives(
    section: CilantroSection, leaves: Sequence[str], source: str = "<settings>"
) -> dict[str, QueueObjective]:
    """The SLO of every leaf in ``leaves`` (defaults, then the overrides); an
    override may name a queue by path or by leaf name."""
    overrides = dict(_override(entry, source) for entry in section.queues)
    result = {}
    for leaf in leaves:
        given = overrides.get(leaf) or overrides.get(leaf.rsplit(".", 1)[-1]) or {}
        result[leaf] = QueueObjective(
            leaf,
            float(given.get("latency_s", section.latency_s)),
            float(given.get("fraction", section.fraction)),
            UtilityShape(given.get("utility", section.utility)),
            float(given["demand_vcores"]) if "demand_vcores" in given else None,
        )
    return result


def _override(entry: str, source: str) -> tuple[str, dict[str, str]]:
    where = f"{source}: [cilantro] queues {entry!r}"
    queue, *pairs = entry.split()
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in OVERRIDES:
            raise SettingsError(
                f"{where}: expected latency_s=, fraction=, utility= or demand_vcores=, got {pair!r}"
            )
        values[key] = value
    if not pairs:
        raise SettingsError(f"{where}: name a queue and at least one of {', '.join(OVERRIDES)}")
    try:
        objective = QueueObjective(
            queue,
            float(values.get("latency_s", "1")),
            float(values.get("fraction", "0.5")),
            UtilityShape(values.get("utility", "linear")),
            float(values.get("demand_vcores", "1")),
        )
    except ValueError as exc:
        raise SettingsError(f"{where}: {exc}") from exc
    stated = objective.stated_vcores or 0.0
    if not (objective.latency_s > 0 and 0 < objective.fraction <= 1 and stated > 0):
        raise SettingsError(
            f"{where}: latency_s and demand_vcores must be positive and fraction in (0, 1]"
        )
    return queue, values
