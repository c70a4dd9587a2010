"""Where the agent's reclaim target comes from: the yarn-adapt service, or a local one.

**From the service** (``mode = "service"``): every ``poll_interval_s`` the agent asks
``GET {url}/api/agent/nodes/{node}/reclaim`` with ``Authorization: Bearer <token>``.
The answer (the contract the co-location guard serves)::

    {"node": "worker-7:8041",
     "generation": 17,                       # increases with every new decision
     "reclaim": {"cpu_millicores": 1500, "memory_mb": 0},
     "ttl_s": 60,                            # optional: trust it this long
     "qos": {"service": "mongo", "satisfied": false, "latency_ms": 180.0,
             "target_ms": 100.0, "load": 2450.0, "measured_at": 1795430000.0}}

404 means "nothing asked of this node" (reclaim nothing). Anything else that is not
this shape is a :class:`~preemption.errors.ReclaimRequestError`; an unreachable
service is :class:`~preemption.errors.ServiceUnreachable`. Both are logged and
counted by the agent, which keeps the last valid target until it expires and then
gives the resources back gradually: never a crash, never a limit stuck because the
service went away. With each poll the agent also sends what it does now, in the
words of ``agent status`` (``POST {url}/api/agent/nodes/{node}/report``, body
``{"lines": [...]}``, at most ``REPORT_LINES`` lines of ``REPORT_LINE_CHARS``
characters), for the service's page.

**Standalone** (``mode = "standalone"``): a fixed reclaim amount from the agent's
own settings, optionally with the QoS read from a local probe URL answering
``{"latency_ms": .., "target_ms": .., "load": ..}``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

import requests

from preemption.errors import ReclaimRequestError, ServiceUnreachable
from preemption.model import NOTHING, Amount, QosSignal, ReclaimTarget, amount_from_json

log = logging.getLogger("preemption.targets")

REPORT_LINES = 12  # the agent's report to the service: its newest status, in words
REPORT_LINE_CHARS = 300

_TOP_KEYS = frozenset({"node", "generation", "reclaim", "ttl_s", "qos"})
_QOS_KEYS = frozenset({"service", "satisfied", "latency_ms", "target_ms", "load", "measured_at"})


def parse_reclaim(
    document: object, *, node: str, where: str, received_at_s: float, default_ttl_s: float
) -> ReclaimTarget:
    """The service's answer -> a target; ``ReclaimRequestError`` naming the field."""
    if not isinstance(document, dict):
        raise ReclaimRequestError(where, f"expected a JSON object, got {type(document).__name__}")
    unknown = set(document) - _TOP_KEYS
    if unknown:
        raise ReclaimRequestError(where, f"unknown keys {sorted(unknown)}")
    if document.get("node") != node:
        raise ReclaimRequestError(
            where, f"answer is for node {document.get('node')!r}, not {node!r}"
        )
    generation = document.get("generation")
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise ReclaimRequestError(
            f"{where}: generation", f"expected an integer >= 0, got {generation!r}"
        )
    reclaim = amount_from_json(document.get("reclaim"), f"{where}: reclaim")
    ttl = _number(document.get("ttl_s", default_ttl_s), f"{where}: ttl_s", positive=True)
    return ReclaimTarget(
        reclaim=reclaim,
        generation=generation,
        qos=parse_qos(document.get("qos", {}), f"{where}: qos"),
        source="service",
        expires_at_s=received_at_s + ttl,
    )


def parse_qos(raw: object, where: str) -> QosSignal:
    if not isinstance(raw, dict):
        raise ReclaimRequestError(where, f"expected an object, got {type(raw).__name__}")
    unknown = set(raw) - _QOS_KEYS
    if unknown:
        raise ReclaimRequestError(where, f"unknown keys {sorted(unknown)}")
    satisfied = raw.get("satisfied")
    if satisfied is not None and not isinstance(satisfied, bool):
        raise ReclaimRequestError(f"{where}.satisfied", f"expected true/false, got {satisfied!r}")
    service = raw.get("service", "")
    if not isinstance(service, str):
        raise ReclaimRequestError(f"{where}.service", f"expected a string, got {service!r}")
    latency = _optional_number(raw, "latency_ms", where)
    target = _optional_number(raw, "target_ms", where)
    if satisfied is None and latency is not None and target is not None:
        satisfied = latency <= target
    return QosSignal(
        service=service,
        satisfied=satisfied,
        latency_ms=latency,
        target_ms=target,
        load=_optional_number(raw, "load", where),
        measured_at_s=_optional_number(raw, "measured_at", where),
    )


def _optional_number(raw: Mapping[str, object], key: str, where: str) -> float | None:
    value = raw.get(key)
    return None if value is None else _number(value, f"{where}.{key}")


