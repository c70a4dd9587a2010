"""Reading queue facts out of real /scheduler answers, for the harness tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from yarn_adapt.minicluster import MiniCluster


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def scheduler_info(cluster: MiniCluster) -> dict[str, Any]:
    info: dict[str, Any] = cluster.rm_get("scheduler")["scheduler"]["schedulerInfo"]
    return info


def capacity_queues(cluster: MiniCluster) -> dict[str, dict[str, Any]]:
    """Every Capacity Scheduler queue below root, by path."""
    return {q["queuePath"]: q for q in _walk_capacity(scheduler_info(cluster))}


def _walk_capacity(queue: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for child in as_list((queue.get("queues") or {}).get("queue")):
        yield child
        yield from _walk_capacity(child)


def configured_capacities(cluster: MiniCluster) -> dict[str, float]:
    """Configured capacity per queue path, rounded: the RM reports float32 values (30.000002)."""
    return {path: round(float(q["capacity"]), 3) for path, q in capacity_queues(cluster).items()}


def fair_queues(cluster: MiniCluster) -> dict[str, dict[str, Any]]:
    """Every Fair Scheduler queue below root, by name (``root.a``)."""
    return {q["queueName"]: q for q in _walk_fair(scheduler_info(cluster)["rootQueue"])}


def _walk_fair(queue: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for child in as_list((queue.get("childQueues") or {}).get("queue")):
        yield child
        yield from _walk_fair(child)


def capacity_xml(leaves: Mapping[str, float], extra: Mapping[str, str] | None = None) -> str:
    """A capacity-scheduler.xml with the given leaf capacities under root."""
    properties = {
        "yarn.scheduler.capacity.maximum-am-resource-percent": "0.5",
        "yarn.scheduler.capacity.node-locality-delay": "-1",
        "yarn.scheduler.capacity.root.queues": ",".join(leaves),
    }
    for name, capacity in leaves.items():
        properties[f"yarn.scheduler.capacity.root.{name}.capacity"] = f"{capacity:g}"
        properties[f"yarn.scheduler.capacity.root.{name}.maximum-capacity"] = "100"
    properties.update(extra or {})
    rows = "".join(
        f"<property><name>{k}</name><value>{v}</value></property>\n" for k, v in properties.items()
    )
    return f"<configuration>\n{rows}</configuration>\n"
