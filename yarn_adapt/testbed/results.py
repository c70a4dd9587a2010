"""What a testbed run measured: its windows (:class:`Window`), each window's latency
figures (:func:`figures_in`, from the load generator's records) and per service
replica its request CPU and wall time (:func:`service_figures`, from ``--stats``),
the run as a whole (:class:`TestbedResult`: its summary, its table) and the JSON
``yarn-adapt testbed --json`` and ``bench testbed`` print (:func:`result_json`)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yarn_adapt.testbed.agents import AgentCounts, RestoreCheck
from yarn_adapt.testbed.options import GUARD, OFF, ON, PHASES, POLICY_ROWS, STATIC, TestbedOptions


@dataclass(frozen=True)
class Window:
    name: str  # alone, off, guard, on, job-off, job-guard, job-on
    start_s: float
    end_s: float
    risky_node_batch_vcores: float = math.nan  # mean batch vcores on node 0 meanwhile
    other_node_batch_vcores: float = math.nan
    reclaimed_millicores: tuple[float, float] = (math.nan, math.nan)  # agents', per node
    batch_cpu_share: tuple[float, ...] = ()  # per node: batch's share of its CPU
    lc_cpu_share: tuple[float, ...] = ()  # per node: the services' share of its CPU
    services: tuple[ServiceFigures, ...] = ()


@dataclass(frozen=True)
class ServiceFigures:
    """One service replica in one window: its requests (by when its own work began),
    their rate, the CPU time of its own work per request (mean, median) and that
    work's wall time (P50, P95)."""

    service: str
    node: int
    requests: int
    rate_rps: float
    cpu_ms_mean: float
    cpu_ms_median: float
    self_p50_ms: float
    self_p95_ms: float


@dataclass(frozen=True)
class LatencyFigures:
    requests: int
    failed: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    # the P95 of the requests that arrived in each whole second of the window
    second_p95s_ms: tuple[float, ...] = ()


# The targets for the yarn-adapt row (docs/benchmarks.md).
TARGET_P95_VS_ALONE = 1.2
TARGET_BATCH_WORK_VS_STATIC = 1.3


@dataclass
class LearnedProgress:
    """The guard's learned demand as ``GET /api/guard`` showed it, sampled through the
    run: how often each application's CPU demand was the learner's (not observed
    usage, its fallback while the learner has too few rounds), and the newest view."""

    samples: int = 0
    learned_samples: int = 0
    last: list[dict[str, Any]] = field(default_factory=list)

    def note(self, applications: list[dict[str, Any]]) -> None:
        self.samples += 1
        if all(app.get("cpu_used") == "learned" for app in applications):
            self.learned_samples += 1
        self.last = applications

    def to_json(self) -> dict[str, Any] | None:
        if not self.samples:
            return None
        return {
            "samples": self.samples,
            "learned_share": round(self.learned_samples / self.samples, 3),
            "last": self.last,
        }


