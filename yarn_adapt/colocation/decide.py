"""The visibility decision (pure): how much of each node batch work may see.

Three policies (``GuardSettings.policy``); all end in the same safety steps.

**slack** (the default, :mod:`~yarn_adapt.colocation.slack`): SLO slack decides
whether batch gives way, each node's self time on the applications' critical paths
where and how much; see that module. **slack-only** (a baseline, Heracles-style) is
its "whether" alone: every node the application's critical path crosses gives way by
the full step.

**toposch-paper** (TopoSch as published), per node, in this order (each step adds to
the decision's reason):

1. **Usable input** (both policies). A node that is not RUNNING is skipped. Evidence
   that cannot be trusted -- the trace store unreadable, no traces in the window, the
   newest trace older than ``stale_after_s`` -- gives the node back whole at once
   (``restore``; ``hold`` if it is whole already): bad data never leaves a node
   throttled. For this policy also: no traces from this node, a normalised risk that
   is not a number in [0, 1], a raw risk that is not a number >= 0.
2. **Gate** (before normalising): a node whose raw risk ``R_n`` is below
   ``min_raw_risk`` is not throttled at all -- batch may see the whole node (through
   the safety steps of 7, so a node lowered earlier grows back gradually). Min-max
   normalisation makes the riskiest node 1 however small its lead; the gate keeps
   crumbs of risk from emptying a node.
3. **Risk** (TopoSch eq. in §4.2.2): ``wanted = capacity * (1 - clip(nu * R, 0, 1))``.
4. **Demand**: never above ``capacity - demand`` where demand is the latency-critical
   applications' pessimistic demand on the node (a learner's upper bound, or
   observed usage plus headroom).
5. **Zero-violation** (optional): while an application with a service on the node
   misses its QoS target, nothing new becomes visible (``wanted <= used``).
6. **Floor**: never below ``capacity * min_visible_fraction``, rounded up (a node with
   any capacity keeps at least 1 MB and 1 vcore when the fraction is above 0). It
   comes after zero-violation: a QoS miss holds a node at what batch uses, never
   below the floor.
7. **Safety** (both policies) against what the scheduler sees now: decreases happen at
   once; increases wait ``cooldown_s`` after the last decrease and then grow by at most
   ``max_step_up_fraction`` of capacity per round; a change within the dead-band
   (``dead_band_fraction`` of capacity in every dimension) is skipped, unless it
   gives the node back whole. A total below the floor (set by an older guard) is
   raised to it at once.

The node agent's reclaim request comes from the same decision: what batch uses now
above what it may see, counted from no lower than the floor
(``used - max(total, floor)``, never negative) -- never more than batch uses above
the target, and with a floor never everything batch runs on the node. It asks the
agent to squeeze; the guard never asks for a kill.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from tracing.model import NodeRisk
from yarn_adapt.colocation import slack
from yarn_adapt.colocation.model import (
    Action,
    AppSlack,
    GuardInputs,
    GuardPlan,
    GuardPolicy,
    GuardSettings,
    NodeDecision,
    NodeDemand,
    NodeMemory,
    NodeView,
    QosReading,
)
from yarn_adapt.durations import duration
from yarn_adapt.model import Resources

NO_MEMORY = NodeMemory()


def decide(
    inputs: GuardInputs, memory: Mapping[str, NodeMemory], settings: GuardSettings
) -> GuardPlan:
    """One decision per observed node, by ``settings.policy``."""
    apps = slack.app_slacks(inputs.qos, settings)
    decisions = tuple(
        decide_node(node, inputs, memory.get(node.node_id, NO_MEMORY), settings, apps)
        for node in inputs.nodes
    )
    return GuardPlan(inputs.now_s, decisions, settings.policy, apps)


def decide_node(
    node: NodeView,
    inputs: GuardInputs,
    memory: NodeMemory,
    settings: GuardSettings,
    apps: tuple[AppSlack, ...] | None = None,
) -> NodeDecision:
    """One node's decision (``apps``: the applications' slack, from ``inputs.qos``
    when not given)."""
    if not node.running:
        return _unchanged(node, Action.SKIP, f"node is {node.state}: no action")
    if settings.policy in (GuardPolicy.SLACK, GuardPolicy.SLACK_ONLY):
        judged = slack.app_slacks(inputs.qos, settings) if apps is None else apps
        return decide_slack_node(node, inputs, memory, settings, judged)
    return decide_paper_node(node, inputs, memory, settings)


def decide_slack_node(
    node: NodeView,
    inputs: GuardInputs,
    memory: NodeMemory,
    settings: GuardSettings,
    apps: tuple[AppSlack, ...],
) -> NodeDecision:
    """The slack policy for one running node (:mod:`~yarn_adapt.colocation.slack`)."""
    problem = evidence_problem(inputs, settings)
    if problem:
        return _released(node, problem, settings)
    paths = slack.node_paths(trace_hosts(node, inputs), inputs, apps)
    state, acting, why = slack.node_state(paths, settings)
    if not apps:
        why.append("no latency-critical application (an entry service with a target) "
                   "has requests in the SLO window")  # fmt: skip
    elif not paths:
        why.append("no latency-critical critical path runs here")
    demand = inputs.demand_of(node.node_id)
    wanted, more = slack.wanted_for(node, state, acting, demand, memory, inputs.now_s, settings)
    why += more
    floor = visible_floor(node.capacity, settings)
    if not floor.fits_in(wanted):
        why.append(floor_words(node.capacity, settings))
        wanted = wanted.component_max(floor)
    wanted = wanted.component_min(node.capacity)
    target, safety = safe_target(node, wanted, memory, inputs.now_s, settings)
    if safety:
        why.append(safety)
    readings = qos_on_node(node, inputs)
    return replace(
        _decision(node, target, wanted, f"{state}: " + "; ".join(why), settings,
                  max((p.share for p in paths), default=0.0), None, demand,
                  readings[0] if readings else None),
        state=state,
        paths=paths,
    )  # fmt: skip


def decide_paper_node(
    node: NodeView, inputs: GuardInputs, memory: NodeMemory, settings: GuardSettings
) -> NodeDecision:
    """TopoSch's published rule for one running node (the module docstring's steps)."""
    risk, problem = node_risk(node, inputs, settings)
    if risk is None:
        return _released(node, problem, settings)
    if risk.raw < settings.min_raw_risk:
        return _below_gate(node, risk, memory, inputs.now_s, settings)
    reserved = min(1.0, max(0.0, settings.nu * risk.normalized))
    demand = inputs.demand_of(node.node_id)
    readings = qos_on_node(node, inputs)
    violated = next((r for r in readings if r.violated), None)
    wanted, why = wanted_visible(
        node, reserved, demand, violated if settings.zero_violation else None, settings
    )
    why.insert(0, f"risk {risk.normalized:.2f} x nu {settings.nu:g}: reserve {reserved:.0%}")
    target, safety = safe_target(node, wanted, memory, inputs.now_s, settings)
    if safety:
        why.append(safety)
    worst = violated or (readings[0] if readings else None)
    return _decision(node, target, wanted, "; ".join(why), settings, risk.normalized, reserved,
                     demand, worst)  # fmt: skip


def _below_gate(
    node: NodeView, risk: NodeRisk, memory: NodeMemory, now_s: float, settings: GuardSettings
) -> NodeDecision:
    """Risk too small to act on: the whole node, through the safety steps."""
    why = f"raw risk {risk.raw:.3g} below the gate {settings.min_raw_risk:g}: not throttled"
    target, safety = safe_target(node, node.capacity, memory, now_s, settings)
    reason = f"{why}; {safety}" if safety else why
    return _decision(node, target, node.capacity, reason, settings, risk.normalized, 0.0)


# --------------------------------------------------------------------------- input


def evidence_problem(inputs: GuardInputs, settings: GuardSettings) -> str:
    """Why the window's evidence cannot be used at all ("" when it can)."""
    snapshot = inputs.risk
    if snapshot is None:
        return f"risk unavailable ({inputs.risk_problem or 'no trace store'})"
    if snapshot.traces == 0:
        return "risk stale: no traces in the window"
    age_s = inputs.now_s - snapshot.window_end_us / 1e6
    if age_s > settings.stale_after_s:
        limit = duration(settings.stale_after_s)
        return f"risk stale: newest traces {duration(age_s)} old (> {limit})"
    return ""


