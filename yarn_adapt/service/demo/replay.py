"""The demo: the service in recommend mode with auto-approve (or, with ``review``,
waiting for an operator to approve each proposal on the page), driving a simulated
cluster that replays the bundled FB-2009 trace at accelerated time (each round
simulates ``step_s`` seconds). No Java, no Hadoop: everything runs in-process.

The cluster is sized from the trace alone (:func:`sized_nodes`): enough nodes that
the replayed half's tasks would keep about 70 % of the containers busy over its
whole span, so the replay neither idles nor builds an unbounded backlog, whatever
``--rounds`` says (a run covers part of that span: its own busy share, reported as
``utilisation_ratio``, follows the trace's hours). At the end (:func:`run_summary`)
the whole run is judged: the realised mean latency of the jobs submitted in the run
with tuning, against the same trace replayed under the starting configuration; each
proposal's prediction against what its own jobs (the ones in progress in its
re-tuned groups when the tuner looked) realised; and how often the likely ranges the
proposer stated held (``interval_coverage``). The summary is stored
(:meth:`Store.record_run_summary`) so the page shows it too.

Unless ``colocation`` is off, the demo also runs the co-location half
(:mod:`yarn_adapt.service.demo.simcoloc`): a latency-critical application of three
services on three of the nodes, traced into an in-process store, the guard in
``auto`` with simulated node agents; the summary adds the services' P95 against
their target and the batch work their nodes ran.

The scheduler file starts as ``yarn_adapt/data/demo/<scheduler>-scheduler.xml``
(copied into the demo's state directory, where the applier backs it up and rewrites
it); jobs go to its leaves by priority as AdaptiveConfig §4.3 does.
"""

from __future__ import annotations

import math
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.cosim.lc_services import HostModel, LcApplication, LcService
from yarn_adapt.durations import duration
from yarn_adapt.errors import InputError
from yarn_adapt.model import Resources, SchedulerConfig, Workload
from yarn_adapt.service.backend import FinishedJob, Observed, SimulatedView
from yarn_adapt.service.demo.simcluster import SimulatedBackend, SimulatedCluster
from yarn_adapt.service.demo.simcoloc import DemoColocation, demo_guard
from yarn_adapt.service.proposers.checking import ProposalError, check_proposal, proposal_errors
from yarn_adapt.service.proposers.intervals import (
    PredictionLedger,
    log_ratio_spread,
    population_by_group,
)
from yarn_adapt.service.proposers.realized import group_of_queue
from yarn_adapt.service.proposers.seam import Proposer
from yarn_adapt.service.proposers.tuner_adapter import simulated_proposer, tuner_settings
from yarn_adapt.service.service import Service
from yarn_adapt.service.settings import (
    ColocationSection,
    HttpSection,
    Mode,
    ServiceSection,
    Settings,
    StateSection,
    TuningSection,
)
from yarn_adapt.service.state.records import DecisionKind, ProposalRecord, RoundReport, Suggestion
from yarn_adapt.service.web.console import change_words
from yarn_adapt.sim import ClusterSpec, JobResult, SimulationOptions
from yarn_adapt.workload import load_trace
from yarn_adapt.workload.bundled import bundled_trace
from yarn_adapt.workload.queues import spread_over
from yarn_adapt.workload.taskvalidation import fit_with_measured_error
from yarn_adapt.yarn.apply import ApplySettings, PollSettings
from yarn_adapt.yarn.confxml import read_scheduler_document

CONTAINER = Resources(2048, 1)  # AdaptiveConfig §4.2: 1 core and 2 GB per container
TARGET_UTILISATION = 0.70
"""The share of the containers the replayed tasks keep busy over the demo's window
(ApplicationMasters come on top: 60-85 % in all)."""


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    state_dir: Path
    scheduler: str = "capacity"
    nodes: int | None = None  # None: sized from the trace's demand (sized_nodes)
    rounds: int = 20  # the demo's window is rounds x step_s of the replay
    containers_per_node: int = 8
    step_s: float = 900.0
    interval_s: float = 2.0
    port: int = 8765
    serve: bool = True
    seed: int = 0
    trace: Path | None = None
    review: bool = False  # proposals wait for an operator on the page (no auto-approve)
    token: str | None = None  # the page's write token (the demo makes a one-time one)
    colocation: bool = True  # latency-critical services, the guard and agents beside batch


