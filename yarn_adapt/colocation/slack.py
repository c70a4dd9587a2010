"""The slack policy (pure): SLO slack decides *whether* batch gives way, critical-path
self time decides *where* and *how much*.

Per latency-critical application -- an entry service with a target in
``qos_targets`` and requests in the SLO window -- its slack is ``1 - P95 / target``
and its state (:func:`slack_state`):

- **grow**      slack above ``high_slack_ratio``: batch may see more;
- **hold**      between the watermarks: nothing changes (the band is the hysteresis:
                after a throttle, visibility grows back only once slack is high again);
- **throttle**  slack below ``low_slack_ratio``;
- **emergency** a miss (P95 above the target).

Per node, each application's path there (:class:`~yarn_adapt.colocation.model.NodePath`):
the mean self time per request its spans on the node spent on its critical path (each
span's own work, callees excluded: ``tracing``'s path times), and that as a share of
the target -- an absolute measure, so one traced node can act and a caller's
fraction of a millisecond never outranks its slow callee. The node takes the most
urgent state of the applications whose path it carries (:func:`node_state`):

- a throttled or missing application throttles the nodes where at least
  ``min_path_fraction`` of its target runs (the others hold while it is in trouble:
  they are not where its latency goes);
- a node carrying no application in trouble grows (every slack above the high
  watermark, or no latency-critical path there at all); one carrying an application
  between the watermarks holds.

What a state asks of the node (:func:`wanted_for`), before the safety steps of
:func:`~yarn_adapt.colocation.decide.safe_target` (decreases at once, growth by at most
``max_step_up_fraction`` a round after ``cooldown_s``, the dead-band, the floor):

- grow: the whole node;
- hold: what the scheduler sees now;
- throttle: a step down of ``nu`` x the largest path share of capacity (at most
  ``max_step_down_fraction``), then never above capacity minus the latency-critical
  demand -- once every ``throttle_settle_s`` (the last step needs time to show in the
  window's P95);
- emergency: zero-violation at once -- nothing new visible (``<= used``) -- and the
  throttle step every cycle, without settling (a miss is not waited out: Heracles
  disables batch on one), so the node agent is asked to squeeze what batch uses above
  the lowered total, down to the floor within a few cycles.

The **slack-only** policy (``GuardPolicy.SLACK_ONLY``, a baseline after Heracles: a
slack controller without topology) keeps the "whether" and drops the "where" and "how
much": an application in trouble throttles every node its critical path crosses, by
the full step (``max_step_down_fraction``), whatever its share of the path.

Every decision says, in words, each application's slack and state, the node's share
of its path, and what that asked. A node never goes below the floor; one carrying no
latency-critical path is never throttled, and while every slack is above the high
watermark no node is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from yarn_adapt.colocation.model import (
    AppSlack,
    GuardInputs,
    GuardPolicy,
    GuardSettings,
    NodeDemand,
    NodeMemory,
    NodePath,
    NodeView,
    QosReading,
    SlackState,
)
from yarn_adapt.durations import duration
from yarn_adapt.model import Resources

URGENCY = {SlackState.GROW: 0, SlackState.HOLD: 1, SlackState.THROTTLE: 2,
           SlackState.EMERGENCY: 3}  # fmt: skip


# --------------------------------------------------------------------------- whether


def slack_state(slack_ratio: float, settings: GuardSettings) -> SlackState:
    if slack_ratio < 0:
        return SlackState.EMERGENCY
    if slack_ratio < settings.low_slack_ratio:
        return SlackState.THROTTLE
    if slack_ratio > settings.high_slack_ratio:
        return SlackState.GROW
    return SlackState.HOLD


def app_slacks(qos: Sequence[QosReading], settings: GuardSettings) -> tuple[AppSlack, ...]:
    """Every latency-critical application (a reading with a target and requests)."""
    slacks = [s for s in (app_slack(r, settings) for r in qos) if s is not None]
    return tuple(sorted(slacks, key=lambda a: a.application))


def app_slack(reading: QosReading, settings: GuardSettings) -> AppSlack | None:
    """The reading judged against its target; None without a target or requests."""
    target, latency = reading.target_ms, reading.latency_ms
    if target is None or not (math.isfinite(target) and target > 0):
        return None
    if reading.requests <= 0 or not math.isfinite(latency):
        return None
    state = slack_state(1.0 - latency / target, settings)
    return AppSlack(
        reading.application, latency, reading.percentile, target, reading.requests, state
    )


# --------------------------------------------------------------------------- where


def node_paths(
    hosts: frozenset[str], inputs: GuardInputs, apps: Sequence[AppSlack]
) -> tuple[NodePath, ...]:
    """Each application's critical path on the node whose trace hosts are ``hosts``."""
    if inputs.risk is None:
        return ()
    paths = []
    for app in apps:
        self_us = sum(p.self_us for p in inputs.risk.paths_of(app.application) if p.node in hosts)
        if self_us > 0:
            paths.append(
                NodePath(app.application, self_us / 1000.0, app.target_ms, app.state,
                         app.slack_ratio)
            )  # fmt: skip
    return tuple(paths)


