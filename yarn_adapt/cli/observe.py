"""``yarn-adapt observe``: what the RM and JobHistory report, for an operator."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence

import click

from yarn_adapt.cli.connect import endpoints_from_options, yarn_options
from yarn_adapt.model import Application, ClusterSnapshot, MapReduceJob, Node, QueueStatus
from yarn_adapt.model.serialize import to_jsonable
from yarn_adapt.yarn.observe import Observation, observe_cluster


@click.command("observe")
@yarn_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of tables.")
@click.option(
    "--window",
    type=float,
    default=3600.0,
    show_default=True,
    metavar="SECONDS",
    help="Finished apps/jobs of the last SECONDS.",
)
@click.option(
    "--jobs", "job_limit", type=int, default=20, show_default=True, help="JobHistory jobs to read."
)
def observe_command(as_json: bool, window: float, job_limit: int, **connection: object) -> None:
    """Show the cluster, queues with usage, nodes, apps and recent JobHistory jobs."""
    endpoints = endpoints_from_options(**connection)  # type: ignore[arg-type]
    with endpoints.rm_client() as rm:
        history = endpoints.history_client()
        try:
            observation = observe_cluster(
                rm, history, app_window_ms=int(window * 1000), job_limit=job_limit
            )
        finally:
            if history is not None:
                history.close()
    if as_json:
        click.echo(json.dumps(_json(observation), indent=2))
    else:
        click.echo("\n".join(render_observation(observation)))


def _json(observation: Observation) -> dict[str, object]:
    return {
        "snapshot": with_units(to_jsonable(observation.snapshot)),
        "problems": [problem.one_line() for problem in observation.problems],
    }


UNIT_NAMES = {
    "capacity": "capacity_percent",
    "maximum_capacity": "maximum_capacity_percent",
    "absolute_capacity": "absolute_capacity_percent",
    "absolute_maximum_capacity": "absolute_maximum_capacity_percent",
    "used_capacity": "used_of_guarantee_percent",
    "absolute_used_capacity": "used_of_cluster_percent",
    "maximum_am_resource_percent": "maximum_am_resource_ratio",  # YARN's is a fraction
    "progress": "progress_percent",
    "node_cpu": "node_cpu_cores",
    "containers_cpu": "containers_cpu_vcores",
}
"""The model's names (as YARN's REST API says them) renamed to carry their unit."""
EPOCH_MS = 10**11
"""Milliseconds above this are moments (Unix time), not durations."""


def with_units(value: object) -> object:
    """The snapshot as JSON whose keys carry their unit (docs/CLI.md's rule):
    milliseconds become seconds (``_s``, or ``_epoch_s`` for a moment), percentages
    ``_percent``, fractions ``_ratio``."""
    if isinstance(value, list):
        return [with_units(item) for item in value]
    if not isinstance(value, dict):
        return value
    converted: dict[str, object] = {}
    for raw, item in value.items():
        key = str(raw)
        if key.endswith("_ms") and isinstance(item, int | float) and not isinstance(item, bool):
            moment = item > EPOCH_MS
            converted[key[:-3] + ("_epoch_s" if moment else "_s")] = item / 1000.0
        else:
            converted[UNIT_NAMES.get(key, key)] = with_units(item)
    return converted


def render_observation(observation: Observation) -> list[str]:
    snapshot = observation.snapshot
    lines = _cluster_lines(snapshot)
    lines += ["", "Queues", *_queue_lines(snapshot.scheduler.root)]
    lines += ["", "Nodes", *_table(_node_rows(snapshot.nodes))]
    lines += ["", "Applications", *_table(_app_rows(snapshot.apps))]
    lines += ["", "JobHistory jobs", *_table(_job_rows(snapshot.jobs))]
    lines += [f"warning: {problem.one_line()}" for problem in observation.problems]
    return lines


def _cluster_lines(snapshot: ClusterSnapshot) -> list[str]:
    info, metrics = snapshot.info, snapshot.metrics
    taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.taken_ms / 1000))
    nodes = f"{metrics.active_nodes}/{metrics.total_nodes}"
    apps = f"apps running {metrics.apps_running}, pending {metrics.apps_pending}"
    return [
        f"Cluster {info.cluster_id}  {info.ha_state}  Hadoop {info.hadoop_version}  at {taken}",
        f"  scheduler {snapshot.scheduler.kind}  nodes {nodes} active",
        f"  resources used {metrics.allocated} of {metrics.total}; {apps}",
    ]


def _queue_lines(root: QueueStatus, depth: int = 0) -> list[str]:
    lines = ["  " * (depth + 1) + _queue_text(root)]
    for child in root.children:
        lines += _queue_lines(child, depth + 1)
    return lines


def _queue_text(queue: QueueStatus) -> str:
    """One queue: its guarantee, then what it holds -- as resources, as a share of the
    cluster (the page's figure) and of its own guarantee (the RM's usedCapacity),
    each named for what it is."""
    parts = [queue.name, queue.state or ""]
    if queue.capacity is not None:
        parts.append(f"capacity {queue.capacity:g}% (max {queue.maximum_capacity:g}%)")
    if queue.scheduling_policy:
        parts.append(f"policy {queue.scheduling_policy}")
    shares = []
    if queue.absolute_used_capacity is not None:
        shares.append(f"{queue.absolute_used_capacity:.1f}% of the cluster")
    if queue.used_capacity is not None:
        shares.append(f"{queue.used_capacity:.1f}% of its guarantee")
    held = f"holds {queue.used}" + (f" ({', '.join(shares)})" if shares else "")
    parts.append(f"{held}  apps {queue.num_applications}")
    return "  ".join(part for part in parts if part)


def _node_rows(nodes: Iterable[Node]) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = [("id", "state", "rack", "total", "used", "containers")]
    rows += [
        (n.id, n.state, n.rack, str(n.total), str(n.used), str(n.num_containers)) for n in nodes
    ]
    return rows


def _app_rows(apps: Iterable[Application]) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = [("id", "queue", "state", "user", "name", "wait s", "latency s")]
    for app in apps:
        rows.append(
            (
                app.id,
                app.queue,
                app.state,
                app.user,
                app.name[:30],
                _seconds(app.wait_ms),
                _seconds(app.latency_ms),
            )
        )
    return rows


def _job_rows(jobs: Iterable[MapReduceJob]) -> list[Sequence[str]]:
    rows: list[Sequence[str]] = [("id", "queue", "state", "maps", "reduces", "tasks", "latency s")]
    for job in jobs:
        tasks = f"{len(job.tasks)} ({_task_span(job)})" if job.tasks else "-"
        rows.append(
            (
                job.id,
                job.queue,
                job.state,
                f"{job.maps_completed}/{job.maps_total}",
                f"{job.reduces_completed}/{job.reduces_total}",
                tasks,
                _seconds(job.latency_ms),
            )
        )
    return rows


def _task_span(job: MapReduceJob) -> str:
    seconds = [task.elapsed_ms / 1000 for task in job.tasks]
    return f"{min(seconds):.1f}-{max(seconds):.1f} s"


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}"


def _table(rows: list[Sequence[str]]) -> list[str]:
    if len(rows) <= 1:
        return ["  (none)"]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
