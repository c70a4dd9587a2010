"""The demo: the service in recommend mode with auto-approve (or, with ``review``,
waiting for an operator to approve each proposal on the page), driving a simulated
cluster that replays the bundled FB-2009 trace at accelerated time (each round
simulates ``step_s`` seconds). No Java, no Hadoop: everything runs in-process.

The scheduler file starts as ``yarn_adapt/data/demo/<scheduler>-scheduler.xml``
(copied into the demo's state directory, where the applier backs it up and rewrites
it); jobs go to its leaves by priority as AdaptiveConfig §4.3 does.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from yarn_adapt.errors import InputError
from yarn_adapt.model import Resources, SchedulerConfig, Workload
from yarn_adapt.service.proposer import Proposer
from yarn_adapt.service.records import ProposalRecord, RoundReport
from yarn_adapt.service.service import Service
from yarn_adapt.service.settings import (
    HttpSection,
    Mode,
    ServiceSection,
    Settings,
    StateSection,
    TuningSection,
)
from yarn_adapt.service.simcluster import SimulatedBackend, SimulatedCluster
from yarn_adapt.service.tuner_adapter import SimulationProposer, tuner_settings
from yarn_adapt.sim import ClusterSpec, SimulationOptions
from yarn_adapt.workload import fit_task_time_model, load_trace
from yarn_adapt.workload.bundled import bundled_trace
from yarn_adapt.workload.queues import spread_over
from yarn_adapt.yarn.apply import ApplySettings, PollSettings
from yarn_adapt.yarn.confxml import read_scheduler_document

CONTAINER = Resources(2048, 1)  # AdaptiveConfig §4.2: 1 core and 2 GB per container


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    state_dir: Path
    scheduler: str = "capacity"
    nodes: int = 8
    containers_per_node: int = 8
    step_s: float = 900.0
    interval_s: float = 2.0
    port: int = 8765
    serve: bool = True
    seed: int = 0
    trace: Path | None = None
    review: bool = False  # proposals wait for an operator on the page (no auto-approve)
    token: str | None = None  # the page's write token (the demo makes a one-time one)


def demo_scheduler_file(scheduler: str) -> Path:
    return Path(str(resources.files("yarn_adapt") / "data" / "demo" / f"{scheduler}-scheduler.xml"))


def demo_settings(options: DemoOptions) -> Settings:
    return Settings(
        service=ServiceSection(
            mode=Mode.RECOMMEND, interval_s=options.interval_s, auto_approve=not options.review
        ),
        # Cooldown in wall time: two rounds, whatever the acceleration.
        tuning=TuningSection(cooldown_s=2 * options.interval_s, seed=options.seed),
        state=StateSection(dir=str(options.state_dir)),
        http=HttpSection(enabled=options.serve, port=options.port),
        source="<demo>",
    )


def build_demo(options: DemoOptions, proposer: Proposer | None = None) -> Service:
    """The demo service. The trace's earlier half is the cluster's history (the
    task-time model learns from it); its later half is replayed."""
    path = options.state_dir / "conf" / f"{options.scheduler}-scheduler.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(demo_scheduler_file(options.scheduler), path)
    config = read_scheduler_document(path).config
    cluster, history = replay_cluster(
        config, options.trace, options.nodes, options.containers_per_node, options.seed
    )
    settings = demo_settings(options)
    apply_settings = ApplySettings(
        state_dir=options.state_dir, verify=PollSettings(timeout_s=5.0, interval_s=0.1)
    )
    backend = SimulatedBackend(cluster, path, apply_settings, options.step_s)
    if proposer is None:
        model = fit_task_time_model(history, seed=options.seed)
        proposer = SimulationProposer(tuner_settings(settings, options.step_s), model, history)
    return Service.build(settings, backend, proposer, token=options.token)


def replay_cluster(
    config: SchedulerConfig, trace: Path | None, nodes: int, containers_per_node: int, seed: int
) -> tuple[SimulatedCluster, Workload]:
    """A simulated cluster running ``config`` that replays the later half of ``trace``
    (default: the bundled FB-2009 day), its jobs spread over the config's leaves by
    priority; and the earlier half, the history the task-time model learns from."""
    leaves = [leaf.name for leaf in config.leaves()]
    workload = load_trace(trace or bundled_trace(), seed=seed, queues=spread_over(leaves))
    history, replay = split_in_half(workload)
    spec = ClusterSpec.uniform(nodes, CONTAINER * containers_per_node)
    return SimulatedCluster(replay, spec, config, SimulationOptions(seed=seed)), history


def split_in_half(trace: Workload) -> tuple[Workload, Workload]:
    """The jobs submitted before the trace's middle job, and the rest."""
    jobs = sorted(trace.jobs, key=lambda job: job.submit_s)
    half = len(jobs) // 2
    if half == 0:
        raise InputError(f"{trace.source}: too few jobs for the demo (need at least 2)")
    return (
        Workload(tuple(jobs[:half]), f"{trace.source} (history)"),
        Workload(tuple(jobs[half:]), f"{trace.source} (replayed)"),
    )


# --------------------------------------------------------------------------- output


def describe_round(report: RoundReport, service: Service, simulated_s: float) -> list[str]:
    """Readable lines: the round's decisions, and each new proposal's predictions."""
    clock = _hms(simulated_s)
    lines = [f"round {report.id} (simulated {clock}): {report.status}"]
    for decision in report.decisions:
        lines.append(f"  {decision.kind}: {decision.reason}")
        if decision.proposal_id is not None:
            lines += describe_proposal(service.store.proposal(decision.proposal_id))
    return lines


def describe_proposal(proposal: ProposalRecord) -> list[str]:
    lines = [
        f"  proposal {proposal.id} ({proposal.state}): predicted mean job latency "
        f"{proposal.cluster_before_s:.1f} s -> {proposal.cluster_after_s:.1f} s "
        f"({-proposal.improvement:+.1%})"
    ]
    for group in proposal.groups:
        lines.append(
            f"    group {group.group}: {group.before_s:.1f} s -> {group.after_s:.1f} s "
            f"({group.jobs} jobs)"
        )
    for change in proposal.changes:
        lines.append(
            f"    {change.queue or '(global)'} {change.prop}: {change.old} -> {change.new}"
        )
    lines += [f"    why: {reason}" for reason in proposal.reasons]
    return lines


def summary(service: Service, rounds: int, simulated_s: float) -> dict[str, Any]:
    """The demo's closing JSON line."""
    proposals = list(reversed(service.store.proposals(limit=10_000)))
    first = proposals[0] if proposals else None
    applied = [a for a in service.store.applies(limit=10_000) if a.result == "applied"]
    return {
        "proposals": len(proposals),
        "predicted_latency_before_s": _rounded(first.cluster_before_s) if first else None,
        "predicted_latency_after_s": _rounded(first.cluster_after_s) if first else None,
        "applied": len(applied),
        "rounds": rounds,
        "simulated_s": round(simulated_s, 1),
    }


def _rounded(value: float) -> float | None:
    return round(value, 2) if math.isfinite(value) and value >= 0 else None


def _hms(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
