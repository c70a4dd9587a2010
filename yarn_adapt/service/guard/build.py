"""The guard built from ``[colocation]`` and ``[tracing]``: its decision settings, the
trace store and its limits, the demand the guard protects (declared or learned), the
risk source, the actuator on node totals or a queue cap, and the assembled
:class:`~yarn_adapt.service.guard.step.GuardStep`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracing.redisconn import RedisConfig, make_client
from tracing.risk import RiskSettings
from tracing.store import StoreLimits, TraceStore
from yarn_adapt.colocation.actuate import Actuator, RmNodeTotals
from yarn_adapt.colocation.demand import DemandProvider, NoDemand, ObservedUsageDemand
from yarn_adapt.colocation.guard import ColocationGuard, GuardRecorder
from yarn_adapt.colocation.lra import LearnedLraDemand, NodeUtilizationUsage, load_warm_start
from yarn_adapt.colocation.metricslatency import MetricsLatency
from yarn_adapt.colocation.mirror import DynamicResourcesMirror
from yarn_adapt.colocation.model import (
    GuardMode,
    GuardPolicy,
    GuardSettings,
)
from yarn_adapt.colocation.observe import GuardObserver, RiskSource, TraceReader, TraceStoreRisk
from yarn_adapt.colocation.queuecap import QueueCap
from yarn_adapt.demand.lra import LraDemandLearner, LraMode, LraSettings, LraSpec
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.guard.records import GuardStore, ServiceRecorder
from yarn_adapt.service.settings import (
    ColocationSection,
    Settings,
    TracingSection,
    guarded_applications,
    pairs,
    redis_password,
    redis_password_setting,
)
from yarn_adapt.service.state.store import SqliteJournal, Store
from yarn_adapt.yarn.apply import PollSettings


def decision_settings(section: ColocationSection) -> GuardSettings:
    try:
        return GuardSettings(
            policy=GuardPolicy(section.policy),
            low_slack_ratio=section.low_slack_ratio,
            high_slack_ratio=section.high_slack_ratio,
            min_path_fraction=section.min_path_fraction,
            max_step_down_fraction=section.max_step_down_fraction,
            throttle_settle_s=section.throttle_settle_s,
            nu=section.nu,
            zero_violation=section.zero_violation,
            min_visible_fraction=section.min_visible_fraction,
            min_raw_risk=section.min_raw_risk,
            dead_band_fraction=section.dead_band_fraction,
            max_step_up_fraction=section.max_step_up_fraction,
            cooldown_s=section.cooldown_s,
            stale_after_s=section.stale_after_s,
            millicores_per_vcore=section.millicores_per_vcore,
            min_total_memory_mb=section.min_total_memory_mb,
            min_total_vcores=section.min_total_vcores,
        )
    except ValueError as exc:  # also an unknown policy
        raise SettingsError(f"[colocation] {exc}") from exc


def redis_config(settings: Settings, url: str | None = None) -> RedisConfig:
    """How to reach the trace store: ``[tracing]``'s connection settings (``url``
    instead of its ``redis_url`` when given), naming where the password came from."""
    section = settings.tracing
    return RedisConfig(
        url=url or section.redis_url,
        password=redis_password(settings),
        password_setting=redis_password_setting(settings),
        tls=section.tls,
        ca_bundle=section.ca_bundle,
        verify_tls=section.verify_tls,
        timeout_s=section.timeout_s,
        prefix=section.prefix,
    )


def trace_store_opener(settings: Settings) -> TraceStoreOpener:
    section = settings.tracing
    config = redis_config(settings)
    return TraceStoreOpener(config, store_limits(section))


def store_limits(section: TracingSection) -> StoreLimits:
    """The trace store's bounds from ``[tracing]``: retention, the memory budget (traces,
    their names and the dead-letter records) and the dead-letter stream's length."""
    return StoreLimits(
        retention_s=section.retention_s,
        memory_budget_bytes=int(section.memory_budget_mb * (1 << 20)),
        dead_letter_entries=section.dead_letter_entries,
    )


@dataclass(frozen=True)
class TraceStoreOpener:
    config: RedisConfig
    limits: StoreLimits

    def __call__(self) -> TraceStore:
        return TraceStore(make_client(self.config), self.config, self.limits)


def demand_provider(settings: Settings) -> DemandProvider:
    """``[colocation] demand``: each latency-critical application's own learner
    (``learned``, the default, and ``stated``: :func:`lra_demand`), usage plus
    headroom (``observed``), or ``none``."""
    section = settings.colocation
    if section.demand == "none":
        return NoDemand()
    if section.demand in ("learned", "stated"):
        return lra_demand(settings)
    return observed_demand(section)


def observed_demand(section: ColocationSection) -> ObservedUsageDemand:
    return ObservedUsageDemand(
        headroom=section.demand_headroom, vcores_per_core=section.vcores_per_core
    )