def _number(value: object, where: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ReclaimRequestError(where, f"expected a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ReclaimRequestError(where, f"out of range: {value!r}")
    return float(value)


# ----------------------------------------------------------------- sources


@dataclass(frozen=True)
class Fetched:
    """One poll's outcome: the target to use now, and what went wrong if anything."""

    target: ReclaimTarget
    problem: str | None = None
    problem_kind: str | None = None  # "unreachable" or "malformed"


class ServiceTarget:
    """Polls the service; keeps the last valid target until it expires."""

    def __init__(
        self,
        url: str,
        node: str,
        token: str,
        *,
        poll_interval_s: float = 5.0,
        ttl_s: float = 60.0,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        session: requests.Session | None = None,
    ) -> None:
        self.url = f"{url.rstrip('/')}/api/agent/nodes/{quote(node, safe='')}/reclaim"
        self.node = node
        self._token = token
        self.poll_interval_s = poll_interval_s
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.session = session or requests.Session()
        self.last = ReclaimTarget(reclaim=NOTHING, source="service", expires_at_s=0.0)
        self._polled_at_s = -math.inf
        self.report_url = f"{url.rstrip('/')}/api/agent/nodes/{quote(node, safe='')}/report"
        self._report: list[str] | None = None  # what the agent did, sent with the next poll

    def __repr__(self) -> str:
        return f"ServiceTarget(url={self.url!r}, node={self.node!r}, token='***')"

    def report(self, lines: Sequence[str]) -> None:
        """What the agent does now (its status in words), for the service's page: sent
        on the next poll, the newest only."""
        self._report = [line[:REPORT_LINE_CHARS] for line in lines[:REPORT_LINES]]

    def current(self) -> Fetched:
        now = self.clock()
        if now - self._polled_at_s < self.poll_interval_s:
            return Fetched(self.last)
        self._polled_at_s = now
        self._send_report()
        try:
            self.last = self.fetch(now)
        except ReclaimRequestError as error:
            return Fetched(self.last, error.one_line(), "malformed")
        except ServiceUnreachable as error:
            return Fetched(self.last, error.one_line(), "unreachable")
        return Fetched(self.last)

    def _send_report(self) -> None:
        """POST the newest report; a service that cannot take it (down, or too old to
        know the route) costs a log line, never the poll."""
        if self._report is None:
            return
        lines, self._report = self._report, None
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            response = self.session.post(
                self.report_url, json={"lines": lines}, headers=headers, timeout=self.timeout_s
            )
        except requests.RequestException as exc:
            log.debug("POST %s: %s", self.report_url, exc.__class__.__name__)
            return
        if response.status_code != 204:
            log.debug("POST %s -> HTTP %s", self.report_url, response.status_code)

    def fetch(self, now: float) -> ReclaimTarget:
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        try:
            response = self.session.get(self.url, headers=headers, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise ServiceUnreachable(f"GET {self.url}: {exc.__class__.__name__}") from exc
        if response.status_code == 404:
            return ReclaimTarget(reclaim=NOTHING, source="service", expires_at_s=now + self.ttl_s)
        if response.status_code != 200:
            excerpt = " ".join(response.text.split())[:120]
            raise ServiceUnreachable(f"GET {self.url} -> HTTP {response.status_code}: {excerpt}")
        try:
            document = json.loads(response.text)
        except ValueError as exc:
            raise ReclaimRequestError(self.url, f"body is not JSON: {exc}") from exc
        return parse_reclaim(
            document, node=self.node, where=self.url, received_at_s=now, default_ttl_s=self.ttl_s
        )


@dataclass
class StandaloneTarget:
    """A fixed local target, with the QoS from an optional probe URL."""

    reclaim: Amount
    probe_url: str | None = None
    timeout_s: float = 2.0
    clock: Callable[[], float] = time.time
    session: requests.Session = field(default_factory=requests.Session)

    def report(self, lines: Sequence[str]) -> None:
        """No service to tell: the status file and ``agent status`` say it."""

    def current(self) -> Fetched:
        target = ReclaimTarget(reclaim=self.reclaim, source="standalone")
        if not self.probe_url:
            return Fetched(target)
        try:
            response = self.session.get(self.probe_url, timeout=self.timeout_s)
            document = json.loads(response.text)
            qos = parse_qos(document, self.probe_url)
        except requests.RequestException as exc:
            return Fetched(target, f"{self.probe_url}: {exc.__class__.__name__}", "unreachable")
        except (ValueError, ReclaimRequestError) as exc:
            return Fetched(target, f"{self.probe_url}: {exc}", "malformed")
        return Fetched(ReclaimTarget(reclaim=self.reclaim, qos=qos, source="standalone"))