@dataclass
class TestbedResult:
    options: TestbedOptions
    windows: list[tuple[Window, LatencyFigures]] = field(default_factory=list)
    makespans_s: dict[str, float] = field(default_factory=dict)
    job_states: dict[str, str] = field(default_factory=dict)
    preempted_containers: int = 0
    guard_rounds: int = 0
    guard_problems: list[str] = field(default_factory=list)
    alone_traced_p95_ms: float | None = None
    qos_target_ms: float | None = None
    agent_counts: AgentCounts = field(default_factory=AgentCounts)
    restores: list[RestoreCheck] = field(default_factory=list)
    agent_starts: int = 0
    demand: str = ""  # the guard's [colocation] demand as the service ran
    serve_starts: int = 0  # yarn-adapt serve's starts (the QoS target, each policy change)
    learned: LearnedProgress = field(default_factory=LearnedProgress)
    cgroup_weights: dict[str, Any] = field(default_factory=lambda: {"cgroup_weights": "none"})

    def p95s(self, name: str) -> list[float]:
        return [f.p95_ms for w, f in self.windows if w.name == name]

    def summary(self) -> dict[str, Any]:
        alone = self.p95s("alone")
        body: dict[str, Any] = {
            "policy": self.options.policy,
            "demand": self.demand,
            "load_profile": self.options.load_profile,
            "batch_mix": self.options.batch_mix,
            "phases": {name: PHASES[name] for name in ("alone", *self.options.phases)},
            "p95_alone_ms": _round(statistics.fmean(alone)) if alone else None,
            "p95_alone_runs_ms": [_round(v) for v in alone],
        }
        for phase in (OFF, GUARD, ON):
            body.update(self._phase_figures(phase, alone))
        agents = self.agent_counts
        body.update({
            "batch_makespan_off_s": _round(self.makespans_s.get(OFF)),
            "batch_makespan_guard_s": _round(self.makespans_s.get(GUARD)),
            "batch_makespan_on_s": _round(self.makespans_s.get(ON)),
            "batch_jobs": self.job_states,
            "preempted_containers": self.preempted_containers,
            "guard_rounds": self.guard_rounds,
            "serve_starts": self.serve_starts,
            "learned_demand": self.learned.to_json(),
            "p95_alone_traced_ms": _round(self.alone_traced_p95_ms),
            "qos_target_ms": _round(self.qos_target_ms),
            **self.cgroup_weights,
            "agents": {
                "starts": self.agent_starts,
                "steps": int(agents.steps), "released": int(agents.released),
                "tasks_squeezed": int(agents.tasks_squeezed),
                "blacklisted": int(agents.blacklisted), "killed": int(agents.killed),
                "request_errors": int(agents.request_errors),
                "restores": [check.to_json() for check in self.restores],
                "restored_all": all(check.complete for check in self.restores),
            },
        })  # fmt: skip
        body.update(self.side_by_side())
        return body

    def side_by_side(self) -> dict[str, Any]:
        """Per policy (each phase's row of :data:`POLICY_ROWS`), over its windows: the
        P95 and P99 as multiples of the run's alone figures (median, worst), the
        SLO-violation seconds, the batch work done and the makespan; then yarn-adapt's
        batch work against the static answer's, and the targets."""
        alone = [f for w, f in self.windows if w.name == "alone"]
        if not alone:
            return {}
        p95_alone = statistics.fmean(f.p95_ms for f in alone)
        p99_alone = statistics.fmean(f.p99_ms for f in alone)
        target_ms = self.options.qos_target_factor * p95_alone
        rows = {}
        for phase in self.options.phases:
            runs = [(w, f) for w, f in self.windows if w.name == phase]
            if runs:
                row = policy_row(runs, p95_alone, p99_alone, target_ms)
                row["makespan_s"] = _round(self.makespans_s.get(phase))
                rows[POLICY_ROWS[phase]] = row
        work = {name: row["batch_work_median"] for name, row in rows.items()}
        static, ours = work.get(POLICY_ROWS[STATIC]), work.get(POLICY_ROWS[ON])
        ratio = _round(ours / static, 3) if ours is not None and static else None
        p95_ours = rows.get(POLICY_ROWS[ON], {}).get("p95_vs_alone_median")
        return {
            "slo_target_ms": _round(target_ms),
            "policies": rows,
            "batch_work_vs_static": ratio,
            "targets": {
                "p95_on_vs_alone_max": TARGET_P95_VS_ALONE,
                "batch_work_vs_static_min": TARGET_BATCH_WORK_VS_STATIC,
                "p95_met": p95_ours is not None and p95_ours <= TARGET_P95_VS_ALONE,
                "batch_work_met": ratio is not None and ratio >= TARGET_BATCH_WORK_VS_STATIC,
            },
        }

    def _phase_figures(self, phase: str, alone: Sequence[float]) -> dict[str, Any]:
        values = self.p95s(phase)
        if not values:
            return {}
        mean = statistics.fmean(values)
        figures: dict[str, Any] = {
            f"p95_{phase}_ms": _round(mean),
            f"p95_{phase}_spread_ms": _round(_spread(values)),
            f"p95_{phase}_runs_ms": [_round(v) for v in values],
            f"p95_{phase}_median_ms": _round(statistics.median(values)),
            f"p95_{phase}_worst_ms": _round(max(values)),
        }
        if alone:  # the median run against the alone windows' mean (the policies' rows)
            ratio = statistics.median(values) / statistics.fmean(alone)
            figures[f"p95_{phase}_vs_alone"] = _round(ratio, 3)
        return figures

    def table(self) -> list[str]:
        lines = [f"{'window':<9} {'requests':>8} {'failed':>6} {'p50 ms':>9} {'p95 ms':>9} "
                 f"{'p99 ms':>9} {'batch vcores node0/node1':>26} "
                 f"{'agents reclaimed mc':>20}"]  # fmt: skip
        for window, figures in self.windows:
            placed = (f"{window.risky_node_batch_vcores:.1f} / {window.other_node_batch_vcores:.1f}"
                      if not math.isnan(window.risky_node_batch_vcores) else "-")  # fmt: skip
            held = window.reclaimed_millicores
            reclaimed = f"{held[0]:.0f} / {held[1]:.0f}" if not math.isnan(held[0]) else "-"
            lines.append(
                f"{window.name:<9} {figures.requests:>8} {figures.failed:>6} "
                f"{figures.p50_ms:>9.1f} {figures.p95_ms:>9.1f} {figures.p99_ms:>9.1f} "
                f"{placed:>26} {reclaimed:>20}"
            )
        for mode, seconds in self.makespans_s.items():
            lines.append(f"batch job with the guard {mode}: makespan {seconds:.1f} s "
                         f"({self.job_states.get(mode, '?')})")  # fmt: skip
        return lines