GUARD_PERIOD_S = 60.0
"""Simulated seconds between the demo's guard cycles (each round's segment is cut so)."""

LC_TARGET_MS = 25.0
"""The demo application's P95 target: met with little batch on its nodes, missed with
the nodes full."""


LC_NODES = 3
"""The demo application's services' nodes, added to those the trace's batch needs."""


def demo_application(node_ids: Sequence[str]) -> LcApplication:
    """A shop: ``frontend`` calls ``cart`` then ``catalog``, each on its own node (the
    first three; fewer nodes are shared), 200 requests/s of which 5/s are traced."""
    nodes = [node_ids[i % len(node_ids)] for i in range(LC_NODES)]
    return LcApplication(
        LcService("frontend", nodes[0], 2.0),
        (LcService("cart", nodes[1], 10.0), LcService("catalog", nodes[2], 4.0)),
        rate_per_s=200.0,
        traced_per_s=5.0,
        target_ms=LC_TARGET_MS,
    )


def demo_colocation(cluster: SimulatedCluster, seed: int) -> DemoColocation:
    nodes = sorted(node.id for node in cluster.cluster.nodes)
    return DemoColocation(cluster, demo_application(nodes), host=HostModel(), seed=seed,
                          period_s=GUARD_PERIOD_S)  # fmt: skip


def demo_scheduler_file(scheduler: str) -> Path:
    return Path(str(resources.files("yarn_adapt") / "data" / "demo" / f"{scheduler}-scheduler.xml"))


def demo_settings(options: DemoOptions) -> Settings:
    return Settings(
        service=ServiceSection(
            mode=Mode.RECOMMEND, interval_s=options.interval_s, auto_approve=not options.review
        ),
        # Cooldown in wall time: two rounds, whatever the acceleration; an undo of a
        # change applied within six rounds needs the oscillation guard's larger gain.
        tuning=TuningSection(
            cooldown_s=2 * options.interval_s,
            oscillation_window_s=6 * options.interval_s,
            seed=options.seed,
        ),
        state=StateSection(dir=str(options.state_dir)),
        http=HttpSection(enabled=options.serve, port=options.port),
        colocation=ColocationSection(
            enabled=True,
            mode=GuardMode.AUTO,
            period_s=GUARD_PERIOD_S,
            qos_targets=(f"frontend={LC_TARGET_MS:g}",),
        )
        if options.colocation
        else ColocationSection(),
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
        config, options.trace, options.nodes, options.containers_per_node, options.seed,
        lc_nodes=LC_NODES if options.colocation else 0,
    )  # fmt: skip
    settings = demo_settings(options)
    apply_settings = ApplySettings(
        state_dir=options.state_dir, verify=PollSettings(timeout_s=5.0, interval_s=0.1)
    )
    colocation = demo_colocation(cluster, options.seed) if options.colocation else None
    backend = SimulatedBackend(cluster, path, apply_settings, options.step_s, colocation)
    if proposer is None:
        # the same model, carrying its error on the history's last jobs it had not seen
        model = fit_with_measured_error(history, seed=options.seed)
        proposer = simulated_proposer(tuner_settings(settings, options.step_s), model, history)
    builder = None if colocation is None else partial(demo_guard, settings, colocation)
    return Service.build(settings, backend, RecordingProposer(proposer), token=options.token,
                         guard_builder=builder)  # fmt: skip


def replay_cluster(
    config: SchedulerConfig,
    trace: Path | None,
    nodes: int | None,
    containers_per_node: int,
    seed: int,
    lc_nodes: int = 0,
) -> tuple[SimulatedCluster, Workload]:
    """A simulated cluster running ``config`` that replays the later half of ``trace``
    (default: the bundled FB-2009 day), its jobs spread over the config's leaves by
    priority; and the earlier half, the history the task-time model learns from.
    ``nodes=None`` sizes the cluster for the replayed half's whole span, plus
    ``lc_nodes`` for latency-critical services: they bring their nodes, and batch gets
    what the guard leaves on them (with the services on nodes batch was sized for, the
    guard's share backs batch up past the run's end, and few predictions can be
    checked)."""
    leaves = [leaf.name for leaf in config.leaves()]
    workload = load_trace(trace or bundled_trace(), seed=seed, queues=spread_over(leaves))
    history, replay = split_in_half(workload)
    if nodes is None:
        nodes = sized_nodes(replay, replay_span_s(replay), containers_per_node) + lc_nodes
    spec = ClusterSpec.uniform(nodes, CONTAINER * containers_per_node)
    return SimulatedCluster(replay, spec, config, SimulationOptions(seed=seed)), history


