"""``yarn-adapt apply FILE``: make the RM run a scheduler configuration, safely."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from yarn_adapt.cli.config import change_json
from yarn_adapt.cli.connect import YarnEndpoints, endpoints_from_options, yarn_options
from yarn_adapt.errors import ApplyInProgress, RollbackFailed, SettingsError
from yarn_adapt.model import CapacitySchedulerConfig, SchedulerConfig
from yarn_adapt.yarn.apply import (
    DEFAULT_REFRESH_COMMAND,
    Applier,
    ApplyHistory,
    ApplyPlan,
    ApplySettings,
    ApplyStep,
    DryRun,
    FileApplier,
    MutationApplier,
    PollSettings,
    RefreshCommand,
    WaitForReload,
    activation_named,
    histories,
    interrupted,
    running_document,
)
from yarn_adapt.yarn.confxml import (
    load_scheduler_config,
    raise_if_invalid,
    read_scheduler_document,
)
from yarn_adapt.yarn.rm import ResourceManagerClient
from yarn_adapt.yarn.site import hadoop_conf_dir, read_properties

if TYPE_CHECKING:
    from yarn_adapt.colocation.actuate import ActOutcome
    from yarn_adapt.colocation.queuecap import QueueCap


def default_state_dir() -> Path:
    configured = os.environ.get("YARN_ADAPT_STATE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "yarn-adapt"


@click.command("apply")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@yarn_options
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option(
    "--via",
    type=click.Choice(["file", "mutation"]),
    default="file",
    show_default=True,
    help="Capacity Scheduler: rewrite the file + refresh, or the scheduler-conf API.",
)
@click.option(
    "--target",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="XML",
    help="The scheduler file the RM reads. Default: from $HADOOP_CONF_DIR.",
)
@click.option("--refresh-command", default=shlex.join(DEFAULT_REFRESH_COMMAND), show_default=True)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=default_state_dir,
    help="Lock, backups and journal.  [default: ~/.local/state/yarn-adapt]",
)
@click.option(
    "--verify-timeout",
    type=float,
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for the RM to report the new values.",
)
@click.option(
    "--shared-file",
    is_flag=True,
    help="With several RMs (HA): every RM reads this same file (required for --via file).",
)
@click.option("--json", "as_json", is_flag=True, help="The plan (or outcome) as one JSON object.")
def apply_command(
    file: Path,
    dry_run: bool,
    via: str,
    target: Path | None,
    refresh_command: str,
    state_dir: Path,
    verify_timeout: float,
    shared_file: bool,
    as_json: bool,
    **connection: object,
) -> None:
    """Apply FILE (capacity-scheduler.xml or fair-scheduler.xml) to the running RM:
    validate, back up, write atomically, refresh, confirm, roll back on failure."""
    desired = load_scheduler_config(file)
    raise_if_invalid(desired, source=str(file))
    endpoints = endpoints_from_options(**connection)  # type: ignore[arg-type]
    if _writes_a_file(desired, via) and len(endpoints.rm) > 1 and not shared_file:
        raise SettingsError(
            f"--via file with {len(endpoints.rm)} ResourceManagers ({', '.join(endpoints.rm)}): "
            "each RM reads its own scheduler file, so a failover would silently revert the "
            "change; pass --shared-file if every RM reads this same file, or use --via mutation"
        )
    settings = ApplySettings(state_dir=state_dir, verify=PollSettings(timeout_s=verify_timeout))
    applier = _applier(desired, via, target, refresh_command, settings, endpoints)
    if dry_run:
        plan = DryRun(applier).apply(desired).plan
        click.echo(json.dumps(plan_json(plan, dry_run=True)) if as_json else plan.render())
        return
    _refuse_over_an_interrupted_apply(settings)
    outcome = applier.apply(desired)
    if as_json:
        body = plan_json(outcome.plan, dry_run=False)
        body.update(result=str(outcome.result), apply_id=outcome.apply_id)
        body["backup"] = str(outcome.backup) if outcome.backup else None
        click.echo(json.dumps(body))
        return
    click.echo(outcome.summary())


def _refuse_over_an_interrupted_apply(settings: ApplySettings) -> None:
    """An apply a crash interrupted must be settled before another one starts: it
    may still have to roll back, over whatever a new apply would write."""
    pending = interrupted(settings.default_journal())
    if pending:
        first = pending[0]
        raise ApplyInProgress(
            f"{first.target}: apply {first.apply_id} was interrupted after {first.last.step}; "
            f"run yarn-adapt recover --state-dir {settings.state_dir} first; nothing was changed"
        )


def plan_json(plan: ApplyPlan, *, dry_run: bool) -> dict[str, object]:
    return {
        "dry_run": dry_run,
        "applier": plan.applier,
        "target": plan.target,
        "changes": [change_json(c) for c in plan.changes],
        "steps": list(plan.steps),
    }


@click.command("recover")
@yarn_options
@click.option("--target", type=click.Path(dir_okay=False, path_type=Path), metavar="XML")
@click.option("--refresh-command", default=shlex.join(DEFAULT_REFRESH_COMMAND), show_default=True)
@click.option(
    "--state-dir", type=click.Path(file_okay=False, path_type=Path), default=default_state_dir
)
@click.option(
    "--verify-timeout",
    type=float,
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for the RM to report the configuration that should run.",
)
@click.option(
    "--dry-run", is_flag=True, help="List what is left to recover; change nothing, reach no RM."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def recover_command(
    target: Path | None,
    refresh_command: str,
    state_dir: Path,
    verify_timeout: float,
    dry_run: bool,
    as_json: bool,
    **connection: object,
) -> None:
    """Finish or roll back applies a crash interrupted, from the journal in
    --state-dir: each is compared with the file (or the RM's scheduler-conf) and
    what the RM reports, then activated and verified, or restored, activated and
    confirmed. Prints what runs now for each; exit 5 if one needs the operator. Then
    every node the co-location guard changed gets its original total back. With nothing
    journalled it says so and exits 0 without asking for (or reaching) an RM: the
    service's unit runs it on every stop. --dry-run lists what is left, changing nothing."""
    settings = ApplySettings(state_dir=state_dir, verify=PollSettings(timeout_s=verify_timeout))
    journal = settings.default_journal()
    left = Leftovers.in_state_dir(state_dir, interrupted(journal))
    report = Recovery(dry_run=dry_run, left=left)
    if dry_run or left.is_empty:
        _print_recovery(report, as_json)
        return
    endpoints = endpoints_from_options(**connection)  # type: ignore[arg-type]
    try:
        report.guard = restore_guarded_nodes(endpoints, state_dir, refresh_command)
        report.mirror_left = _mirrored_file(state_dir) is not None
        with endpoints.rm_client() as rm:
            for history in left.applies:
                step = _recover(history, rm, settings, refresh_command)
                detail = next(
                    h for h in histories(journal.entries()) if h.apply_id == history.apply_id
                )
                report.applies.append((history, step, detail.last.detail))
    finally:
        _print_recovery(report, as_json)
    if report.problems:
        raise RollbackFailed(f"the operator must act: {'; '.join(report.problems)}")


@dataclass(frozen=True)
class Leftovers:
    """What a crash or a stop left to put right: applies the journal holds open, the
    nodes whose totals the co-location guard changed, a batch queue it capped, the
    ``dynamic-resources.xml`` it mirrored its totals into."""

    applies: tuple[ApplyHistory, ...]
    nodes: tuple[str, ...]
    queue_cap: tuple[str, str] | None
    mirror: Path | None = None

    @classmethod
    def in_state_dir(cls, state_dir: Path, pending: list[ApplyHistory]) -> Leftovers:
        from yarn_adapt.colocation.originals import OriginalTotals
        from yarn_adapt.colocation.queuecap import journalled_queue_cap

        nodes = tuple(sorted(OriginalTotals(state_dir / "guard").load()))
        mirror = _mirrored_file(state_dir)
        return cls(tuple(pending), nodes, journalled_queue_cap(state_dir), mirror)

    @property
    def is_empty(self) -> bool:
        return (
            not self.applies and not self.nodes and self.queue_cap is None and self.mirror is None
        )


def _mirrored_file(state_dir: Path) -> Path | None:
    """The ``dynamic-resources.xml`` the guard's journal says it wrote, if any."""
    from yarn_adapt.colocation.mirror import journalled_mirror

    mirror = journalled_mirror(state_dir / "guard")
    return None if mirror is None else mirror.path


@dataclass
class Recovery:
    """What recover found and did (or, with --dry-run, would do)."""

    dry_run: bool
    left: Leftovers
    guard: list[ActOutcome] = field(default_factory=list)
    applies: list[tuple[ApplyHistory, ApplyStep, str]] = field(default_factory=list)
    mirror_left: bool = True
    """The mirrored file still lists the guard's totals (so until a restore says otherwise)."""

    @property
    def problems(self) -> list[str]:
        found = [f"{o.node_id}: {o.status}" for o in self.guard if not _restored(o)]
        found += [
            f"{h.apply_id}: {detail}"
            for h, step, detail in self.applies
            if step is ApplyStep.UNRESOLVED
        ]
        return found

    def as_json(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "interrupted_applies": [_history_json(h) for h in self.left.applies],
            "guard_nodes": list(self.left.nodes),
            "guard_queue_cap": None if self.left.queue_cap is None else self.left.queue_cap[0],
            "guard_mirror": None if self.left.mirror is None else str(self.left.mirror),
            "recovered": [
                {"apply_id": h.apply_id, "target": h.target, "result": str(step), "detail": detail}
                for h, step, detail in self.applies
            ],
            "guard_restored": [
                {"what": o.node_id, "result": str(o.result), "status": o.status} for o in self.guard
            ],
            "operator_must_act": self.problems,
        }

    def lines(self) -> list[str]:
        if self.left.is_empty:
            return [
                "nothing to recover: no interrupted applies, no node or queue the guard changed"
            ]
        if self.dry_run:
            return self._plan_lines()
        lines = [_guard_line(o) for o in self.guard]
        lines += self._mirror_lines()
        lines += [
            f"{h.apply_id}: {h.target}: {step} ({detail})" for h, step, detail in self.applies
        ]
        if not self.left.applies:
            lines.append("no interrupted applies")
        return lines

    def _plan_lines(self) -> list[str]:
        lines = [
            f"apply {h.apply_id}: {h.target} ({h.applier}) stopped after {h.last.step}: "
            "recover compares the file and the RM, then finishes or rolls it back"
            for h in self.left.applies
        ]
        lines += [
            f"node {n}: the guard changed its total; recover gives it back" for n in self.left.nodes
        ]
        if self.left.queue_cap is not None:
            lines.append(
                f"queue {self.left.queue_cap[0]}: the guard capped it; recover lifts the cap"
            )
        if self.left.mirror is not None:
            lines.append(
                f"file {self.left.mirror}: the guard mirrored its totals into it; recover "
                "puts the operator's file back once no node is held"
            )
        lines.append("dry run: nothing was changed")
        return lines

    def _mirror_lines(self) -> list[str]:
        """Whether the mirrored ``dynamic-resources.xml`` is the operator's again (it
        stays the guard's while a node is still held; a failed write is logged)."""
        path = self.left.mirror
        if path is None:
            return []
        if self.mirror_left:
            return [f"file {path}: still lists the guard's totals (a node is still held)"]
        return [f"file {path}: the operator's file is back"]


def _print_recovery(report: Recovery, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.as_json()))
        return
    for line in report.lines():
        click.echo(line)


