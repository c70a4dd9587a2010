"""The doctor's reads (the edge): the RM as ``serve`` finds it, Redis and the trace
store as the service reads them, the running service's ``/api/guard`` as ``guard
status`` asks it. Each read becomes a frozen reading of :mod:`yarn_adapt.doctor.model`,
or an :class:`~yarn_adapt.doctor.model.Unread` with the reason; nothing here judges.

The one write: with ``actuator = "node-resource"`` the guard's ``updateNodeResource``
is tried as a no-op. The RM checks the caller there (RMWebServices.updateNodeResource,
then AdminService.updateNodeResource's admin ACL) before anything happens, and a node
given the total it has is unchanged (AbstractYarnScheduler.updateNodeResource only
logs "with the same resource"). So the doctor reads one RUNNING node's total and POSTs
exactly that total back, with an overcommit timeout of -1, then reads the node again:
a different total afterwards is reported, never "fixed". The read and the POST happen
under the guard's own apply lock (``[state] dir/guard``, the lock the guard holds while
it changes a node), so a guard keeping its state there cannot change the node between
them; a node with resource types beyond memory and vcores is not sent anything (a POST
of memory and vcores would drop them). With ``actuator = "queue-cap"`` the scheduler-conf
API's admin check is asked through ``GET /scheduler-conf`` (no write), or the scheduler
file's permissions are looked at.
"""

from __future__ import annotations

import email.utils
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from tracing.errors import TracingError
from tracing.forest import MISSING_ROOT, Forest, build_forest
from tracing.redisconn import make_client, store_errors
from tracing.store import SEGMENT_OVERHEAD_BYTES, TraceStore
from yarn_adapt.colocation.actuate import NEVER_PREEMPT
from yarn_adapt.doctor.model import (
    AgentsReading,
    ClockReading,
    FileProbe,
    MutationProbe,
    NodeResourceProbe,
    NotProbed,
    Observation,
    Probe,
    RedisReading,
    RmReading,
    TracesReading,
    Unprobed,
    Unread,
)
from yarn_adapt.errors import ApplyInProgress, YarnError, YarnHTTPError
from yarn_adapt.model import Node, NodeState, Resources
from yarn_adapt.service.backend import http_settings, rm_addresses, scheduler_file
from yarn_adapt.service.guard.build import redis_config, store_limits
from yarn_adapt.service.guard_client import GuardStatusUnavailable, fetch_status, service_url
from yarn_adapt.service.settings import Settings
from yarn_adapt.yarn.apply import ApplySettings
from yarn_adapt.yarn.http import INFO_PATH
from yarn_adapt.yarn.parse import parse_cluster_info, parse_node
from yarn_adapt.yarn.rm import ResourceManagerClient

Clock = Callable[[], float]

GUARD_LOCK_TRIES = 10  # the guard holds its lock for one node change (seconds at most)
GUARD_LOCK_WAIT_S = 0.5
SERVICE_TIMEOUT_S = 10.0
KNOWN_RESOURCE_TYPES = frozenset({"memory-mb", "vcores"})
HTTP_DATE = re.compile(r"\s*[A-Za-z]{3}, \d{1,2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT")


def observe(settings: Settings, *, clock: Clock = time.time) -> Observation:
    """Read every piece ``settings`` name (only the RM when the guard is not enabled);
    the pieces that need the RM are not read when it cannot be."""
    http = replace(http_settings(settings), retries=min(settings.yarn.retries, 1))
    with ResourceManagerClient(rm_addresses(settings), http) as rm:
        reading = read_rm(rm, clock)
        if not settings.colocation.enabled:
            return Observation(reading)
        access = probe_access(settings, rm, reading) if isinstance(reading, RmReading) else None
    redis, traces = read_trace_store(settings, clock)
    # the nodes whose agents should report come from the RM
    agents = read_agents(settings) if isinstance(reading, RmReading) else None
    return Observation(reading, access, redis, traces, agents)


# --------------------------------------------------------------------------- the RM


def read_rm(rm: ResourceManagerClient, clock: Clock) -> RmReading | Unread:
    """The active RM's address and HA state, its nodes, and its clock (the Date header
    of its ``/info`` answer)."""
    try:
        sent_s = clock()
        reply = rm.endpoints.request("GET", INFO_PATH)
        received_s = clock()
        info = parse_cluster_info(reply.json(), reply.url)
        nodes = rm.nodes()
    except YarnError as exc:
        return Unread(exc.one_line())
    url = rm.endpoints.active or reply.url
    clock_seen = date_clock("RM", reply.headers.get("date"), sent_s, received_s)
    return RmReading(url, str(info.ha_state), nodes, clock_seen)


