"""``yarn-adapt propose``: one tuning round, printed, never applied.

Against a ResourceManager it reads the RM's snapshot and JobHistory (task times are
learned from the jobs there), the running scheduler configuration (the file the RM
reads, or its scheduler-conf API with ``--mutation``), and proposes. With ``--sim``
a simulated cluster replays a trace for ``--at`` seconds first (task times learned
on the trace's earlier half, as the demo does). Either way it prints the predicted
latency per group, the per-queue diff and the reason for each change; ``--out``
writes the proposed scheduler XML (validated, written atomically), ready for
``yarn-adapt apply``.

As the service does, a group whose prediction rests on fewer than ``--min-jobs``
jobs (the service's ``[tuning] min_jobs``, 3) keeps its configuration, and each
prediction carries a likely range (80 %): with no prediction of this cluster checked
yet, the wide prior of :mod:`yarn_adapt.service.proposers.intervals`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from yarn_adapt.cli.common import quiet_option
from yarn_adapt.cli.connect import endpoints_from_options, yarn_options
from yarn_adapt.errors import InputError, SettingsError
from yarn_adapt.progress import Progress

if TYPE_CHECKING:  # the tuner pulls in the comparator and scikit-learn: loaded on use
    from yarn_adapt.tuning.executors import ExecutorHandle
    from yarn_adapt.tuning.proposal import Proposal
    from yarn_adapt.tuning.settings import TunerSettings
    from yarn_adapt.tuning.tuner import GroupTuned
    from yarn_adapt.workload.taskmodel import TaskTimeModel
    from yarn_adapt.yarn.confxml import SchedulerDocument
    from yarn_adapt.yarn.rm import ResourceManagerClient


@dataclass(frozen=True)
class Proposed:
    """A proposal with what it was made from: the running configuration as a
    document (so the written XML is a patch of it) and the task-time model."""

    proposal: Proposal
    document: SchedulerDocument
    model: TaskTimeModel


@click.command("propose")
@yarn_options
@click.option("--sim", is_flag=True, help="Propose for a simulated cluster instead of an RM.")
@click.option(
    "--scheduler-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="XML",
    help="The scheduler file the RM reads (with --sim: the one the simulated cluster runs)."
    "  [default: from $HADOOP_CONF_DIR/yarn-site.xml; --sim: the demo's]",
)
@click.option(
    "--mutation", is_flag=True, help="Read the running configuration from scheduler-conf."
)
@click.option("--trace", type=click.Path(exists=True, path_type=Path), help="--sim: a trace.")
@click.option(
    "--at",
    type=float,
    default=900.0,
    show_default=True,
    metavar="SECONDS",
    help="--sim: simulated seconds replayed first.",
)
@click.option("--nodes", type=int, default=8, show_default=True, help="--sim: nodes.")
@click.option(
    "--containers-per-node", type=int, default=8, show_default=True, help="--sim: 2 GB / 1 vcore."
)
@click.option(
    "--interval",
    type=float,
    metavar="SECONDS",
    help="The tuning interval: groups with submissions in the last SECONDS are re-tuned."
    "  [default: 120; --sim: --at]",
)
@click.option(
    "--min-improvement",
    type=float,
    default=0.05,
    show_default=True,
    metavar="FRACTION",
    help="The predicted gain a group needs before it changes (0.05 = 5 %, as [tuning]).",
)
@click.option(
    "--min-jobs",
    type=int,
    default=3,
    show_default=True,
    help="A group whose prediction rests on fewer jobs keeps its configuration (as [tuning]).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the proposed scheduler XML here.",
)
@click.option(
    "--executor",
    default="process",
    show_default=True,
    help="Where the groups' searches run: serial, process[:N] or dask://HOST:PORT.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.option("--seed", type=int, default=0, show_default=True)
@quiet_option
@click.pass_context
def propose_command(
    ctx: click.Context, /, sim: bool, scheduler_file: Path | None, mutation: bool,
    trace: Path | None, at: float, nodes: int, containers_per_node: int,
    interval: float | None, min_improvement: float, min_jobs: int, out: Path | None,
    executor: str, as_json: bool, seed: int, **connection: object,
) -> None:  # fmt: skip
    """Propose a scheduler configuration for the jobs the cluster runs now: the
    predicted latency per group, the diff and the reasons. Nothing is applied."""
    if interval is not None and interval <= 0:
        raise InputError(f"--interval must be positive, got {interval:g}")
    if min_jobs < 0:
        raise InputError(f"--min-jobs must be 0 or more, got {min_jobs}")
    from yarn_adapt.tuning.executors import open_executor, parse_executor_spec

    spec = parse_executor_spec(executor)
    if sim and ctx.get_parameter_source("rm_urls") is ParameterSource.COMMANDLINE:
        raise InputError("--sim proposes for a simulated cluster: drop --rm (or drop --sim)")
    progress = Progress("propose", 1)  # one line at the end: how long it took
    groups = GroupProgress()  # N/M as the tuner finishes each triggered group
    if sim:
        _check_sim_options(at, nodes, containers_per_node)
        tuner = _tuner_settings(interval or at, min_improvement, seed)
        with open_executor(spec) as handle:
            proposed = _propose_simulated(
                scheduler_file, trace, at, nodes, containers_per_node, tuner, handle, groups
            )
    else:
        tuner = _tuner_settings(interval or 120.0, min_improvement, seed)
        with open_executor(spec) as handle:
            proposed = _propose_on_rm(connection, scheduler_file, mutation, tuner, handle, groups)
    progress.advance(1, "proposed")
    _report(with_evidence_gate(proposed, min_jobs), out, as_json)


def _check_sim_options(at: float, nodes: int, containers_per_node: int) -> None:
    if at <= 0 or min(nodes, containers_per_node) <= 0:
        raise InputError("--at, --nodes and --containers-per-node must be positive")


def _tuner_settings(interval_s: float, min_improvement: float, seed: int) -> TunerSettings:
    if not 0 <= min_improvement < 1:
        raise InputError(f"--min-improvement must be in [0, 1), got {min_improvement:g}")
    from yarn_adapt.tuning.settings import TunerSettings

    return TunerSettings(interval_s=interval_s, min_improvement=min_improvement, seed=seed)


class GroupProgress:
    """``propose: groups tuned 3/12 · ... · root.etl`` while the tuner works."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.started = time.monotonic()

    def __call__(self, done: int, total: int, group: str) -> None:
        if self.progress is None or self.progress.total != total:
            self.progress = Progress("propose: groups tuned", total)
            self.progress.started = self.started  # elapsed and ETA count the whole search
        self.progress.advance(done, group)