def node_state(
    paths: Sequence[NodePath], settings: GuardSettings
) -> tuple[SlackState, tuple[NodePath, ...], list[str]]:
    """The node's state, the paths that make it give way (throttle, emergency), and
    why, one clause per application."""
    why = [_path_words(p, settings) for p in paths]
    acting = tuple(p for p in paths if _gives_way(p, settings))
    if acting:
        return max((p.state for p in acting), key=URGENCY.__getitem__), acting, why
    if any(p.state is not SlackState.GROW for p in paths):
        return SlackState.HOLD, (), why
    return SlackState.GROW, (), why


def _gives_way(path: NodePath, settings: GuardSettings) -> bool:
    trouble = path.state in (SlackState.THROTTLE, SlackState.EMERGENCY)
    return trouble and path.share >= _min_path_fraction(settings)


def _min_path_fraction(settings: GuardSettings) -> float:
    """slack-only has no "where": any share of the path is enough."""
    return 0.0 if settings.policy is GuardPolicy.SLACK_ONLY else settings.min_path_fraction


def _path_words(path: NodePath, settings: GuardSettings) -> str:
    words = (
        f"{path.application} slack {path.slack_ratio:.0%} ({path.state}); "
        f"{path.self_ms:.1f} ms of its {path.target_ms:g} ms target on its critical path "
        f"here ({path.share:.0%})"
    )
    floor = _min_path_fraction(settings)
    if path.share < floor and path.state is not SlackState.GROW:
        words += f", under {floor:.0%}: not where its latency goes"
    return words


# --------------------------------------------------------------------------- how much


def wanted_for(
    node: NodeView,
    state: SlackState,
    acting: Sequence[NodePath],
    demand: NodeDemand | None,
    memory: NodeMemory,
    now_s: float,
    settings: GuardSettings,
) -> tuple[Resources, list[str]]:
    """What batch should see in ``state``, before the safety steps, and why."""
    if state is SlackState.GROW:
        return node.capacity, ["every latency-critical slack is comfortable: batch may see more"]
    if state is SlackState.HOLD:
        return node.total, ["hold: no slack below the low watermark where its path runs here"]
    emergency = state is SlackState.EMERGENCY
    wanted, why = _stepped_down(node, acting, memory, now_s, settings, settle=not emergency)
    if emergency:
        wanted = wanted.component_min(node.used.clamped())
        missed = [p.application for p in acting if p.state is SlackState.EMERGENCY]
        why.append(f"zero-violation: {', '.join(missed)} over target, nothing new visible")
    return _within_demand(node, wanted, demand, why), why


def _stepped_down(
    node: NodeView,
    acting: Sequence[NodePath],
    memory: NodeMemory,
    now_s: float,
    settings: GuardSettings,
    *,
    settle: bool,
) -> tuple[Resources, list[str]]:
    settling = _settling_for_s(memory, now_s, settings) if settle else None
    if settling is not None:
        return node.total, [f"settling: lowered {duration(settling)} ago, no further step yet"]
    share = max(p.share for p in acting)
    if settings.policy is GuardPolicy.SLACK_ONLY:
        fraction = settings.max_step_down_fraction
        why = f"step down {fraction:.0%} of the node (slack-only: the full step)"
    else:
        fraction = min(settings.max_step_down_fraction, settings.nu * share)
        why = f"step down {fraction:.0%} of the node (nu {settings.nu:g} x path share {share:.0%})"
    capacity = node.capacity
    step = Resources(
        math.ceil(capacity.memory_mb * fraction), math.ceil(capacity.vcores * fraction)
    )
    return (node.total - step).clamped(), [why]


def _settling_for_s(memory: NodeMemory, now_s: float, settings: GuardSettings) -> float | None:
    if memory.last_lowered_at_s is None:
        return None
    since = now_s - memory.last_lowered_at_s
    return since if since < settings.throttle_settle_s else None


def _within_demand(
    node: NodeView, wanted: Resources, demand: NodeDemand | None, why: list[str]
) -> Resources:
    """Never above the node minus the latency-critical demand on it."""
    if demand is None:
        return wanted
    if not demand.usable:
        why.append(f"demand ignored: not finite ({demand.source})")
        return wanted
    bound = Resources(
        math.floor(max(0.0, node.capacity.memory_mb - demand.memory_mb)),
        math.floor(max(0.0, node.capacity.vcores - demand.vcores)),
    )
    if not wanted.fits_in(bound):
        why.append(
            f"demand {demand.vcores:.2f} vcores / {demand.memory_mb:.0f} MB ({demand.source})"
        )
    return wanted.component_min(bound)