def date_clock(
    source: str, header: str | None, sent_s: float, received_s: float
) -> ClockReading | None:
    """An HTTP ``Date`` header as a clock reading (whole seconds), None when missing or
    not a date; of a repeated header (joined by a comma) the first."""
    if not header:
        return None
    first = HTTP_DATE.match(header)  # the RM may send two (Jetty's, NoCacheFilter's)
    try:
        stamped = email.utils.parsedate_to_datetime(first.group(0) if first else header)
    except (TypeError, ValueError):
        return None
    return ClockReading(source, sent_s, received_s, stamped.timestamp(), 1.0)


def identity(settings: Settings) -> str:
    """Who the RM sees: the Kerberos principal, else ``[yarn] user`` or the login name."""
    if settings.yarn.kerberos:
        return settings.yarn.kerberos_principal or "the Kerberos ticket cache's principal"
    return http_settings(settings).user or "(no user)"


def probe_access(
    settings: Settings, rm: ResourceManagerClient, reading: RmReading
) -> Probe | Unread:
    """The guard's write, tried without effect: node totals, or the queue cap's way."""
    user = identity(settings)
    if settings.colocation.actuator != "queue-cap":
        return probe_node_resource(rm, reading.nodes, settings.state.state_dir, user)
    if settings.scheduler.via == "mutation":
        return probe_mutation(rm, user)
    return probe_file(scheduler_file(settings))


def probe_node_resource(
    rm: ResourceManagerClient, nodes: Sequence[Node], state_dir: Path, user: str
) -> Probe | Unread:
    running = sorted(n.id for n in nodes if n.state is NodeState.RUNNING)
    if not running:
        return NotProbed(user, Unprobed.NO_NODE, "the RM lists no RUNNING node")
    held = ExitStack()
    try:
        refused = take_guard_lock(held, state_dir, user)
        return refused if refused is not None else same_total_back(rm, running[0], user)
    finally:
        held.close()


def take_guard_lock(
    held: ExitStack, state_dir: Path, user: str, *, sleep: Callable[[float], None] = time.sleep
) -> NotProbed | None:
    """Hold the guard's apply lock on ``held`` (waiting out a change in progress), when a
    guard keeps its state under ``state_dir``; why not, when it cannot be had."""
    guard_dir = state_dir / "guard"
    if not guard_dir.is_dir():
        return None  # no guard keeps its state here: nothing to keep out
    lock = ApplySettings(state_dir=guard_dir).lock
    for attempt in range(GUARD_LOCK_TRIES):
        try:
            held.enter_context(lock)
            return None
        except ApplyInProgress as exc:
            if attempt == GUARD_LOCK_TRIES - 1:
                return NotProbed(user, Unprobed.GUARD_BUSY, exc.one_line())
            sleep(GUARD_LOCK_WAIT_S)
        except OSError as exc:
            why = f"cannot open the guard's lock {lock.path}: {exc.strerror or exc}"
            return NotProbed(user, Unprobed.NO_LOCK, why)
    return None  # pragma: no cover (the loop returns)


def same_total_back(rm: ResourceManagerClient, node_id: str, user: str) -> Probe | Unread:
    """POST the node's own total (overcommit timeout -1) and read the node again."""
    try:
        reply = rm.endpoints.request("GET", f"/ws/v1/cluster/nodes/{quote(node_id, safe=':')}")
        document = reply.json()
        before = parse_node(document, reply.url).total
    except YarnError as exc:
        return Unread(f"cannot read node {node_id}: {exc.one_line()}")
    others = other_resource_types(document)
    if others:
        return NotProbed(user, Unprobed.OTHER_RESOURCES, f"{node_id} has {', '.join(others)}")
    try:
        rm.update_node_resource(node_id, before, overcommit_timeout_ms=NEVER_PREEMPT)
    except YarnHTTPError as exc:
        return NodeResourceProbe(user, node_id, before, exc.status, exc.message)
    except YarnError as exc:
        return Unread(f"updateNodeResource of {node_id}: {exc.one_line()}")
    return NodeResourceProbe(user, node_id, before, 200, after=_total(rm, node_id))


def _total(rm: ResourceManagerClient, node_id: str) -> Resources | None:
    try:
        return rm.node(node_id).total
    except YarnError:
        return None


def other_resource_types(document: object) -> tuple[str, ...]:
    """The resource types of a ``/nodes/{id}`` answer's total beyond memory and vcores
    that the node has some of (GPUs, FPGAs, ...)."""
    total = _at(document, "node", "totalResource", "resourceInformations", "resourceInformation")
    entries = total if isinstance(total, list) else [total]
    return tuple(
        str(entry["name"])
        for entry in entries
        if isinstance(entry, dict)
        and entry.get("name") not in KNOWN_RESOURCE_TYPES
        and entry.get("value") not in (0, None)
    )