def _history_json(history: ApplyHistory) -> dict[str, object]:
    return {
        "apply_id": history.apply_id,
        "target": history.target,
        "applier": history.applier,
        "last_step": str(history.last.step),
    }


def _restored(outcome: ActOutcome) -> bool:
    from yarn_adapt.colocation.actuate import Result

    return outcome.result not in (Result.FAILED, Result.REFUSED)


def _guard_line(outcome: ActOutcome) -> str:
    is_queue = outcome.node_id.startswith("queue ")
    what = outcome.node_id if is_queue else f"node {outcome.node_id}"
    return f"{what}: {outcome.result}: {outcome.status}"


def _recover(
    history: ApplyHistory, rm: ResourceManagerClient, settings: ApplySettings, refresh: str
) -> ApplyStep:
    if history.applier.startswith("file+"):
        activation = activation_named(history.applier, shlex.split(refresh))
        return FileApplier(Path(history.target), rm, activation, settings).recover(history)
    return MutationApplier(rm, settings).recover(history)


def _writes_a_file(desired: SchedulerConfig, via: str) -> bool:
    return via == "file" or not isinstance(desired, CapacitySchedulerConfig)


def restore_guarded_nodes(
    endpoints: YarnEndpoints, state_dir: Path, refresh: str
) -> list[ActOutcome]:
    """What the co-location guard left changed -- node totals, or a batch queue's cap --
    back as it was; the outcome for each (a failed one: the operator must act)."""
    from yarn_adapt.colocation.actuate import restore_journalled
    from yarn_adapt.colocation.queuecap import journalled_queue_cap

    with endpoints.rm_client() as rm:
        outcomes = restore_journalled(rm, state_dir)
        capped = journalled_queue_cap(state_dir)
        if capped is not None:
            queue, via = capped
            cap = _queue_cap(rm, queue, via, state_dir, refresh)
            outcomes += cap.restore_all()
    return outcomes


