"""``yarn-adapt guard status``: the co-location guard of a running service.

It asks the service (``GET /api/guard``, which needs no token) -- the guard lives in
the service's process, so its loop's health, the applications' slack and the last
cycle's decisions are there and nowhere else. The address is ``--url``, else the
service's own from ``--config`` (``[http] public_url``, else ``[http] host`` and
``port``; a wildcard host is asked on loopback), else ``http://127.0.0.1:8765``.

``--json`` prints the API's answer as it is: one object with ``mode``, ``policy``,
``health`` (``healthy``, ``period_s``, ``last_cycle_at_epoch_s``, ``last_cycle_age_s``,
``last_cycle_duration_s``, ``consecutive_failures``, ``failure_budget``,
``error_budget_spent``, ``last_error``, ``gave_back_at_epoch_s``, ``gave_back_reason``,
``nodes_age_s``, ...), ``applications`` (``latency_ms``, ``target_ms``,
``slack_ratio``, ``state``), ``learned_demand`` (per application ``rounds``,
``memory_samples``, ``min_rounds``, ``cpu`` with ``estimate_vcores``,
``lower_vcores``, ``upper_vcores`` and ``load_rps``, ``memory`` with ``estimate_mb``,
``lower_mb``, ``upper_mb``, and ``cpu_used``/``memory_used``: ``learned`` or
``observed``, with ``cpu_short``/``memory_short`` saying why), ``nodes`` (per node
``state``, ``paths`` with ``self_ms`` and ``share_ratio``, ``real``/``visible`` in
``memory_mb`` and ``vcores``, ``action``, ``reason``, ``agent``), ``journalled_nodes``
and ``settings``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from yarn_adapt.service.guard_client import DEFAULT_URL, fetch_status, service_url


@click.group("guard")
def guard_group() -> None:
    """The co-location guard of a running service."""


@guard_group.command("status")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="TOML",
    help="yarn-adapt.toml: its [http] says where the service listens.",
)
@click.option("--url", metavar="URL", help=f"The service's address (default {DEFAULT_URL}).")
@click.option("--timeout", type=float, default=10.0, show_default=True, metavar="SECONDS")
@click.option("--json", "as_json", is_flag=True, help="The API's JSON object instead of text.")
def status_command(
    config_path: Path | None, url: str | None, timeout: float, as_json: bool
) -> None:
    """The guard's mode, policy and loop health, each latency-critical application's
    slack, and each node's last decision with its reason."""
    base = url or _service_url(config_path)
    status = fetch_status(base, timeout)
    if as_json:
        click.echo(json.dumps(status))
        return
    for line in status_lines(status):
        click.echo(line)


def _service_url(config_path: Path | None) -> str:
    if config_path is None:
        return DEFAULT_URL
    from yarn_adapt.service.settings import load_settings

    return service_url(load_settings(config_path).http)


# --------------------------------------------------------------------------- text


def status_lines(status: dict[str, Any]) -> list[str]:
    lines = [f"guard {status['mode']}, policy {status.get('policy', '?')}: "
             f"{_health(status.get('health'))}"]  # fmt: skip
    if status.get("journalled_nodes"):
        lines.append(f"original totals journalled: {', '.join(status['journalled_nodes'])}")
    last = status.get("last_round")
    if last and last.get("risk_problem"):
        lines.append(f"risk: {last['risk_problem']}")
    for app in status.get("applications", []):
        lines.append(
            f"application {app['application']}: P{app['percentile']:g} "
            f"{app['latency_ms']:.1f} ms of {app['target_ms']:g} ms, slack "
            f"{app['slack_ratio']:.0%}: {app['state']} ({app['requests']} requests)"
        )
    for learned in status.get("learned_demand", []):
        lines.append(_learned(learned))
    for node in status.get("nodes", []):
        lines.append(_node(node))
    if not status.get("nodes"):
        lines.append("no decision yet")
    for node, report in (status.get("agents") or {}).items():
        lines.append(f"agent on {node}, reported {report['age_s']:.0f} s ago:")
        lines += [f"  {line}" for line in report["lines"]]
    return lines


def _health(health: dict[str, Any] | None) -> str:
    if health is None:
        return "no loop"
    state = "healthy" if health["healthy"] else "NOT healthy"
    age = health.get("last_cycle_age_s")
    text = (
        f"{state}, a cycle every {health['period_s']:g} s; "
        + ("no cycle yet" if age is None else f"last cycle {age:.1f} s ago")
        + f"; {health['consecutive_failures']} of {health['failure_budget']} failures in a row"
    )
    if health.get("last_error"):
        text += f"; last error: {health['last_error']}"
    if health.get("gave_back_reason"):
        text += f"; gave every node back: {health['gave_back_reason']}"
    return text


def _learned(app: dict[str, Any]) -> str:
    """``learned demand shop (7 rounds): 1.20 vcores, bound 1.80 at 35.0 req/s,
    in use; 512 MB, bound 700 MB (7 samples), in use``."""
    cpu, memory = app.get("cpu"), app.get("memory")
    cpu_text = (
        "no CPU demand yet" if cpu is None
        else f"{cpu['estimate_vcores']:.2f} vcores, bound {cpu['upper_vcores']:.2f} "
             f"at {cpu['load_rps']:.1f} req/s ({cpu['source']})"
    )  # fmt: skip
    memory_text = (
        "no memory demand yet" if memory is None
        else f"{memory['estimate_mb']:.0f} MB, bound {memory['upper_mb']:.0f} MB"
    )  # fmt: skip
    return (
        f"learned demand {app['application']} ({app['rounds']} rounds, "
        f"{app['min_rounds']} wanted): {cpu_text}, {_used(app, 'cpu')}; "
        f"{memory_text} ({app['memory_samples']} samples), {_used(app, 'memory')}"
    )


def _used(app: dict[str, Any], resource: str) -> str:
    if app.get(f"{resource}_used") == "learned":
        return "in use"
    return f"observed usage in use meanwhile ({app.get(f'{resource}_short')})"


def _node(node: dict[str, Any]) -> str:
    real, before, target = node["real"], node["visible_before"], node["visible"]
    paths = "; ".join(
        f"{p['application']} {p['self_ms']:.1f} ms ({p['share_ratio']:.0%}) {p['state']}"
        for p in node.get("paths", [])
    )
    seen = f"batch sees {_amount(before)} of {_amount(real)}"
    if target != before:
        seen += f" -> {_amount(target)}" + (" (recommended)" if node["mode"] != "auto" else "")
    result = f" ({node['result']})" if node.get("result") else ""
    return (
        f"node {node['node']} [{node.get('state') or '-'}]: {seen}; "
        + (f"path {paths}; " if paths else "")
        + f"{node['action']}{result}: {node['reason']}"
    )


def _amount(amount: dict[str, int]) -> str:
    return f"{amount['vcores']} vcores / {amount['memory_mb']} MB"