def _at(document: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document


def probe_mutation(rm: ResourceManagerClient, user: str) -> MutationProbe | Unread:
    """``GET /scheduler-conf``: the admin check a mutation passes first (RMWebServices
    ``initForWritableEndpoints(callerUGI, true)``), and 400 when the store is not
    mutable."""
    url = f"{rm.endpoints.active or ''}/ws/v1/cluster/scheduler-conf"
    try:
        rm.scheduler_conf()
    except YarnHTTPError as exc:
        return MutationProbe(user, url, exc.status, exc.message)
    except YarnError as exc:
        return Unread(exc.one_line())
    return MutationProbe(user, url, 200)


def probe_file(path: Path) -> FileProbe:
    """Whether this user may rewrite the scheduler file (a new file beside it, renamed
    over it: its directory must be writable too)."""
    if not path.is_file():
        return FileProbe(str(path), "no such file")
    if not os.access(path, os.W_OK):
        return FileProbe(str(path), "this user may not write it")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return FileProbe(str(path), f"this user may not write its directory {path.parent}")
    return FileProbe(str(path))


# --------------------------------------------------------------------------- Redis


def read_trace_store(
    settings: Settings, clock: Clock
) -> tuple[RedisReading | Unread, TracesReading | Unread | None]:
    """Redis (memory, clock) and the traces of the last ``stale_after_s``, through the
    connection settings and password the service uses."""
    config = redis_config(settings)
    try:
        client = make_client(config, retries=0)
    except TracingError as exc:
        return Unread(exc.one_line()), None
    store = TraceStore(client, config, store_limits(settings.tracing))
    try:
        try:
            redis = read_redis(store, clock)
        except TracingError as exc:
            return Unread(exc.one_line()), None
        try:
            traces: TracesReading | Unread = read_traces(
                store, settings.colocation.stale_after_s, clock
            )
        except TracingError as exc:
            traces = Unread(exc.one_line())
        return redis, traces
    finally:
        client.close()


def read_redis(store: TraceStore, clock: Clock) -> RedisReading:
    client, config = store.client, store.config
    with store_errors(config, "reading its clock and memory"):
        sent_s = clock()
        seconds, micros = client.time()
        received_s = clock()
        memory: Mapping[str, Any] = client.info("memory")
    usage = store.usage()
    return RedisReading(
        url=config.display_url(),
        used_memory_bytes=int(memory["used_memory"]),
        maxmemory_bytes=int(memory.get("maxmemory", 0)),
        policy=str(memory.get("maxmemory_policy", "unknown")),
        store_bytes=usage.total_bytes + usage.segments * SEGMENT_OVERHEAD_BYTES,
        clock=ClockReading("Redis", sent_s, received_s, seconds + micros / 1e6, 1e-6),
    )


def read_traces(store: TraceStore, window_s: float, clock: Clock) -> TracesReading:
    read_at_s = clock()
    loaded = store.load(int((read_at_s - window_s) * 1e6), None)
    newest_us = store.newest_end_us()
    newest, callees = entry_ends(build_forest(loaded.columns, loaded.names))
    newest_any = None if newest_us is None else newest_us / 1e6
    return TracesReading(read_at_s, window_s, newest, callees, newest_any)


def entry_ends(forest: Forest) -> tuple[dict[str, float], frozenset[str]]:
    """Per entry service (a trace's root), the end of its newest trace (Unix s); and
    the services that appear only below a root."""
    if forest.columns.n_traces == 0:
        return {}, frozenset()
    roots = forest.root
    ends_s = (forest.end[roots] + forest.columns.base[forest.trace[roots]]) / 1e6
    entry = forest.service[roots]
    names = forest.service_names
    newest = {
        names[int(service)]: float(ends_s[entry == service].max()) for service in np.unique(entry)
    }
    newest.pop(MISSING_ROOT, None)
    seen = {names[int(service)] for service in np.unique(forest.service)}
    return newest, frozenset(seen - set(newest) - {MISSING_ROOT})


# --------------------------------------------------------------------------- the agents


def read_agents(settings: Settings) -> AgentsReading | Unread:
    """The running service's ``/api/guard``, asked as ``yarn-adapt guard status`` asks:
    each node's newest agent report (they live in the service's memory)."""
    if not settings.http.enabled:
        return Unread("[http] enabled = false: the service has no API, so no agent can "
                      "report to it")  # fmt: skip
    base = service_url(settings.http)
    try:
        status = fetch_status(base, SERVICE_TIMEOUT_S)
    except GuardStatusUnavailable as exc:
        return Unread(exc.one_line())
    return agents_reading(base, status)


def agents_reading(base: str, status: Mapping[str, Any]) -> AgentsReading:
    agents = status.get("agents") or {}
    ages = {
        str(node): float(view["age_s"])
        for node, view in agents.items()
        if isinstance(view, dict) and isinstance(view.get("age_s"), int | float)
    }
    return AgentsReading(base, ages, str(status.get("mode", "unknown")))