def node_risk(
    node: NodeView, inputs: GuardInputs, settings: GuardSettings
) -> tuple[NodeRisk | None, str]:
    """The node's risk, or None and why it cannot be used."""
    problem = evidence_problem(inputs, settings)
    if problem:
        return None, problem
    risk = _risk_entry(node, inputs)
    if risk is None:
        return None, "no traces from this node in the window"
    if not (math.isfinite(risk.normalized) and 0.0 <= risk.normalized <= 1.0):
        return None, f"risk {risk.normalized!r} is not a number in [0, 1]"
    if not (math.isfinite(risk.raw) and risk.raw >= 0.0):
        return None, f"raw risk {risk.raw!r} is not a number >= 0"
    return risk, ""


def _risk_entry(node: NodeView, inputs: GuardInputs) -> NodeRisk | None:
    """The snapshot's entry for the node: by a configured trace host, by node id, or
    by host name when no other node shares that host."""
    assert inputs.risk is not None
    for host, node_id in inputs.node_hosts.items():
        if node_id == node.node_id and inputs.risk.node(host) is not None:
            return inputs.risk.node(host)
    found = inputs.risk.node(node.node_id)
    if found is not None:
        return found
    sharing = [n for n in inputs.nodes if n.host == node.host]
    return inputs.risk.node(node.host) if len(sharing) == 1 and node.host else None


