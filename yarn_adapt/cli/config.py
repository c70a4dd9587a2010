"""``yarn-adapt config validate|diff``: scheduler files checked offline."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import click

from yarn_adapt.errors import ConfigFileError, ValidationIssue
from yarn_adapt.model import CapacitySchedulerConfig
from yarn_adapt.yarn.confxml import (
    ConfigChange,
    diff_configs,
    load_scheduler_config,
    render_diff,
    validate,
)
from yarn_adapt.yarn.schedconf.issues import Enforcement, enforcement_of

FILE = click.Path(exists=False, dir_okay=False, path_type=Path)


@click.group("config")
def config_group() -> None:
    """Validate and compare capacity-scheduler.xml / fair-scheduler.xml files."""


@config_group.command("validate")
@click.argument("file", type=FILE)
@click.option(
    "--running",
    type=FILE,
    metavar="XML",
    help="The file the RM runs now (checks queue removals and moves).",
)
@click.option("--strict", is_flag=True, help="Warnings fail the check too (exit 2).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def validate_command(file: Path, running: Path | None, strict: bool, as_json: bool) -> None:
    """Check FILE with YARN's own rules. Errors (YARN refuses the file) exit 2;
    warnings (YARN loads it, but ignores a setting or the result is surely
    unintended) are listed and exit 0 unless --strict."""
    config = load_scheduler_config(file)
    current = load_scheduler_config(running) if running else None
    found = Findings.of(validate(config, current))
    kind = "capacity" if isinstance(config, CapacitySchedulerConfig) else "fair"
    queues = sum(1 for _ in config.queues())
    failed = bool(found.errors or (strict and found.warnings))
    if as_json:
        click.echo(json.dumps(validation_json(file, kind, queues, found, strict=strict)))
    else:
        for line in validation_lines(file, kind, queues, found, strict=strict):
            click.echo(line)
    if failed:
        # the findings are printed above (stdout); stderr says only why the exit is 2
        raise ConfigFileError(str(file), f"not valid: {found.count_words(strict=strict)}")


@dataclass(frozen=True)
class Findings:
    """Validation issues split the way YARN treats them: errors make YARN refuse the
    file; warnings it loads (ignoring one setting, or accepting a value that is
    surely unintended)."""

    errors: tuple[ValidationIssue, ...]
    warnings: tuple[ValidationIssue, ...]

    @classmethod
    def of(cls, issues: list[ValidationIssue]) -> Findings:
        errors = tuple(i for i in issues if enforcement_of(i) is Enforcement.REFUSED)
        warnings = tuple(i for i in issues if enforcement_of(i) is not Enforcement.REFUSED)
        return cls(errors, warnings)

    def count_words(self, *, strict: bool) -> str:
        parts = [_counted(len(self.errors), "error")]
        if self.warnings:
            failing = " (failing with --strict)" if strict else ""
            parts.append(_counted(len(self.warnings), "warning") + failing)
        return ", ".join(parts)


YARN_DOES = {
    Enforcement.REFUSED: "refuses the file",
    Enforcement.IGNORED: "loads the file and ignores this setting",
    Enforcement.ADVISORY: "accepts it",
}


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def issue_json(issue: ValidationIssue) -> dict[str, str]:
    enforcement = enforcement_of(issue)
    return {
        "queue": issue.queue,
        "property": issue.prop,
        "message": issue.message,
        "yarn": YARN_DOES[enforcement],
        "text": str(issue),
    }


def validation_json(
    file: Path, kind: str, queues: int, found: Findings, *, strict: bool
) -> dict[str, object]:
    return {
        "file": str(file),
        "scheduler": kind,
        "queues": queues,
        "valid": not found.errors and not (strict and found.warnings),
        "strict": strict,
        "errors": [issue_json(i) for i in found.errors],
        "warnings": [issue_json(i) for i in found.warnings],
    }


def validation_lines(
    file: Path, kind: str, queues: int, found: Findings, *, strict: bool
) -> list[str]:
    lines = [f"{file}: error: {issue}" for issue in found.errors]
    # each message says what YARN does with it ("YARN 3.4 accepts it", ...)
    lines += [f"{file}: warning: {issue}" for issue in found.warnings]
    if found.errors or (strict and found.warnings):
        return lines
    lines.append(f"{file}: valid {kind} scheduler configuration, {queues} queues")
    if found.warnings:
        lines.append(
            f"{file}: {_counted(len(found.warnings), 'warning')}: YARN loads the file, but "
            "yarn-adapt apply refuses it until they are fixed"
        )
    return lines


@config_group.command("diff")
@click.argument("old", type=FILE)
@click.argument("new", type=FILE)
@click.option("--json", "as_json", is_flag=True, help="A JSON list of changes instead of text.")
def diff_command(old: Path, new: Path, as_json: bool) -> None:
    """Show what changes from OLD to NEW, per queue and property."""
    before, after = load_scheduler_config(old), load_scheduler_config(new)
    if type(before) is not type(after):
        raise ConfigFileError(str(new), f"is a different scheduler's file than {old}")
    changes = diff_configs(before, after)
    if as_json:
        click.echo(json.dumps([change_json(c) for c in changes]))
        return
    click.echo(render_diff(changes) if changes else "no differences")


def change_json(change: ConfigChange) -> dict[str, str | None]:
    return {
        "kind": str(change.kind),
        "queue": change.queue,
        "property": change.prop,
        "old": change.old,
        "new": change.new,
    }
