"""What the doctor reads and what it finds: frozen data, made at the edge
(:mod:`yarn_adapt.doctor.observe`) and judged by :mod:`yarn_adapt.doctor.checks`.

A reading that failed is an :class:`Unread` with the reason in one line; a piece not
read at all (the guard is not enabled, or an earlier piece it needs failed) is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.model import Node, Resources


class DoctorFoundProblems(YarnAdaptError):
    """At least one piece is not ok (the lines above say which and how to fix it)."""

    exit_code = 1


@dataclass(frozen=True)
class Unread:
    """A piece that could not be read, and why (one line)."""

    why: str


# --------------------------------------------------------------------------- clocks


@dataclass(frozen=True)
class ClockReading:
    """Another host's clock as one of its answers showed it: ``remote_s`` (Unix time,
    true to within ``resolution_s`` below the real time: an HTTP Date header is whole
    seconds), stamped somewhere between ``sent_s`` and ``received_s`` on this host."""

    source: str
    sent_s: float
    received_s: float
    remote_s: float
    resolution_s: float

    def skew_range_s(self) -> tuple[float, float]:
        """The lowest and highest skew (remote minus local) the answer allows."""
        return (self.remote_s - self.received_s, self.remote_s + self.resolution_s - self.sent_s)

    def least_skew_s(self) -> float:
        """The skew closest to zero the answer allows (0 when it allows none):
        positive when the other clock is ahead of this host's."""
        low, high = self.skew_range_s()
        if low <= 0.0 <= high:
            return 0.0
        return low if low > 0 else high


# --------------------------------------------------------------------------- the RM


@dataclass(frozen=True)
class RmReading:
    """The active ResourceManager as ``serve`` finds it, its nodes, and its clock
    (None when its answer carried no Date header)."""

    url: str
    ha_state: str
    nodes: tuple[Node, ...]
    clock: ClockReading | None


class Unprobed(StrEnum):
    """Why the guard's write access was not tried."""

    NO_NODE = "no-node"  # the RM lists no RUNNING node to send a total to
    GUARD_BUSY = "guard-busy"  # the guard holds its lock (it is changing a node now)
    NO_LOCK = "no-lock"  # the guard's lock cannot be opened by this user
    OTHER_RESOURCES = "other-resources"  # the node has resource types the POST would drop


@dataclass(frozen=True)
class NodeResourceProbe:
    """``POST /nodes/{id}/resource`` with the node's own total (overcommit timeout -1):
    the RM's answer (``status`` < 400: taken) and the node's total before and after."""

    user: str
    node_id: str
    before: Resources
    status: int
    message: str = ""
    after: Resources | None = None


@dataclass(frozen=True)
class MutationProbe:
    """``GET /scheduler-conf``: the same admin check as a mutation, changing nothing."""

    user: str
    url: str
    status: int
    message: str = ""


@dataclass(frozen=True)
class FileProbe:
    """The scheduler file the queue cap rewrites (``[scheduler] via = "file"``):
    ``problem`` is empty when this user may rewrite it."""

    path: str
    problem: str = ""


@dataclass(frozen=True)
class NotProbed:
    user: str
    reason: Unprobed
    detail: str


Probe = NodeResourceProbe | MutationProbe | FileProbe | NotProbed


# --------------------------------------------------------------------------- Redis, traces


@dataclass(frozen=True)
class RedisReading:
    """Redis's ``INFO memory``, its ``TIME``, and the trace store's own accounting
    (segments, their overhead and the dead-letter records: what its budget counts)."""

    url: str
    used_memory_bytes: int
    maxmemory_bytes: int  # 0: no cap
    policy: str
    store_bytes: int
    clock: ClockReading


@dataclass(frozen=True)
class TracesReading:
    """The traces that ended in the last ``window_s`` before ``read_at_s``: per entry
    service (a trace's root) the end of its newest one, the services seen there only
    below a root, and the store's newest trace of any service (None: empty store)."""

    read_at_s: float
    window_s: float
    newest_end_s: Mapping[str, float]
    callees: frozenset[str]
    newest_any_end_s: float | None


# --------------------------------------------------------------------------- the agents


@dataclass(frozen=True)
class AgentsReading:
    """The running service's ``/api/guard``: each node's newest agent report's age (on
    the service's clock) and the guard's mode there."""

    service_url: str
    report_ages_s: Mapping[str, float]
    guard_mode: str


@dataclass(frozen=True)
class Observation:
    """Everything one doctor run read; None where a piece was not read."""

    rm: RmReading | Unread
    access: Probe | Unread | None = None
    redis: RedisReading | Unread | None = None
    traces: TracesReading | Unread | None = None
    agents: AgentsReading | Unread | None = None


@dataclass(frozen=True)
class Expectations:
    """What the settings ask of the pieces."""

    colocation_enabled: bool
    actuator: str = "node-resource"
    services: tuple[str, ...] = ()  # the latency-critical entry services (qos_targets)
    stale_after_s: float = 300.0
    report_within_s: float = 15.0  # the guard's reclaim requests live this long
    max_clock_ahead_s: float = 5.0
    memory_budget_mb: float = 256.0


# --------------------------------------------------------------------------- findings


class Status(StrEnum):
    OK = "ok"
    WRONG = "wrong"
    SKIPPED = "skipped"  # not checked: a piece it needs failed


@dataclass(frozen=True)
class Finding:
    """One piece's verdict: what was seen (ok), what is wrong and how to fix it, or
    why it was skipped; ``figures`` are the same in numbers, for ``--json``."""

    piece: str
    label: str
    status: Status
    summary: str
    fix: str = ""
    figures: Mapping[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        if self.status is Status.OK:
            return f"{self.label}: ok: {self.summary}"
        if self.status is Status.SKIPPED:
            return f"{self.label}: skipped: {self.summary}"
        fix = f". Fix: {self.fix}" if self.fix else ""
        return f"{self.label}: {self.summary.rstrip('.')}{fix}"

    def to_json(self) -> dict[str, Any]:
        return {"piece": self.piece, "status": str(self.status), "summary": self.summary,
                "fix": self.fix, **self.figures}  # fmt: skip


@dataclass(frozen=True)
class Diagnosis:
    colocation_enabled: bool
    findings: tuple[Finding, ...]

    @property
    def problems(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status is Status.WRONG)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        head = [] if self.colocation_enabled else [NOT_ENABLED]
        return head + [finding.line() for finding in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "colocation_enabled": self.colocation_enabled,
                "pieces": [finding.to_json() for finding in self.findings]}  # fmt: skip


NOT_ENABLED = (
    "co-location guard: not enabled ([colocation] enabled = false): only the "
    "ResourceManager is checked"
)
