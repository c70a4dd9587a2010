"""The doctor's checks (pure): each piece of the co-location half judged from what
:mod:`yarn_adapt.doctor.observe` read, in the order the guard needs them.

1. **ResourceManager**: the active RM answers, and the guard's write is allowed for
   the service's identity -- ``updateNodeResource`` (a POST of a node's own total,
   which changes nothing) or, with ``actuator = "queue-cap"``, the scheduler-conf
   mutation API (its admin check, through ``GET /scheduler-conf``) or the scheduler
   file.
2. **Redis**: it answers, has a memory cap above the trace store's budget with
   ``noeviction``, is not nearly full, and the store keeps within its budget.
3. **traces**: each latency-critical entry service (``qos_targets``) has a trace that
   ended within ``stale_after_s`` -- what the guard needs before it throttles.
4. **node agents**: every RUNNING node the RM lists has an agent report younger than
   the guard's reclaim requests live (``reclaim_ttl_s``, three guard periods).
5. **clocks**: the RM's (its reply's Date header) and Redis's (``TIME``) within
   ``[tracing] max_clock_ahead_s`` of this host's, allowing for the round trip and
   the header's whole seconds.

A piece whose input could not be read because an earlier piece failed is skipped,
saying why; with the guard not enabled only the ResourceManager is checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from yarn_adapt.colocation.follow import words
from yarn_adapt.doctor.model import (
    AgentsReading,
    ClockReading,
    Diagnosis,
    Expectations,
    FileProbe,
    Finding,
    MutationProbe,
    NodeResourceProbe,
    NotProbed,
    Observation,
    Probe,
    RedisReading,
    RmReading,
    Status,
    TracesReading,
    Unprobed,
    Unread,
)
from yarn_adapt.durations import duration
from yarn_adapt.model import NodeState
from yarn_adapt.service.settings import Settings, pairs

MB = 1 << 20
NEARLY_FULL_RATIO = 0.9  # Redis this close to its cap refuses writes soon
OVER_BUDGET_FACTOR = 1.1  # the worker trims between reads: a little over is normal
LISTED = 5  # node names named in a line before "and N more"

LABELS = {
    "rm": "ResourceManager",
    "redis": "Redis",
    "traces": "traces",
    "agents": "node agents",
    "clocks": "clocks",
}

RM_FIX = (
    "check that [yarn] rm (or yarn-site.xml in $HADOOP_CONF_DIR) names the RM's web "
    "address and that the RM runs"
)
ADMIN_FIX = (
    "make {user} a YARN admin (yarn.admin.acl in yarn-site.xml, then yarn rmadmin "
    '-refreshAdminAcls), or set [colocation] actuator = "queue-cap" with a batch_queue'
)
MUTATION_ADMIN_FIX = (
    "make {user} a YARN admin (yarn.admin.acl in yarn-site.xml, then yarn rmadmin "
    "-refreshAdminAcls)"
)
KERBEROS_FIX = (
    "a secured RM needs [yarn] kerberos = true with kerberos_principal and kerberos_keytab "
    "(or a kinit ticket); a simple-auth RM needs [yarn] user"
)
REDIS_FIX = (
    "start Redis (systemctl status redis-server) and check [tracing] redis_url and the "
    "password ($YARN_ADAPT_REDIS_PASSWORD, [tracing] redis_password_file or redis_password)"
)
SERVICE_FIX = (
    "start the service (yarn-adapt serve --config TOML: the agents report to it) and make "
    "[http] host and port (or public_url) say where it listens"
)
AGENT_FIX = (
    "start the node agent there (systemctl status yarn-adapt-agent); its [agent] node_id "
    "must be the RM's node id (host:port) and its token issued for that node "
    "(yarn-adapt agent-token issue NODE)"
)
LATE_FIX = (
    "an agent reports with every poll: keep its [service] poll_interval_s below "
    "[colocation] reclaim_ttl_s (three guard periods by default), or it misses the "
    "guard's requests"
)
INGEST_FIX = (
    "is the ingest worker running (systemctl status yarn-adapt-ingest)? does {services} "
    "send its spans (OTEL_SERVICE_NAME, the exporter getting 200 from the receiver)?"
)
ENTRY_FIX = "qos_targets must name the entry service, the root of its traces"
CLOCK_FIX = (
    "synchronise the clocks with NTP (chrony or systemd-timesyncd) on this host and on "
    "{hosts}: the guard judges trace freshness on its own clock"
)


def expectations(settings: Settings) -> Expectations:
    """What ``settings`` ask of the pieces."""
    section = settings.colocation
    return Expectations(
        colocation_enabled=section.enabled,
        actuator=section.actuator,
        services=tuple(name.strip() for name in pairs(section.qos_targets)),
        stale_after_s=section.stale_after_s,
        report_within_s=section.reclaim_ttl_s or 3 * section.period_s,
        max_clock_ahead_s=settings.tracing.max_clock_ahead_s,
        memory_budget_mb=settings.tracing.memory_budget_mb,
    )


def diagnose(seen: Observation, expected: Expectations) -> Diagnosis:
    """One finding per piece, in order (only the RM's when the guard is not enabled)."""
    rm = check_rm(seen.rm, seen.access)
    if not expected.colocation_enabled:
        return Diagnosis(False, (rm,))
    return Diagnosis(
        True,
        (
            rm,
            check_redis(seen.redis, expected),
            check_traces(seen.redis, seen.traces, expected),
            check_agents(seen.rm, seen.agents, expected),
            check_clocks(seen.rm, seen.redis, expected),
        ),
    )


def _finding(piece: str, status: Status, summary: str, fix: str = "", **figures: Any) -> Finding:
    return Finding(piece, LABELS[piece], status, summary, fix, figures)


# --------------------------------------------------------------------------- 1. the RM


def check_rm(rm: RmReading | Unread, access: Probe | Unread | None) -> Finding:
    if isinstance(rm, Unread):
        return _finding("rm", Status.WRONG, f"cannot reach the ResourceManager: {rm.why}",
                        RM_FIX)  # fmt: skip
    where = f"{rm.url} ({rm.ha_state.lower()})"
    figures: dict[str, Any] = {"url": rm.url, "ha_state": rm.ha_state}
    if access is None:
        return _finding("rm", Status.OK, where, **figures)
    allowed, said, fix = access_verdict(access)
    figures["access_allowed"] = allowed
    if allowed:
        return _finding("rm", Status.OK, f"{where}; {said}", **figures)
    return _finding("rm", Status.WRONG, f"{where} answers, but {said}", fix, **figures)


def access_verdict(access: Probe | Unread) -> tuple[bool, str, str]:
    """(allowed, what the probe showed, how to fix it when not allowed)."""
    if isinstance(access, NodeResourceProbe):
        return _node_resource(access)
    if isinstance(access, MutationProbe):
        return _mutation(access)
    if isinstance(access, FileProbe):
        if not access.problem:
            return True, f"this user may rewrite the scheduler file {access.path}", ""
        return (False, f"the scheduler file {access.path} cannot be rewritten: {access.problem}",
                'run the service as a user who may write it and its directory, or use '
                '[scheduler] via = "mutation"')  # fmt: skip
    if isinstance(access, NotProbed):
        return _not_probed(access)
    return (False, f"whether the guard may act cannot be told: {access.why}",
            "run the doctor again; if it says the same, see the RM's log")  # fmt: skip


def _node_resource(probe: NodeResourceProbe) -> tuple[bool, str, str]:
    user, node = probe.user, probe.node_id
    if probe.status == 404:
        return (False, f"node {node} vanished while updateNodeResource was tried",
                "run the doctor again")  # fmt: skip
    if probe.status == 401:
        return (False, f"the RM did not authenticate {user} for updateNodeResource "
                f"(HTTP 401: {probe.message})", KERBEROS_FIX)  # fmt: skip
    if probe.status >= 400:
        return (False, f"it refused updateNodeResource for {user} (HTTP {probe.status}: "
                f"{probe.message})", ADMIN_FIX.format(user=user))  # fmt: skip
    if probe.after is None:
        return (False, f"it took node {node}'s own total back from {user}, but the node "
                "could not be read afterwards to confirm nothing changed",
                f"check the node's total: yarn node -status {node}")  # fmt: skip
    if probe.after != probe.before:
        return (False, f"node {node}'s total changed during the check, {words(probe.before)} "
                f"-> {words(probe.after)}: someone else changed it meanwhile (the doctor "
                "sent back only the total the RM reported)",
                "see yarn-adapt guard status and the RM's audit log")  # fmt: skip
    return (True, f"{user} may call updateNodeResource (node {node}'s own total "
            f"{words(probe.before)} sent back, overcommit timeout -1: unchanged)", "")  # fmt: skip


def _mutation(probe: MutationProbe) -> tuple[bool, str, str]:
    user = probe.user
    if probe.status < 400:
        return True, f"{user} may change the scheduler configuration ({probe.url})", ""
    if probe.status == 400:
        return (False, f"its scheduler configuration is not mutable ({probe.message})",
                "set yarn.scheduler.configuration.store.class (memory, leveldb, zk or fs) "
                'in yarn-site.xml, or [scheduler] via = "file"')  # fmt: skip
    if probe.status == 401:
        return (False, f"it did not authenticate {user} for the scheduler-conf API (HTTP "
                f"401: {probe.message})", KERBEROS_FIX)  # fmt: skip
    return (False, f"it refuses the scheduler-conf API to {user} (HTTP {probe.status}: "
            f"{probe.message})", MUTATION_ADMIN_FIX.format(user=user))  # fmt: skip


def _not_probed(probe: NotProbed) -> tuple[bool, str, str]:
    unknown = f"whether {probe.user} may call updateNodeResource cannot be told"
    if probe.reason is Unprobed.NO_NODE:
        return False, f"{unknown}: {probe.detail}", "start the NodeManagers, then run again"
    if probe.reason is Unprobed.GUARD_BUSY:
        return (False, f"{unknown}: the guard is changing a node now ({probe.detail})",
                "run the doctor again in a few seconds")  # fmt: skip
    if probe.reason is Unprobed.NO_LOCK:
        return (False, f"{unknown}: {probe.detail}",
                "run the doctor as the service's user, on its host (it takes the guard's "
                "lock so that it never races the guard)")  # fmt: skip
    return (False, f"node totals cannot be set safely: a node has resource types beyond "
            f"memory and vcores ({probe.detail}), which the guard's POST (memory and vcores "
            "only) would drop; nothing was sent",
            '[colocation] actuator = "queue-cap" with a batch_queue')  # fmt: skip


# --------------------------------------------------------------------------- 2. Redis


def check_redis(redis: RedisReading | Unread | None, expected: Expectations) -> Finding:
    if redis is None:
        return _finding("redis", Status.SKIPPED, "not read")
    if isinstance(redis, Unread):
        return _finding("redis", Status.WRONG, f"cannot reach Redis: {redis.why}", REDIS_FIX)
    used, cap = redis.used_memory_bytes / MB, redis.maxmemory_bytes / MB
    store, budget = redis.store_bytes / MB, expected.memory_budget_mb
    figures: dict[str, Any] = {
        "url": redis.url, "used_memory_mb": round(used, 3), "maxmemory_mb": round(cap, 3),
        "maxmemory_policy": redis.policy, "store_mb": round(store, 3),
        "memory_budget_mb": budget,
    }  # fmt: skip
    problems = list(_memory_problems(redis, expected))
    if problems:
        said, fixes = zip(*problems, strict=True)
        return _finding("redis", Status.WRONG, f"{redis.url}: " + "; ".join(said),
                        "; ".join(dict.fromkeys(fixes)), **figures)  # fmt: skip
    return _finding("redis", Status.OK, f"{redis.url}: {used:.1f} MB used of maxmemory "
                    f"{cap:g} MB ({redis.policy}); the trace store holds {store:.1f} MB of "
                    f"its {budget:g} MB budget", **figures)  # fmt: skip


def _memory_problems(redis: RedisReading, expected: Expectations) -> Iterable[tuple[str, str]]:
    cap, budget = redis.maxmemory_bytes / MB, expected.memory_budget_mb
    if redis.maxmemory_bytes == 0:
        yield ("it has no memory cap (maxmemory 0): a full host, not a refused write, is "
               "how it would end", "set maxmemory above [tracing] memory_budget_mb with "
               "maxmemory-policy noeviction (conf/redis-yarn-adapt.conf)")  # fmt: skip
    elif cap <= budget:
        yield (f"its maxmemory {cap:g} MB is not above [tracing] memory_budget_mb {budget:g} "
               "MB: Redis refuses writes before the store trims its oldest traces",
               f"raise maxmemory above {budget:g} MB (conf/redis-yarn-adapt.conf sets 512mb "
               "for the default budget of 256) or lower memory_budget_mb")  # fmt: skip
    if redis.policy != "noeviction":
        yield (f"maxmemory-policy {redis.policy} lets Redis evict the store's keys silently",
               "set maxmemory-policy noeviction")  # fmt: skip
    if (
        redis.maxmemory_bytes
        and redis.used_memory_bytes >= NEARLY_FULL_RATIO * redis.maxmemory_bytes
    ):
        yield (f"it is nearly full ({redis.used_memory_bytes / MB:.1f} of {cap:g} MB): it "
               "will refuse writes", "is the ingest worker running (it trims to the budget)? "
               "raise maxmemory, or lower memory_budget_mb or retention_s")  # fmt: skip
    if redis.store_bytes / MB > OVER_BUDGET_FACTOR * budget:
        yield (f"the trace store holds {redis.store_bytes / MB:.1f} MB, above its budget of "
               f"{budget:g} MB", "the ingest worker trims the store to its budget: is it "
               "running (systemctl status yarn-adapt-ingest)?")  # fmt: skip


# --------------------------------------------------------------------------- 3. traces


def check_traces(
    redis: RedisReading | Unread | None,
    traces: TracesReading | Unread | None,
    expected: Expectations,
) -> Finding:
    if not expected.services:
        return _finding("traces", Status.WRONG, "[colocation] qos_targets names no "
                        "latency-critical service: the guard has no application to protect",
                        'add qos_targets = ["entry-service=P95 target in ms"]')  # fmt: skip
    if isinstance(redis, Unread):
        return _finding("traces", Status.SKIPPED, "Redis unreachable")
    if traces is None:
        return _finding("traces", Status.SKIPPED, "not read")
    if isinstance(traces, Unread):
        return _finding("traces", Status.WRONG, f"cannot read the traces: {traces.why}",
                        REDIS_FIX)  # fmt: skip
    ages = {s: _age_s(traces, s) for s in expected.services}
    figures: dict[str, Any] = {
        "services": [{"service": s, "age_s": age} for s, age in ages.items()],
        "stale_after_s": expected.stale_after_s,
    }
    stale = [s for s, age in ages.items() if age is None or age > expected.stale_after_s]
    if not stale:
        said = ", ".join(f"of {s} {duration(age)} old" for s, age in ages.items())
        return _finding("traces", Status.OK, f"newest trace {said} (stale after "
                        f"{duration(expected.stale_after_s)})", **figures)  # fmt: skip
    said = "; ".join(_stale_words(traces, s, ages[s], expected) for s in stale)
    not_entries = [s for s in stale if s in traces.callees]
    silent = [s for s in stale if s not in traces.callees]
    fixes = ([ENTRY_FIX] if not_entries else []) + (
        [INGEST_FIX.format(services=" and ".join(silent))] if silent else [])  # fmt: skip
    return _finding("traces", Status.WRONG, f"{said} ({_newest_any(traces)})",
                    "; ".join(fixes), **figures)  # fmt: skip


def _age_s(traces: TracesReading, service: str) -> float | None:
    end_s = traces.newest_end_s.get(service)
    return None if end_s is None else round(max(0.0, traces.read_at_s - end_s), 3)


def _stale_words(
    traces: TracesReading, service: str, age_s: float | None, expected: Expectations
) -> str:
    if age_s is not None:
        return (f"{service}'s newest trace is {duration(age_s)} old (stale after "
                f"{duration(expected.stale_after_s)})")  # fmt: skip
    if service in traces.callees:
        return f"{service} appears only below another service's spans: it is no trace's root"
    return f"no trace of {service} in the last {duration(traces.window_s)}"


def _newest_any(traces: TracesReading) -> str:
    if traces.newest_any_end_s is None:
        return "the trace store is empty"
    age = max(0.0, traces.read_at_s - traces.newest_any_end_s)
    return f"the store's newest trace of any service ended {duration(age)} ago"


# --------------------------------------------------------------------------- 4. agents


def check_agents(
    rm: RmReading | Unread, agents: AgentsReading | Unread | None, expected: Expectations
) -> Finding:
    if isinstance(rm, Unread):
        return _finding("agents", Status.SKIPPED, "RM unreachable")
    if agents is None:
        return _finding("agents", Status.SKIPPED, "not read")
    if isinstance(agents, Unread):
        return _finding("agents", Status.WRONG, "cannot ask the running service for its "
                        f"agents' reports: {agents.why}", SERVICE_FIX)  # fmt: skip
    running = sorted(n.id for n in rm.nodes if n.state is NodeState.RUNNING)
    ages = agents.report_ages_s
    figures: dict[str, Any] = {
        "service_url": agents.service_url,
        "guard_mode": agents.guard_mode,
        "report_within_s": expected.report_within_s,
        "nodes": [{"node": n, "age_s": ages.get(n)} for n in running],
    }
    if not running:
        return _finding("agents", Status.WRONG, "the RM lists no RUNNING NodeManager",
                        "start the NodeManagers", **figures)  # fmt: skip
    missing = [n for n in running if n not in ages]
    late = [n for n in running if n in ages and ages[n] > expected.report_within_s]
    if not missing and not late:
        oldest = max(ages[n] for n in running)
        return _finding("agents", Status.OK, f"{_names(running)} reporting, the oldest report "
                        f"{duration(oldest)} old (within {duration(expected.report_within_s)})",
                        **figures)  # fmt: skip
    return _finding("agents", Status.WRONG, _agent_problems(running, missing, late, agents),
                    "; ".join(([AGENT_FIX] if missing else []) + ([LATE_FIX] if late else [])),
                    **figures)  # fmt: skip


def _agent_problems(
    running: Sequence[str], missing: Sequence[str], late: Sequence[str], agents: AgentsReading
) -> str:
    parts = []
    if missing:
        parts.append(f"no report from {_names(missing)}")
    if late:
        old = [f"{n} ({duration(agents.report_ages_s[n])} ago)" for n in late]
        parts.append(f"old reports from {_names(old)}")
    strangers = sorted(set(agents.report_ages_s) - set(running))
    if strangers and missing:
        parts.append(f"reports come from {_names(strangers)}, which the RM does not list as "
                     "RUNNING: is that agent's [agent] node_id the RM's node id?")  # fmt: skip
    return "; ".join(parts) + f" (service {agents.service_url}, guard {agents.guard_mode})"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:LISTED])
    return shown + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