def trace_hosts(node: NodeView, inputs: GuardInputs) -> frozenset[str]:
    """The trace hosts that stand for the node: configured ones, its node id, and its
    host name when no other node shares that host."""
    mapped = {host for host, node_id in inputs.node_hosts.items() if node_id == node.node_id}
    sharing = [n for n in inputs.nodes if n.host == node.host]
    own = {node.host} if node.host and len(sharing) == 1 else set()
    return frozenset(mapped | {node.node_id} | own)


def qos_on_node(node: NodeView, inputs: GuardInputs) -> list[QosReading]:
    """The QoS readings of the applications with a service on the node, the one
    farthest over (or nearest to) its target first."""
    mapped = {host for host, node_id in inputs.node_hosts.items() if node_id == node.node_id}
    hosts = {node.node_id, node.host} | mapped
    readings = [r for r in inputs.qos if hosts & set(r.nodes)]
    return sorted(readings, key=_pressure, reverse=True)


def _pressure(reading: QosReading) -> float:
    if reading.target_ms and math.isfinite(reading.latency_ms):
        return reading.latency_ms / reading.target_ms
    return 0.0


# --------------------------------------------------------------------------- wanted


def wanted_visible(
    node: NodeView,
    reserved: float,
    demand: NodeDemand | None,
    qos: QosReading | None,
    settings: GuardSettings,
) -> tuple[Resources, list[str]]:
    """What batch should see, before the safety steps, and why."""
    capacity = node.capacity
    memory, vcores = capacity.memory_mb * (1 - reserved), capacity.vcores * (1 - reserved)
    why: list[str] = []
    if demand is not None and demand.usable:
        memory = min(memory, capacity.memory_mb - demand.memory_mb)
        vcores = min(vcores, capacity.vcores - demand.vcores)
        why.append(
            f"demand {demand.vcores:.2f} vcores / {demand.memory_mb:.0f} MB ({demand.source})"
        )
    elif demand is not None:
        why.append(f"demand ignored: not finite ({demand.source})")
    wanted = Resources(math.floor(max(0.0, memory)), math.floor(max(0.0, vcores)))
    if qos is not None:
        wanted = wanted.component_min(node.used.clamped())
        why.append(
            f"zero-violation: {qos.application} p{qos.percentile:g} {qos.latency_ms:.0f} ms "
            f"> {qos.target_ms:g} ms, nothing new visible"
        )
    floor = visible_floor(capacity, settings)
    if not floor.fits_in(wanted):
        why.append(floor_words(capacity, settings))
        wanted = wanted.component_max(floor)
    return wanted.component_min(capacity), why


def visible_floor(capacity: Resources, settings: GuardSettings) -> Resources:
    """What batch always sees of a node: ``min_visible_fraction`` of it, rounded up, and
    never less than the RM's minimum allocation (a NodeManager registering with less is
    shut down by the RM), nor more than the node has."""
    registrable = Resources(settings.min_total_memory_mb, settings.min_total_vcores)
    return _share_floor(capacity, settings).component_max(registrable).component_min(capacity)


def _share_floor(capacity: Resources, settings: GuardSettings) -> Resources:
    """``min_visible_fraction`` of the node, rounded up."""
    return Resources(
        math.ceil(capacity.memory_mb * settings.min_visible_fraction),
        math.ceil(capacity.vcores * settings.min_visible_fraction),
    )


def floor_words(capacity: Resources, settings: GuardSettings) -> str:
    """Which floor binds: the share of the node, or the RM's minimum allocation."""
    if visible_floor(capacity, settings) == _share_floor(capacity, settings):
        return f"floor {settings.min_visible_fraction:.0%} of the node"
    return (
        f"floor {settings.min_visible_fraction:.0%} of the node, at least the RM's minimum "
        f"allocation {settings.min_total_memory_mb} MB / {settings.min_total_vcores} vcores"
    )


