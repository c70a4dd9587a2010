"""What the agent is doing now, for people and pages: ``status.json`` and ``agent status``.

Every interval the running agent replaces its status file (beside the state file,
``[agent] status_file``; a temp file renamed over it, so a reader never sees half of
one) with one JSON object::

    {"format": 1, "node": "worker-7:8041", "at": 1795430000.0, "trusted": true,
     "problem": null,
     "isolation": {"mode": "agent-hierarchy", "refused": null,
                   "suppress": {"quota_millicores": 650, "budget_millicores": 640,
                                "change": "dead-band", "capacity_millicores": 4000,
                                "node_used_millicores": 2210.0,
                                "batch_used_millicores": 630.0},
                   "weighted_groups": 1,
                   "memory": {"pressure": false, "available_mb": 9120, "total_mb": 15800,
                              "capped_groups": 0, "services_protected": 0}},
     "squeeze": {"mode": "met", "desired": {"cpu_millicores": 0, "memory_mb": 0},
                 "reclaimed": {...}, "managed": 3,
                 "containers": [{"id": "container_..", "baseline": {...},
                                 "limit": {...}, "blacklisted": false}]},
     "evictions": [{"at": 1795429000.0, "container": "container_..",
                    "cause": "memory-pressure", "detail": "..."}]}

``suppress`` is null until the second interval (use needs two readings) or with
``[suppress] enabled = false``; ``evictions`` lists the last kills (Algorithm 2's
last resort, cause ``reclaim``; the memory eviction, ``memory-pressure``). The
state file, by contrast, lists only what must be restored. The dry run writes no
status file (it writes nothing).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preemption import lazyfree
from preemption.errors import StatusUnavailable
from preemption.isolator import IsolationReport
from preemption.model import Amount
from preemption.node import TickReport

FORMAT = 1


@dataclass(frozen=True)
class Eviction:
    at_s: float
    container_id: str
    cause: str
    detail: str


@dataclass(frozen=True)
class SqueezedContainer:
    container_id: str
    baseline: Amount
    limit: Amount
    blacklisted: bool


def amount_json(amount: Amount) -> dict[str, int]:
    return {"cpu_millicores": amount.cpu_millicores, "memory_mb": amount.memory_mb}


def isolation_json(report: IsolationReport) -> dict[str, Any]:
    suppress = None
    if report.step is not None and report.use is not None:
        suppress = {
            "quota_millicores": report.quota_millicores,
            "budget_millicores": report.step.budget_millicores,
            "change": report.step.change,
            "capacity_millicores": report.use.capacity_millicores,
            "node_used_millicores": round(report.use.node_millicores, 1),
            "batch_used_millicores": round(report.use.batch_millicores, 1),
        }
    memory = report.memory
    return {
        "mode": report.mode,
        "refused": report.refused,
        "suppress": suppress,
        "weighted_groups": report.weighted_groups,
        "memory": {
            "pressure": report.pressure,
            "available_mb": memory.available_mb if memory else None,
            "total_mb": memory.total_mb if memory else None,
            "capped_groups": report.memory_capped_groups,
            "services_protected": report.services_protected,
        },
    }


def squeeze_json(report: TickReport | None, containers: Iterable[SqueezedContainer]) -> Any:
    if report is None:
        return None
    status = report.decision.status
    return {
        "mode": status.mode,
        "desired": amount_json(status.desired),
        "reclaimed": amount_json(report.reclaimed),
        "managed": report.managed,
        "containers": [_container_json(c) for c in containers],
    }


def _container_json(container: SqueezedContainer) -> dict[str, Any]:
    return {
        "id": container.container_id,
        "baseline": amount_json(container.baseline),
        "limit": amount_json(container.limit),
        "blacklisted": container.blacklisted,
    }


def status_document(
    *,
    node: str,
    at_s: float,
    problem: str | None,
    isolation: IsolationReport | None,
    squeeze: Any,
    evictions: Sequence[Eviction],
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "node": node,
        "at": round(at_s, 3),
        "trusted": problem is None,
        "problem": problem,
        "isolation": isolation_json(isolation) if isolation is not None else None,
        "squeeze": squeeze,
        "evictions": [_eviction_json(eviction) for eviction in evictions],
    }


def _eviction_json(eviction: Eviction) -> dict[str, Any]:
    return {
        "at": round(eviction.at_s, 3),
        "container": eviction.container_id,
        "cause": eviction.cause,
        "detail": eviction.detail,
    }


def write_status(path: Path, document: Mapping[str, Any]) -> None:
    """Replace the status file (temp file and rename: readers see a whole one; the
    old one is freed in the background, :mod:`preemption.lazyfree`). Not fsynced: it is
    rewritten every interval and nothing is restored from it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as stream:
            json.dump(document, stream, indent=1)
            stream.write("\n")
        lazyfree.replace(Path(temp), path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def read_status(path: Path) -> dict[str, Any]:
    """The status file; ``StatusUnavailable`` (one line) when there is none."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise StatusUnavailable(f"{path}: no status file (is the agent running?)") from exc
    except (OSError, ValueError) as exc:
        raise StatusUnavailable(f"{path}: not a status file: {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise StatusUnavailable(f"{path}: not a format-{FORMAT} status file")
    return document


def status_lines(document: Mapping[str, Any]) -> list[str]:
    """The status file for a terminal."""
    trust = "trusted" if document["trusted"] else f"acting on nothing: {document['problem']}"
    lines = [f"node {document['node']} at {document['at']}: {trust}"]
    isolation = document.get("isolation")
    if isolation:
        lines += _isolation_lines(isolation)
    squeeze = document.get("squeeze")
    if squeeze:
        lines.append(
            f"squeeze: {squeeze['mode']}, desired {squeeze['desired']['cpu_millicores']}m / "
            f"{squeeze['desired']['memory_mb']} MiB, reclaimed "
            f"{squeeze['reclaimed']['cpu_millicores']}m / {squeeze['reclaimed']['memory_mb']} MiB"
            f" from {len(squeeze['containers'])} of {squeeze['managed']} batch containers"
        )
    for eviction in document.get("evictions", []):
        lines.append(f"evicted {eviction['container']} at {eviction['at']} "
                     f"({eviction['cause']}): {eviction['detail']}")  # fmt: skip
    return lines


def _isolation_lines(isolation: Mapping[str, Any]) -> list[str]:
    lines = [f"isolation: {isolation['mode']}, batch weight on "
             f"{isolation['weighted_groups']} cgroup(s)"]  # fmt: skip
    if isolation.get("refused"):
        lines.append(f"  agent hierarchy not used: {isolation['refused']}")
    suppress = isolation.get("suppress")
    if suppress:
        lines.append(
            f"  suppress: batch quota {suppress['quota_millicores']}m (budget "
            f"{suppress['budget_millicores']}m, {suppress['change']}); node uses "
            f"{suppress['node_used_millicores']}m of {suppress['capacity_millicores']}m, "
            f"batch {suppress['batch_used_millicores']}m"
        )
    memory = isolation["memory"]
    pressure = "under pressure" if memory["pressure"] else "no pressure"
    lines.append(
        f"  memory: {pressure} ({memory['available_mb']} of {memory['total_mb']} MiB "
        f"available), {memory['capped_groups']} batch cgroup(s) capped, "
        f"{memory['services_protected']} service cgroup(s) protected"
    )
    return lines