def replay_span_s(replay: Workload) -> float:
    """From the replay's first submission to its last (at least a second)."""
    submits = [job.submit_s for job in replay.jobs]
    return max(max(submits) - min(submits), 1.0) if submits else 1.0


def sized_nodes(
    replay: Workload,
    window_s: float,
    containers_per_node: int,
    target: float = TARGET_UTILISATION,
) -> int:
    """Nodes enough that the tasks of the jobs submitted in the replay's first
    ``window_s`` (or its whole span, if shorter) keep ``target`` of the containers
    busy on average over that time: the demand is the trace's, not a constant."""
    if not 0 < target <= 1 or window_s <= 0:
        raise InputError(f"demo sizing: target {target} and window {window_s} s must be positive")
    first = min(job.submit_s for job in replay.jobs)
    last = max(job.submit_s for job in replay.jobs)
    span = min(window_s, last - first) if last > first else window_s
    work = sum(job.total_task_seconds for job in replay.jobs if job.submit_s <= first + span)
    containers = math.ceil(work / (target * max(span, 1.0)))
    return max(1, math.ceil(containers / containers_per_node))


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
        f"{duration(proposal.cluster_before_s)} → {duration(proposal.cluster_after_s)} "
        f"({-proposal.improvement:+.1%})"
    ]
    for group in proposal.groups:
        likely = ""
        if group.after_low_s is not None and group.after_high_s is not None:
            likely = f", likely {duration(group.after_low_s)} – {duration(group.after_high_s)}"
        lines.append(
            f"    group {group.group}: {duration(group.before_s)} → {duration(group.after_s)}"
            f"{likely} ({group.jobs} jobs)"
        )
    for change in proposal.changes:
        words = change_words(change)
        lines.append(f"    {words['queue']} {words['property']}: {words['old']} → {words['new']}")
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
        **colocation_figures(service),
    }


def colocation_figures(service: Service) -> dict[str, Any]:
    """The co-location half's figures (none when it is off)."""
    beside = getattr(service.backend, "beside", None)
    return beside.figures() if isinstance(beside, DemoColocation) else {}


def _rounded(value: float) -> float | None:
    return round(value, 2) if math.isfinite(value) and value >= 0 else None


