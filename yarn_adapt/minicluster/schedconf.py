"""Small pieces of Capacity Scheduler configuration the harness needs to reset a cluster."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from xml.sax.saxutils import escape

PREFIX = "yarn.scheduler.capacity."


def capacity_queues(properties: Mapping[str, str]) -> set[str]:
    """Every queue path reachable from ``root`` through ``<path>.queues`` properties."""
    found: set[str] = set()
    pending = ["root"]
    while pending:
        path = pending.pop()
        found.add(path)
        children = properties.get(f"{PREFIX}{path}.queues", "")
        pending.extend(f"{path}.{child.strip()}" for child in children.split(",") if child.strip())
    return found


def stop_queues_body(queue_paths: Iterable[str]) -> str:
    """A ``<sched-conf>`` PUT body setting ``state=STOPPED`` on each queue."""
    updates = "".join(
        f"<update-queue><queue-name>{escape(path)}</queue-name><params>"
        "<entry><key>state</key><value>STOPPED</value></entry></params></update-queue>"
        for path in sorted(queue_paths)
    )
    return f"<sched-conf>{updates}</sched-conf>"