# --------------------------------------------------------------------------- 5. clocks


def check_clocks(
    rm: RmReading | Unread, redis: RedisReading | Unread | None, expected: Expectations
) -> Finding:
    readings, unread = _clock_readings(rm, redis)
    if not readings:
        return _finding("clocks", Status.SKIPPED, "; ".join(why for _, why in unread))
    limit = expected.max_clock_ahead_s
    figures: dict[str, Any] = {
        "max_clock_ahead_s": limit,
        "clocks": [_clock_figures(r) for r in readings],
    }
    off = [r for r in readings if abs(r.least_skew_s()) > limit]
    notes = "".join(f"; {whose} not checked: {why}" for whose, why in unread)
    if not off:
        said = ", ".join(_clock_words(r) for r in readings)
        return _finding("clocks", Status.OK, f"{said} (max {duration(limit)}){notes}",
                        **figures)  # fmt: skip
    said = "; ".join(
        f"{_whose(r.source)}'s clock is at least {duration(abs(r.least_skew_s()))} "
        f"{'ahead of' if r.least_skew_s() > 0 else 'behind'} this host's"
        for r in off
    )
    hosts = " and ".join(f"{_whose(r.source)}'s host" for r in off)
    return _finding("clocks", Status.WRONG, f"{said} (max {duration(limit)}, [tracing] "
                    f"max_clock_ahead_s){notes}", CLOCK_FIX.format(hosts=hosts),
                    **figures)  # fmt: skip