def lra_demand(settings: Settings) -> LearnedLraDemand:
    """The applications of ``[colocation] applications`` (else each service of
    ``qos_targets`` on its own), each with the latency target of its first service
    in ``qos_targets`` (the percentile is ``qos_percentile``), its stated demand and
    warm-start curve; CPU and memory from the NodeManagers' utilization; observed
    usage on a node until its applications' learners have ``learn_min_rounds``
    rounds; ``share_policy`` where several share a node."""
    section = settings.colocation
    applications = guarded_applications(section)
    targets = {name.strip(): float(ms) for name, ms in pairs(section.qos_targets).items()}
    stated = {app.strip(): float(value) for app, value in pairs(section.stated_demand).items()}
    curves = {app.strip(): load_warm_start(Path(path.strip()))
              for app, path in pairs(section.warm_start).items()}  # fmt: skip
    specs = [
        LraSpec(
            name=app,
            services=services,
            target_ms=next((targets[s] for s in services if s in targets), None),
            percentile=min(section.qos_percentile, 99.9),
            stated=stated.get(app),
            warm_start=curves.get(app),
        )
        for app, services in applications.items()
    ]
    learning = LraSettings(
        mode=LraMode(section.demand),
        range_factor=section.learn_range,
        slope=section.learn_slope,
        min_requests=section.learn_min_requests,
        confidence=section.learn_confidence,
    )
    hosts = {k.strip(): v.strip() for k, v in pairs(section.node_hosts).items()}
    try:
        learner = LraDemandLearner(specs, learning)
    except ValueError as exc:
        raise SettingsError(f"{settings.source}: [colocation] {exc}") from exc
    usage = NodeUtilizationUsage(applications, hosts, section.vcores_per_core)
    return LearnedLraDemand(
        learner,
        usage,
        round_s=section.learn_round_s,
        vcores_per_core=section.vcores_per_core,
        node_hosts=hosts,
        reserve=section.reserve,
        memory=usage,
        fallback=observed_demand(section),
        min_rounds=section.learn_min_rounds,
        share=section.share_policy,
    )


def build_guard(
    settings: Settings,
    backend: YarnBackend,
    store: Store,
    guard_store: GuardStore,
    proposer: object = None,
) -> ColocationGuard:
    """The guard of ``[colocation]``. (``proposer``, the configurator's, is not
    read: the guard's demand learners are its own, :func:`lra_demand`.)"""
    section = settings.colocation
    risk: RiskSource = trace_risk(settings, trace_store_opener(settings))
    if section.latency_metrics:  # the latency from the endpoints, the paths from traces
        risk = MetricsLatency(
            risk, pairs(section.latency_metrics), histogram=section.latency_histogram,
            percentile=section.qos_percentile, slo_window_s=section.slo_window_s,
            targets_ms=qos_targets(section),
        )  # fmt: skip
    actuator = guard_actuator(settings, backend, store)
    return assemble_guard(settings, risk, actuator, ServiceRecorder(store, guard_store))


def qos_targets(section: ColocationSection) -> dict[str, float]:
    return {name: float(ms) for name, ms in pairs(section.qos_targets).items()}


def trace_risk(settings: Settings, open_store: Callable[[], TraceReader]) -> TraceStoreRisk:
    """Risk, path times and QoS over ``[tracing] window_s`` of a trace store."""
    section = settings.colocation
    return TraceStoreRisk(
        open_store,
        window_s=settings.tracing.window_s,
        risk_settings=RiskSettings(
            alpha=settings.tracing.alpha, min_share=settings.tracing.critical_min_share
        ),
        percentile=section.qos_percentile,
        targets_ms=qos_targets(section),
        slo_window_s=section.slo_window_s,
    )


def assemble_guard(
    settings: Settings,
    risk: RiskSource,
    actuator: Actuator,
    recorder: GuardRecorder,
    clock: Callable[[], float] = time.time,
) -> ColocationGuard:
    """The guard of ``[colocation]`` on these sources: what :func:`build_guard` builds
    beside a real RM, and the demo beside its simulated one."""
    section = settings.colocation
    observer = GuardObserver(risk, demand_provider(settings), clock=clock,
                             node_hosts=pairs(section.node_hosts))  # fmt: skip
    mode = section.mode if section.enabled else GuardMode.OFF
    ttl = section.reclaim_ttl_s or 3 * section.period_s
    return ColocationGuard(decision_settings(section), observer, actuator, recorder,
                           mode=mode, reclaim_ttl_s=ttl, clock=clock)  # fmt: skip


def guard_actuator(settings: Settings, backend: YarnBackend, store: Store) -> Actuator:
    """The RM's node totals, or (``actuator = "queue-cap"``) the batch queue's cap
    through the configurator's applier and journal."""
    section = settings.colocation
    if section.actuator == "queue-cap":
        journal = SqliteJournal(store)
        return QueueCap(
            backend.document,
            lambda: backend.applier(journal),
            section.batch_queue,
            settings.state.state_dir,
            via="mutation" if backend.path is None else str(backend.path),
            dead_band_percent=100 * section.dead_band_fraction,
        )
    mirror = None
    if section.dynamic_resources_file:
        mirror = DynamicResourcesMirror(
            Path(section.dynamic_resources_file).expanduser(),
            settings.state.state_dir / "guard",
            section.refresh_nodes_resources_command,
        )
    return RmNodeTotals(
        backend.rm,
        settings.state.state_dir,
        verify=PollSettings(timeout_s=section.verify_timeout_s, interval_s=0.25),
        mirror=mirror,
    )
