"""Validation findings: which queue and property, what is wrong, and whether YARN
itself refuses it.

Every finding is a :class:`~yarn_adapt.errors.ValidationIssue` (the project-wide type
that :class:`~yarn_adapt.errors.ConfigValidationError` carries). :class:`RuleIssue`
adds how YARN 3.4 treats the same configuration, which the real-RM agreement tests
compare against and which an operator may want to know; yarn-adapt refuses to write
all of them alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from yarn_adapt.errors import ConfigValidationError, ValidationIssue


class Enforcement(StrEnum):
    """What YARN (3.4) does with a configuration that has this issue."""

    # refreshQueues fails / the Fair Scheduler keeps its previous allocations.
    REFUSED = "refused"
    # YARN loads the file but logs an error and ignores this one setting.
    IGNORED = "ignored"
    # YARN accepts it; yarn-adapt refuses because the result is surely unintended.
    ADVISORY = "advisory"


@dataclass(frozen=True)
class RuleIssue(ValidationIssue):
    enforcement: Enforcement = Enforcement.REFUSED

    def __str__(self) -> str:
        # A global setting has no queue: "prop: message", not ".prop: message".
        where = ".".join(part for part in (self.queue, self.prop) if part)
        return f"{where}: {self.message}"


def refused(queue: str, prop: str, message: str) -> RuleIssue:
    return RuleIssue(queue, prop, message, Enforcement.REFUSED)


def ignored(queue: str, prop: str, message: str) -> RuleIssue:
    return RuleIssue(queue, prop, message, Enforcement.IGNORED)


def advisory(queue: str, prop: str, message: str) -> RuleIssue:
    return RuleIssue(queue, prop, message, Enforcement.ADVISORY)


def enforcement_of(issue: ValidationIssue) -> Enforcement:
    return issue.enforcement if isinstance(issue, RuleIssue) else Enforcement.REFUSED


def yarn_refuses(issues: Sequence[ValidationIssue]) -> bool:
    """True when YARN itself would reject the configuration as a whole."""
    return any(enforcement_of(issue) is Enforcement.REFUSED for issue in issues)


def raise_for_issues(issues: Sequence[ValidationIssue], source: str = "") -> None:
    """Raise :class:`ConfigValidationError` listing ``issues``; return when empty."""
    if issues:
        raise ConfigValidationError(issues, source)