def policy_row(
    runs: Sequence[tuple[Window, LatencyFigures]],
    p95_alone_ms: float,
    p99_alone_ms: float,
    target_ms: float,
) -> dict[str, Any]:
    """One policy's windows: its tail as multiples of alone (median, worst), the
    seconds whose requests' P95 missed ``target_ms`` (the client's SLO:
    ``qos_target_factor`` x the run's P95 alone), and the batch work done: the CPU
    seconds the batch containers used per wall second, both nodes together (the
    burners' work is CPU; a squeezed one does less)."""
    p95 = [f.p95_ms / p95_alone_ms for _, f in runs]
    p99 = [f.p99_ms / p99_alone_ms for _, f in runs]
    missed = [sum(1 for p in f.second_p95s_ms if p > target_ms) for _, f in runs]
    work = [sum(w.batch_cpu_share) for w, _ in runs if w.batch_cpu_share]
    return {
        "runs": len(runs),
        "p95_ms_runs": [_round(f.p95_ms) for _, f in runs],
        "p95_vs_alone_median": _round(statistics.median(p95), 3),
        "p95_vs_alone_worst": _round(max(p95), 3),
        "p99_vs_alone_median": _round(statistics.median(p99), 3),
        "p99_vs_alone_worst": _round(max(p99), 3),
        "slo_violation_s_median": statistics.median(missed),
        "slo_violation_s_worst": max(missed),
        "batch_work_runs": [_round(v, 3) for v in work],
        "batch_work_median": _round(statistics.median(work), 3) if work else None,
        "batch_work_worst": _round(min(work), 3) if work else None,
    }


def _spread(values: Sequence[float]) -> float | None:
    return max(values) - min(values) if values else None


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def stats_records(path: Path) -> list[tuple[float, float, float]]:
    """A service's ``--stats`` lines: (start, cpu ms, wall ms); a cut line skipped."""
    records = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            start, cpu_ms, wall_ms = json.loads(line)
            records.append((float(start), float(cpu_ms), float(wall_ms)))
        except (ValueError, TypeError):
            continue  # a line cut by the stop
    return records