# --------------------------------------------------------------------------- RM


def _propose_on_rm(
    connection: dict[str, object],
    scheduler_file: Path | None,
    mutation: bool,
    tuner: TunerSettings,
    handle: ExecutorHandle,
    on_group_tuned: GroupTuned | None = None,
) -> Proposed:
    from yarn_adapt.tuning.state import state_from_snapshot
    from yarn_adapt.tuning.tuner import propose
    from yarn_adapt.workload.history_model import HistoryModel
    from yarn_adapt.yarn.observe import observe_cluster

    if mutation and scheduler_file is not None:
        raise InputError("--mutation and --scheduler-file exclude each other")
    endpoints = endpoints_from_options(**connection)  # type: ignore[arg-type]
    with endpoints.rm_client() as rm:
        history = endpoints.history_client()
        try:
            snapshot = observe_cluster(rm, history).snapshot
            document = _running_document(rm, scheduler_file, mutation)
        finally:
            if history is not None:
                history.close()
    learned = HistoryModel(seed=tuner.seed)
    jobs = learned.update(snapshot)
    assert learned.model is not None
    proposal = propose(
        state_from_snapshot(snapshot, jobs), document.config, learned.model, tuner,
        executor=handle, on_group_tuned=on_group_tuned,
    )  # fmt: skip
    return Proposed(proposal, document, learned.model)


def _running_document(
    rm: ResourceManagerClient, scheduler_file: Path | None, mutation: bool
) -> SchedulerDocument:
    from yarn_adapt.yarn.apply import running_document
    from yarn_adapt.yarn.confxml import read_scheduler_document
    from yarn_adapt.yarn.site import hadoop_conf_dir, scheduler_file_in

    if mutation:
        return running_document(rm)
    if scheduler_file is None:
        conf_dir = hadoop_conf_dir()
        if conf_dir is None:
            raise SettingsError(
                "no scheduler file: pass --scheduler-file, --mutation, or set HADOOP_CONF_DIR"
            )
        scheduler_file = scheduler_file_in(conf_dir)
    return read_scheduler_document(scheduler_file)


# --------------------------------------------------------------------------- simulation


def _propose_simulated(
    config_path: Path | None,
    trace: Path | None,
    at_s: float,
    nodes: int,
    containers_per_node: int,
    tuner: TunerSettings,
    handle: ExecutorHandle,
    on_group_tuned: GroupTuned | None = None,
) -> Proposed:
    from yarn_adapt.service.demo.replay import demo_scheduler_file, replay_cluster
    from yarn_adapt.tuning.state import state_from_simulation
    from yarn_adapt.tuning.tuner import propose
    from yarn_adapt.workload import fit_task_time_model
    from yarn_adapt.yarn.confxml import read_scheduler_document

    document = read_scheduler_document(config_path or demo_scheduler_file("capacity"))
    cluster, history = replay_cluster(
        document.config, trace, nodes, containers_per_node, tuner.seed
    )
    model = fit_task_time_model(history, seed=tuner.seed)
    cluster.advance(at_s)
    view = cluster.view()
    state = state_from_simulation(view.time_s, view.start, view.cluster, view.recent)
    proposal = propose(
        state, document.config, model, tuner, executor=handle, on_group_tuned=on_group_tuned
    )
    return Proposed(proposal, document, model)