def reclaim_above(used: Resources, visible: Resources, floor: Resources) -> Resources:
    """What the node agent is asked to hold back from batch: what batch uses above
    what it may see, counted from no lower than the floor."""
    return (used - visible.component_max(floor)).clamped()


# --------------------------------------------------------------------------- safety


def safe_target(
    node: NodeView, wanted: Resources, memory: NodeMemory, now_s: float, settings: GuardSettings
) -> tuple[Resources, str]:
    """The total to set this round, and the safety step that shaped it (if any)."""
    current, capacity = node.total, node.capacity
    cooling = _cooling_for_s(memory, now_s, settings)
    step = Resources(
        max(1, math.ceil(capacity.memory_mb * settings.max_step_up_fraction)),
        max(1, math.ceil(capacity.vcores * settings.max_step_up_fraction)),
    )
    target = Resources(
        _toward(current.memory_mb, wanted.memory_mb, step.memory_mb, cooling is not None),
        _toward(current.vcores, wanted.vcores, step.vcores, cooling is not None),
    )
    notes = []
    if cooling is not None and _grows(current, wanted):
        notes.append(f"cool-down: lowered {duration(cooling)} ago, growth waits")
    elif target != wanted and _grows(current, wanted):
        notes.append(f"step limit: grows at most {settings.max_step_up_fraction:.0%} a round")
    if target != current and target != capacity and _within_band(current, target, node, settings):
        target = current
        notes = [f"within the dead-band ({settings.dead_band_fraction:.0%}): unchanged"]
    floor = visible_floor(capacity, settings)
    if not floor.fits_in(target):
        target = target.component_max(floor).component_min(capacity)
        notes.append(f"below the {floor_words(capacity, settings)}: raised to it at once")
    return target, "; ".join(notes)


def _cooling_for_s(memory: NodeMemory, now_s: float, settings: GuardSettings) -> float | None:
    """Seconds since the last decrease while the cool-down lasts, else None."""
    if memory.last_lowered_at_s is None:
        return None
    since = now_s - memory.last_lowered_at_s
    return since if since < settings.cooldown_s else None


def _toward(current: int, wanted: int, step: int, cooling: bool) -> int:
    if wanted <= current:
        return wanted
    return current if cooling else min(wanted, current + step)


def _grows(current: Resources, wanted: Resources) -> bool:
    return wanted.memory_mb > current.memory_mb or wanted.vcores > current.vcores


def _within_band(
    current: Resources, target: Resources, node: NodeView, settings: GuardSettings
) -> bool:
    band = settings.dead_band_fraction
    return (
        abs(target.memory_mb - current.memory_mb) <= band * node.capacity.memory_mb
        and abs(target.vcores - current.vcores) <= band * node.capacity.vcores
    )


# --------------------------------------------------------------------------- decisions


def _decision(
    node: NodeView,
    target: Resources,
    wanted: Resources,
    reason: str,
    settings: GuardSettings,
    risk: float | None = None,
    reserved: float | None = None,
    demand: NodeDemand | None = None,
    qos: QosReading | None = None,
) -> NodeDecision:
    return NodeDecision(
        node_id=node.node_id,
        capacity=node.capacity,
        current=node.total,
        target=target,
        wanted=wanted,
        used=node.used,
        reclaim=reclaim_above(node.used, target, visible_floor(node.capacity, settings)),
        action=_action(node, target),
        reason=reason,
        risk=risk,
        reserved_fraction=reserved,
        demand=demand,
        qos=qos,
    )


def _action(node: NodeView, target: Resources) -> Action:
    if target == node.total:
        return Action.HOLD
    if target == node.capacity:
        return Action.RESTORE
    lower = target.memory_mb < node.total.memory_mb or target.vcores < node.total.vcores
    return Action.LOWER if lower else Action.RAISE


def _released(node: NodeView, problem: str, settings: GuardSettings) -> NodeDecision:
    """Bad or stale input: the node whole again (no reclaim), whatever it was."""
    reason = f"{problem}: full capacity" if node.throttled else f"{problem}: left whole"
    return _decision(node, node.capacity, node.capacity, reason, settings)


def _unchanged(node: NodeView, action: Action, reason: str) -> NodeDecision:
    return NodeDecision(
        node_id=node.node_id,
        capacity=node.capacity,
        current=node.total,
        target=node.total,
        wanted=node.total,
        used=node.used,
        reclaim=Resources(0, 0),
        action=action,
        reason=reason,
    )