def service_figures(
    name: str, node: int, records: Sequence[tuple[float, float, float]], window: Window
) -> ServiceFigures:
    inside = [(cpu, wall) for start, cpu, wall in records
              if window.start_s <= start <= window.end_s]  # fmt: skip
    if not inside:
        return ServiceFigures(name, node, 0, 0.0, math.nan, math.nan, math.nan, math.nan)
    cpu = sorted(c for c, _ in inside)
    wall = sorted(w for _, w in inside)
    return ServiceFigures(
        service=name,
        node=node,
        requests=len(inside),
        rate_rps=len(inside) / max(window.end_s - window.start_s, 1e-9),
        cpu_ms_mean=statistics.fmean(cpu),
        cpu_ms_median=statistics.median(cpu),
        self_p50_ms=_percentile(wall, 50),
        self_p95_ms=_percentile(wall, 95),
    )


def latency_records(path: Path) -> list[tuple[float, float, bool]]:
    records = []
    for line in path.read_text().splitlines():
        try:
            arrival, latency, ok = json.loads(line)
        except ValueError:
            continue  # a line cut by the stop
        records.append((float(arrival), float(latency), bool(ok)))
    return records


def figures_in(records: Sequence[tuple[float, float, bool]], window: Window) -> LatencyFigures:
    inside = [(latency, ok) for arrival, latency, ok in records
              if window.start_s <= arrival <= window.end_s]  # fmt: skip
    latencies = sorted(latency for latency, _ in inside)
    if not latencies:
        return LatencyFigures(0, 0, math.nan, math.nan, math.nan)
    return LatencyFigures(
        requests=len(latencies),
        failed=sum(1 for _, ok in inside if not ok),
        p50_ms=_percentile(latencies, 50),
        p95_ms=_percentile(latencies, 95),
        p99_ms=_percentile(latencies, 99),
        second_p95s_ms=second_p95s(records, window),
    )


def second_p95s(records: Sequence[tuple[float, float, bool]], window: Window) -> tuple[float, ...]:
    """The P95 of the requests that arrived in each whole second of ``window`` (a
    second without arrivals has none)."""
    seconds = int(window.end_s - window.start_s)
    slices: list[list[float]] = [[] for _ in range(seconds)]
    for arrival, latency, _ in records:
        index = math.floor(arrival - window.start_s)
        if 0 <= index < seconds:
            slices[index].append(latency)
    return tuple(_percentile(sorted(s), 95) for s in slices if s)


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def result_json(result: TestbedResult) -> dict[str, Any]:
    body = result.summary()
    body["options"] = asdict(result.options)
    body["windows"] = [window_json(w, f) for w, f in result.windows]
    return body


def window_json(window: Window, figures: LatencyFigures) -> dict[str, Any]:
    """One window for the calibration: its end-to-end figures, per node the batch
    and services' CPU shares and batch vcores, per service replica its figures."""

    def share(values: Sequence[float]) -> list[float | None]:
        return [_round(v, 4) for v in values]

    return {
        "name": window.name,
        "start_s": round(window.start_s, 3),
        "duration_s": round(window.end_s - window.start_s, 3),
        "requests": figures.requests,
        "failed": figures.failed,
        "p50_ms": _round(figures.p50_ms, 2),
        "p95_ms": _round(figures.p95_ms, 2),
        "p99_ms": _round(figures.p99_ms, 2),
        "second_p95s_ms": [_round(v, 1) for v in figures.second_p95s_ms],
        "batch_cpu_share": share(window.batch_cpu_share),
        "lc_cpu_share": share(window.lc_cpu_share),
        "batch_vcores": share((window.risky_node_batch_vcores, window.other_node_batch_vcores)),
        "services": [_service_json(s) for s in window.services],
    }


def _service_json(s: ServiceFigures) -> dict[str, Any]:
    return {
        "service": s.service, "node": s.node, "requests": s.requests,
        "rate_rps": _round(s.rate_rps, 3), "cpu_ms_mean": _round(s.cpu_ms_mean, 3),
        "cpu_ms_median": _round(s.cpu_ms_median, 3),
        "self_p50_ms": _round(s.self_p50_ms, 3), "self_p95_ms": _round(s.self_p95_ms, 3),
    }  # fmt: skip