def _queue_cap(
    rm: ResourceManagerClient, queue: str, via: str, state_dir: Path, refresh: str
) -> QueueCap:
    from yarn_adapt.colocation.queuecap import QueueCap

    settings = ApplySettings(state_dir=state_dir)
    if via == "mutation":
        mutation: Applier[SchedulerConfig] = MutationApplier(rm, settings)  # type: ignore[assignment]
        return QueueCap(lambda: running_document(rm), lambda: mutation, queue, state_dir, via=via)
    path = Path(via)
    return QueueCap(
        lambda: read_scheduler_document(path),
        lambda: FileApplier(path, rm, _activation_for(path, refresh), settings),
        queue, state_dir, via=via,
    )  # fmt: skip


def _applier(
    desired: SchedulerConfig,
    via: str,
    target: Path | None,
    refresh_command: str,
    settings: ApplySettings,
    endpoints: YarnEndpoints,
) -> Applier[SchedulerConfig]:
    rm = endpoints.rm_client()
    if isinstance(desired, CapacitySchedulerConfig) and via == "mutation":
        return MutationApplier(rm, settings)  # type: ignore[return-value]
    path = target or _default_target(desired)
    return FileApplier(path, rm, _activation_for_config(desired, refresh_command), settings)


def _activation_for_config(
    desired: SchedulerConfig, refresh_command: str
) -> RefreshCommand | WaitForReload:
    if isinstance(desired, CapacitySchedulerConfig):
        return RefreshCommand(tuple(shlex.split(refresh_command)))
    return WaitForReload()


def _activation_for(path: Path, refresh_command: str) -> RefreshCommand | WaitForReload:
    return _activation_for_config(load_scheduler_config(path), refresh_command)


def _default_target(desired: SchedulerConfig) -> Path:
    conf_dir = hadoop_conf_dir()
    if conf_dir is None:
        raise SettingsError("no target file: pass --target PATH or set HADOOP_CONF_DIR")
    if isinstance(desired, CapacitySchedulerConfig):
        return conf_dir / "capacity-scheduler.xml"
    site = read_properties(conf_dir / "yarn-site.xml")
    configured = site.get("yarn.scheduler.fair.allocation.file", "fair-scheduler.xml")
    path = Path(configured.removeprefix("file://"))
    return path if path.is_absolute() else conf_dir / path