def _clock_readings(
    rm: RmReading | Unread, redis: RedisReading | Unread | None
) -> tuple[list[ClockReading], list[tuple[str, str]]]:
    """The clocks that could be read, and (whose, why not) of the others."""
    readings, unread = [], []
    if isinstance(rm, Unread):
        unread.append(("the RM's clock", "RM unreachable"))
    elif rm.clock is None:
        unread.append(("the RM's clock", "its answer had no Date header"))
    else:
        readings.append(rm.clock)
    if isinstance(redis, Unread):
        unread.append(("Redis's clock", "Redis unreachable"))
    elif isinstance(redis, RedisReading):
        readings.append(redis.clock)
    return readings, unread


def _clock_words(reading: ClockReading) -> str:
    least = reading.least_skew_s()
    if least == 0.0:
        low, high = reading.skew_range_s()
        return f"{_whose(reading.source)}'s clock within {duration(max(abs(low), abs(high)))}"
    side = "ahead" if least > 0 else "behind"
    return f"{_whose(reading.source)}'s clock at least {duration(abs(least))} {side}"


def _clock_figures(reading: ClockReading) -> dict[str, Any]:
    low, high = reading.skew_range_s()
    return {"source": reading.source, "least_skew_s": round(reading.least_skew_s(), 6),
            "skew_low_s": round(low, 6), "skew_high_s": round(high, 6)}  # fmt: skip


def _whose(source: str) -> str:
    return "the RM" if source == "RM" else source