# --------------------------------------------------------------------------- evidence


def with_evidence_gate(proposed: Proposed, min_jobs: int) -> Proposed:
    """The proposal with every group whose prediction rests on fewer than
    ``min_jobs`` jobs kept as it runs (the service's minimum-evidence gate)."""
    from dataclasses import replace

    from yarn_adapt.tuning.proposal import finish_proposal

    proposal = proposed.proposal
    thin = {d.group for d in proposal.groups if d.changed and d.jobs < min_jobs}
    if not thin:
        return proposed
    kept = [
        replace(
            d,
            setting=None,
            after_s=d.before_s,
            reason=f"{d.reason}; the prediction rests on {d.jobs} job(s), fewer than the "
            f"{min_jobs} a move needs: kept",
        )
        if d.group in thin
        else d
        for d in proposal.groups
    ]
    config = proposal.config
    for group in thin:
        now, new = proposal.current.find(group), config.find(group)
        assert now is not None and new is not None, group
        config = config.with_queue(replace(new, children=now.children))  # type: ignore[arg-type]
    gated = finish_proposal(proposal.current, config, kept)
    return replace(proposed, proposal=gated)


def likely_range(proposed: Proposed, value: float) -> tuple[float, float] | None:
    """The 80 % range the service would state for a prediction of this cluster with
    nothing of it checked yet: the wide prior (:mod:`yarn_adapt.service.proposers.intervals`)."""
    from yarn_adapt.service.proposers.intervals import Calibration

    error = proposed.model.error
    return Calibration(prior_sigma=error.sigma if error is not None else 0.0).range_of(value)


# --------------------------------------------------------------------------- output


def _report(proposed: Proposed, out: Path | None, as_json: bool) -> None:
    from yarn_adapt.tuning.cli_support import proposal_xml, render_proposal
    from yarn_adapt.yarn.schedconf.xmlio import write_atomically

    xml = proposal_xml(proposed.proposal, proposed.document)
    if out is not None:
        write_atomically(out, xml)
    if as_json:
        click.echo(json.dumps(proposal_json(proposed, out)))
        return
    click.echo(render_proposal(proposed.proposal))
    ranges = _range_lines(proposed)
    if ranges:
        click.echo("\nLikely range of each prediction (80 %, a wide prior: nothing checked yet):")
        click.echo("\n".join(ranges))
    click.echo(f"\nTask times: {proposed.model.reason}")
    if out is not None:
        click.echo(f"Wrote {out}; apply it with: yarn-adapt apply {out}")


def _range_lines(proposed: Proposed) -> list[str]:
    from yarn_adapt.durations import duration

    lines = []
    for d in proposed.proposal.groups:
        bounds = likely_range(proposed, d.after_s) if d.triggered else None
        if bounds is not None:
            lines.append(
                f"  {d.group}: {duration(d.after_s)} predicted, likely "
                f"{duration(bounds[0])} – {duration(bounds[1])}"
            )
    return lines


def proposal_json(proposed: Proposed, out: Path | None) -> dict[str, object]:
    proposal = proposed.proposal
    return {
        "groups": [
            {
                "group": d.group,
                "jobs": d.jobs,
                "triggered": d.triggered,
                "reason": d.reason,
                "predicted_latency_before_s": _number(d.before_s),
                "predicted_latency_after_s": _number(d.after_s),
                **_range_json(proposed, d.after_s if d.triggered else math.nan),
            }
            for d in proposal.groups
        ],
        "predicted_latency_before_s": _number(proposal.cluster_before_s),
        "predicted_latency_after_s": _number(proposal.cluster_after_s),
        "changes": [
            {"queue": c.queue, "property": c.prop, "old": c.old, "new": c.new, "reason": r}
            for c, r in zip(proposal.changes, proposal.reasons, strict=True)
        ],
        "task_times": proposed.model.reason,
        "out": str(out) if out is not None else None,
    }


def _range_json(proposed: Proposed, value: float) -> dict[str, float | None]:
    bounds = likely_range(proposed, value)
    return {
        "predicted_latency_after_low_s": round(bounds[0], 3) if bounds else None,
        "predicted_latency_after_high_s": round(bounds[1], 3) if bounds else None,
    }


def _number(value: float) -> float | str | None:
    """JSON has no NaN or infinity: unknown is null, starving is "starves"."""
    if math.isnan(value):
        return None
    return round(value, 3) if math.isfinite(value) else "starves"
