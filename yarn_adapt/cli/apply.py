"""``yarn-adapt apply FILE``: make the RM run a scheduler configuration, safely."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

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
)
from yarn_adapt.yarn.confxml import load_scheduler_config, raise_if_invalid
from yarn_adapt.yarn.rm import ResourceManagerClient
from yarn_adapt.yarn.site import hadoop_conf_dir, read_properties


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
def recover_command(
    target: Path | None,
    refresh_command: str,
    state_dir: Path,
    verify_timeout: float,
    **connection: object,
) -> None:
    """Finish or roll back applies a crash interrupted, from the journal in
    --state-dir: each is compared with the file (or the RM's scheduler-conf) and
    what the RM reports, then activated and verified, or restored, activated and
    confirmed. Prints what runs now for each; exit 5 if one needs the operator."""
    endpoints = endpoints_from_options(**connection)  # type: ignore[arg-type]
    settings = ApplySettings(state_dir=state_dir, verify=PollSettings(timeout_s=verify_timeout))
    journal = settings.default_journal()
    pending = interrupted(journal)
    if not pending:
        click.echo("no interrupted applies")
        return
    unresolved: list[str] = []
    with endpoints.rm_client() as rm:
        for history in pending:
            step = _recover(history, rm, settings, refresh_command)
            detail = next(h for h in histories(journal.entries()) if h.apply_id == history.apply_id)
            click.echo(f"{history.apply_id}: {history.target}: {step} ({detail.last.detail})")
            if step is ApplyStep.UNRESOLVED:
                unresolved.append(f"{history.apply_id}: {detail.last.detail}")
    if unresolved:
        raise RollbackFailed(f"the operator must act: {'; '.join(unresolved)}")


def _recover(
    history: ApplyHistory, rm: ResourceManagerClient, settings: ApplySettings, refresh: str
) -> ApplyStep:
    if history.applier.startswith("file+"):
        activation = activation_named(history.applier, shlex.split(refresh))
        return FileApplier(Path(history.target), rm, activation, settings).recover(history)
    return MutationApplier(rm, settings).recover(history)


def _writes_a_file(desired: SchedulerConfig, via: str) -> bool:
    return via == "file" or not isinstance(desired, CapacitySchedulerConfig)


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