def _hms(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


# --------------------------------------------------------------------------- the run, judged


@dataclass(frozen=True)
class Prediction:
    """One suggestion's prediction and the jobs it is about: the jobs in progress in
    its re-tuned groups when the tuner looked (those whose mean latency, submission
    to finish, the comparator predicted)."""

    time_s: float
    predicted_s: float
    jobs: tuple[str, ...]


class RecordingProposer:
    """A proposer that remembers, for each round's suggestion, the population its
    prediction is about, so the demo can set it beside what those jobs realised."""

    def __init__(self, inner: Proposer) -> None:
        self.inner = inner
        self.last: Prediction | None = None
        self.by_proposal: dict[int, Prediction] = {}

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        suggestion = self.inner.propose(observed, frozen)
        self.last = None
        view = observed.view
        if suggestion is not None and isinstance(view, SimulatedView):
            population = population_by_group(
                ((p.job.id, p.job.queue) for p in view.start.jobs), observed.config
            )
            groups = {g.group for g in suggestion.groups}
            jobs = tuple(
                p.job.id
                for p in view.start.jobs
                if group_of_queue(p.job.queue, observed.config) in groups
            )
            self.last = Prediction(view.time_s, suggestion.cluster_after_s, jobs)
            # a proposer that did not say which jobs it predicted for: those in
            # progress in its groups (what the service checks the prediction on)
            groups_with = tuple(
                g if g.population else replace(g, population=population.get(g.group, ()))
                for g in suggestion.groups
            )
            suggestion = replace(suggestion, groups=groups_with)
        return suggestion

    def note_round(self, report: RoundReport) -> None:
        """Tie the round's proposal (if any) to the population of its suggestion."""
        for decision in report.decisions:
            if decision.proposal_id is not None and self.last is not None:
                self.by_proposal[decision.proposal_id] = self.last
        self.last = None


def note_round(service: Service, report: RoundReport) -> None:
    proposer = service.loop.proposer
    if isinstance(proposer, RecordingProposer):
        proposer.note_round(report)


def realised_latency(cluster: SimulatedCluster, ids: Sequence[str]) -> tuple[float | None, int]:
    """Mean latency (submission to finish) of the jobs ``ids``, a job not finished
    yet counted as finishing now (so a backlog shows), and how many had not."""
    now = cluster.clock_s
    latencies = []
    open_jobs = 0
    for job_id in ids:
        ended = cluster.ended.get(job_id)
        if ended is not None and ended.finish_s is not None:
            latencies.append(ended.finish_s - ended.submit_s)
        else:
            open_jobs += 1
            latencies.append(now - cluster.specs[job_id].submit_s)
    return (statistics.fmean(latencies) if latencies else None), open_jobs


def submitted_by(cluster: SimulatedCluster, time_s: float) -> list[str]:
    return [job.id for job in cluster.specs.values() if job.submit_s < time_s]


class StopJudging(Exception):
    """Raised by a replay's ``on_segment`` to end the judging early."""


def static_replay(
    options: DemoOptions,
    cluster: SimulatedCluster,
    on_segment: Callable[[int, int], None] | None = None,
) -> SimulatedCluster:
    """The same jobs on the same cluster with the same simulator options under the
    starting configuration (the demo's scheduler file, untouched), simulated in the
    same segments as far as ``cluster`` got (the co-location half cuts each round's
    into guard periods) and with the same node totals at the same times;
    ``on_segment(done, total)`` after each round's worth."""
    config = read_scheduler_document(demo_scheduler_file(options.scheduler)).config
    replay = Workload(tuple(cluster.specs.values()), "the demo's replay, untuned")
    # the node totals the guard set, at the same times: the twin differs in its
    # scheduler configuration alone
    twin = SimulatedCluster(replay, cluster.cluster, config, cluster.options,
                            capacity_plan=cluster.capacity_log)  # fmt: skip
    total = max(1, math.ceil(cluster.elapsed_s / options.step_s - 1e-9))
    done = 0
    for end_s in cluster.segment_ends:
        twin.advance(end_s - twin.elapsed_s)
        if end_s >= min((done + 1) * options.step_s, cluster.elapsed_s) - 1e-6:
            done += 1
            if on_segment is not None:
                on_segment(done, total)
    return twin


def utilisation(cluster: SimulatedCluster) -> float | None:
    """Container-seconds used (tasks and ApplicationMasters) over the cluster's
    container-seconds so far: how busy the replay kept it."""
    containers = sum(n.resources.memory_mb // CONTAINER.memory_mb for n in cluster.cluster.nodes)
    if cluster.elapsed_s <= 0 or containers <= 0:
        return None
    return cluster.busy_container_s() / (containers * cluster.elapsed_s)


def run_summary(
    service: Service,
    options: DemoOptions,
    rounds: int,
    on_segment: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """:func:`summary` plus the whole run judged: the realised mean latency of the
    jobs submitted so far with tuning and under the starting configuration (the
    same trace, cluster and segments; ``on_segment`` follows that replay), each
    proposal's relative error (|predicted - realised| / realised, on the jobs it
    predicted for, for the configuration that ran them), the median of those, how
    often the likely ranges the proposer stated held, the count of each decision
    kind, the cluster's utilisation and the jobs still open at the end. Stored for
    the page (:meth:`Store.record_run_summary`)."""
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    assert isinstance(cluster, SimulatedCluster)
    found = judged_so_far(service, rounds)
    population = submitted_by(cluster, cluster.clock_s)
    tuned, tuned_open = realised_latency(cluster, population)
    twin = static_replay(options, cluster, on_segment)
    static, static_open = realised_latency(twin, population)
    found.update(
        realised_jobs=len(population),
        realised_latency_tuned_s=_rounded(tuned or math.nan),
        realised_latency_static_s=_rounded(static or math.nan),
        open_jobs_tuned=tuned_open,
        open_jobs_static=static_open,
        complete=True,
    )
    service.store.record_run_summary(found)
    return found


def judged_so_far(service: Service, rounds: int) -> dict[str, Any]:
    """What can be judged without replaying the run again: the predictions checked
    on their jobs (every one finished so far), the ranges' coverage, the decisions,
    how busy the cluster was. The page shows it after each round."""
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    assert isinstance(cluster, SimulatedCluster)
    found = summary(service, rounds, cluster.elapsed_s)
    checked = checked_proposals(service, cluster)
    errors = [c.error for c in checked]
    (held, stated), (held_calibrated, calibrated) = range_hits(service, cluster)
    found.update(
        nodes=len(cluster.cluster.nodes),
        utilisation_ratio=_rounded(utilisation(cluster) or math.nan),
        prediction_error_ratios=[round(e, 3) for e in errors],
        prediction_error_median_ratio=round(statistics.median(errors), 3) if errors else None,
        proposal_errors=[
            {
                "proposal": c.proposal_id,
                "predicted_s": _rounded(c.predicted_s),
                "realised_s": _rounded(c.realised_s),
                "jobs": c.jobs,
                "error_ratio": round(c.error, 3),
            }
            for c in checked
        ],
        ranges_held=held,
        ranges_checked=stated,
        interval_coverage=round(held / stated, 3) if stated else None,
        ranges_calibrated=calibrated,
        interval_coverage_calibrated=(
            round(held_calibrated / calibrated, 3) if calibrated else None
        ),
        decisions=decision_counts(service),
        complete=False,
    )
    ledger = ledger_of(service)  # range_hits above checked it up to now
    found.update(log_ratio_spread([ledger.log_ratios()] if ledger is not None else []))
    return found


def note_progress(service: Service, rounds: int) -> None:
    """Store what can be judged so far, for the page (after each round)."""
    service.store.record_run_summary(judged_so_far(service, rounds))


def decision_counts(service: Service) -> dict[str, int]:
    """How many rounds decided each kind (the configurator's decisions)."""
    counts: dict[str, int] = {}
    for _, decision in service.store.decisions(limit=100_000):
        if decision.kind is not DecisionKind.GUARD:
            counts[str(decision.kind)] = counts.get(str(decision.kind), 0) + 1
    return dict(sorted(counts.items()))


def prediction_errors(service: Service, cluster: SimulatedCluster) -> list[float]:
    """|predicted - realised| / realised for each proposal whose jobs all finished,
    in proposal order (:func:`checked_proposals`)."""
    return [found.error for found in checked_proposals(service, cluster)]


def checked_proposals(service: Service, cluster: SimulatedCluster) -> list[ProposalError]:
    """Every proposal's predictions checked on their own populations, as the
    service checks them each round (:mod:`yarn_adapt.service.proposers.checking`), with a
    last check on every job the replay finished so far; per proposal, its groups
    together."""
    store = service.store
    finished = finished_jobs(cluster)
    for proposal in store.unchecked_proposals(limit=10_000):
        for checked in check_proposal(proposal, finished, store.was_applied(proposal.id)):
            store.record_prediction_error(checked)
    return proposal_errors(store.prediction_errors())


def finished_jobs(cluster: SimulatedCluster) -> dict[str, FinishedJob]:
    return {job_id: _finished(job) for job_id, job in cluster.ended.items()}


def _finished(job: JobResult) -> FinishedJob:
    assert job.finish_s is not None
    return FinishedJob(job.id, job.queue, int(job.submit_s * 1000), int(job.finish_s * 1000))


def ledger_of(service: Service) -> PredictionLedger | None:
    """The proposer's ledger of every round's predictions (None for a proposer
    that keeps none)."""
    proposer = service.loop.proposer
    inner = proposer.inner if isinstance(proposer, RecordingProposer) else proposer
    ledger = getattr(inner, "ledger", None)
    return ledger if isinstance(ledger, PredictionLedger) else None


def range_hits(
    service: Service, cluster: SimulatedCluster
) -> tuple[tuple[int, int], tuple[int, int]]:
    """How many checked predictions realised inside the likely range stated when
    they were made, of how many -- all of them, and those whose range came from
    checks rather than the prior: every round's, from the proposer's ledger after a
    last check on every job the replay finished so far (a proposer without a ledger:
    the proposals' own checks, none calibrated)."""
    ledger = ledger_of(service)
    if ledger is None:
        judged = [c.inside for c in service.store.prediction_errors() if c.inside is not None]
        return (sum(1 for inside in judged if inside), len(judged)), (0, 0)
    ledger.observe(finished_jobs(cluster).values(), cluster.config, cluster.clock_s)
    return ledger.coverage(), ledger.coverage(calibrated_only=True)
