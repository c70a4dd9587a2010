"""Scheduler configuration files: read, validate, diff and write them.

The public entry point of ``yarn_adapt.yarn.schedconf`` (the modules behind it are
implementation). Everything a caller needs:

Reading (the edge where lxml/OSError become :class:`~yarn_adapt.errors.ConfigFileError`)
    :func:`load_scheduler_config` -- path -> ``CapacitySchedulerConfig | FairSchedulerConfig``
    :func:`read_scheduler_document` -- path -> :class:`CapacityDocument | FairDocument`
    :func:`read_capacity`, :func:`read_fair`, :func:`parse_capacity_xml`,
    :func:`parse_fair_xml` -- when the kind is known

Writing (a document keeps its lxml tree so a rewrite is a patch of the original)
    ``document.render(new_config)`` -- the original file edited to say ``new_config``
    :func:`render_capacity`, :func:`render_fair` -- the same, or a fresh file
    :func:`write_scheduler_file` -- validate, then replace the file atomically

Validating (pure; YARN 3.4's own rules, see ``schedconf.validate_capacity/_fair``)
    :func:`validate` -> ``list[ValidationIssue]`` ; :func:`raise_if_invalid`

Comparing and changing a running RM
    :func:`diff_configs` / :func:`render_diff` -- per queue and property
    :func:`mutation_body` -- the ``<sched-conf>`` body for PUT /ws/v1/cluster/scheduler-conf
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from yarn_adapt.errors import ConfigFileError, ValidationIssue
from yarn_adapt.model.capacity import CapacitySchedulerConfig
from yarn_adapt.model.fair import FairSchedulerConfig
from yarn_adapt.yarn.schedconf import capacity_xml, fair_xml, xmlio
from yarn_adapt.yarn.schedconf.diff import ChangeKind, ConfigChange, diff_configs, render_diff
from yarn_adapt.yarn.schedconf.issues import (
    Enforcement,
    RuleIssue,
    enforcement_of,
    raise_for_issues,
    yarn_refuses,
)
from yarn_adapt.yarn.schedconf.mutation import (
    MutationPlan,
    mutation_body,
    mutation_plan,
    mutation_steps,
)
from yarn_adapt.yarn.schedconf.validate_capacity import validate_capacity
from yarn_adapt.yarn.schedconf.validate_fair import validate_fair
from yarn_adapt.yarn.schedconf.xmlio import RawDocument

SchedulerConfig = CapacitySchedulerConfig | FairSchedulerConfig

__all__ = [
    "CapacityDocument",
    "ChangeKind",
    "ConfigChange",
    "Enforcement",
    "FairDocument",
    "MutationPlan",
    "RuleIssue",
    "SchedulerConfig",
    "SchedulerDocument",
    "diff_configs",
    "encode_like",
    "enforcement_of",
    "load_scheduler_config",
    "mutation_body",
    "mutation_plan",
    "mutation_steps",
    "parse_capacity_xml",
    "parse_fair_xml",
    "parse_scheduler_document",
    "raise_if_invalid",
    "read_capacity",
    "read_fair",
    "read_scheduler_bytes",
    "read_scheduler_document",
    "render_capacity",
    "render_diff",
    "render_fair",
    "validate",
    "validate_capacity",
    "validate_fair",
    "write_scheduler_file",
    "yarn_refuses",
]


@dataclass(frozen=True, eq=False)
class CapacityDocument:
    """A capacity-scheduler.xml as read: its model plus the lxml tree to patch."""

    raw: RawDocument
    config: CapacitySchedulerConfig

    @property
    def source(self) -> str:
        return self.raw.source

    def render(self, config: CapacitySchedulerConfig | None = None) -> str:
        """This file's text edited to say ``config`` (unchanged text when None)."""
        return render_capacity(config if config is not None else self.config, self)


@dataclass(frozen=True, eq=False)
class FairDocument:
    """A fair-scheduler.xml as read: its model plus the lxml tree to patch."""

    raw: RawDocument
    config: FairSchedulerConfig

    @property
    def source(self) -> str:
        return self.raw.source

    def render(self, config: FairSchedulerConfig | None = None) -> str:
        return render_fair(config if config is not None else self.config, self)


SchedulerDocument = CapacityDocument | FairDocument


# --------------------------------------------------------------------------- reading


def parse_capacity_xml(text: str | bytes, source: str = "<string>") -> CapacityDocument:
    raw = xmlio.parse_document(text, source)
    return CapacityDocument(raw, capacity_xml.parse_capacity_document(raw))


def parse_fair_xml(text: str | bytes, source: str = "<string>") -> FairDocument:
    raw = xmlio.parse_document(text, source)
    return FairDocument(raw, fair_xml.parse_fair_document(raw))


def read_capacity(path: str | os.PathLike[str]) -> CapacityDocument:
    raw = xmlio.read_document(path)
    return CapacityDocument(raw, capacity_xml.parse_capacity_document(raw))


def read_fair(path: str | os.PathLike[str]) -> FairDocument:
    raw = xmlio.read_document(path)
    return FairDocument(raw, fair_xml.parse_fair_document(raw))


def read_scheduler_document(path: str | os.PathLike[str]) -> SchedulerDocument:
    """Read a scheduler file, telling capacity from fair by its root element
    (``<configuration>`` with yarn.scheduler.capacity.* properties, or ``<allocations>``)."""
    return _scheduler_document(xmlio.read_document(path))


def read_scheduler_bytes(path: str | os.PathLike[str]) -> tuple[bytes, SchedulerDocument]:
    """A scheduler file's exact bytes and the document they hold, from one read (an
    applier hashes and backs up the very bytes it parsed)."""
    data = xmlio.read_document_bytes(path)
    return data, parse_scheduler_document(data, os.fspath(path))


def parse_scheduler_document(data: str | bytes, source: str = "<string>") -> SchedulerDocument:
    """A scheduler file's content (either kind, told apart by its root element)."""
    return _scheduler_document(xmlio.parse_document(data, source))


def _scheduler_document(raw: RawDocument) -> SchedulerDocument:
    if raw.root_name == "allocations":
        return FairDocument(raw, fair_xml.parse_fair_document(raw))
    if raw.root_name == "configuration":
        if not capacity_xml.has_capacity_properties(raw):
            raise raw.error(
                "no yarn.scheduler.capacity.* property: not a capacity-scheduler.xml", raw.root
            )
        return CapacityDocument(raw, capacity_xml.parse_capacity_document(raw))
    raise raw.error(
        f"root element is <{raw.root_name}>: neither <configuration> "
        "(capacity-scheduler.xml) nor <allocations> (fair-scheduler.xml)",
        raw.root,
    )


def encode_like(document: SchedulerDocument, text: str) -> bytes:
    """``text`` (a rendering of ``document``) as the bytes its file holds: in the
    encoding its XML declaration names."""
    return text.encode(xmlio.declared_encoding(document.raw), "xmlcharrefreplace")


def load_scheduler_config(path: str | os.PathLike[str]) -> SchedulerConfig:
    return read_scheduler_document(path).config


# --------------------------------------------------------------------------- writing


def render_capacity(
    config: CapacitySchedulerConfig, original: CapacityDocument | None = None
) -> str:
    """The text of a capacity-scheduler.xml saying ``config``: ``original`` patched
    when given (comments, unknown properties and layout kept), else a fresh file."""
    if original is None:
        raw = xmlio.empty_document("configuration")
        capacity_xml.patch_capacity_document(raw, capacity_xml.empty_capacity_config(), config)
    else:
        raw = original.raw.copy()
        capacity_xml.patch_capacity_document(raw, original.config, config)
    return xmlio.serialize(raw)


def render_fair(config: FairSchedulerConfig, original: FairDocument | None = None) -> str:
    """The text of a fair-scheduler.xml saying ``config`` (see :func:`render_capacity`)."""
    if original is None:
        raw = xmlio.empty_document("allocations")
        fair_xml.patch_fair_document(raw, fair_xml.empty_fair_config(), config)
    else:
        raw = original.raw.copy()
        fair_xml.patch_fair_document(raw, original.config, config)
    return xmlio.serialize(raw)


def write_scheduler_file(
    path: str | os.PathLike[str],
    config: SchedulerConfig,
    original: SchedulerDocument | None = None,
    running: SchedulerConfig | None = None,
) -> str:
    """Validate ``config`` (against ``running`` when given), then write it to ``path``
    in one atomic rename. Raises ConfigValidationError before touching the file.
    Returns the text written."""
    raise_if_invalid(config, running, source=os.fspath(path))
    if isinstance(config, CapacitySchedulerConfig):
        if original is not None and not isinstance(original, CapacityDocument):
            raise ConfigFileError(
                original.source, "a fair-scheduler.xml cannot hold a capacity config"
            )
        text = render_capacity(config, original)
    else:
        if original is not None and not isinstance(original, FairDocument):
            raise ConfigFileError(
                original.source, "a capacity-scheduler.xml cannot hold a fair config"
            )
        text = render_fair(config, original)
    encoding = xmlio.declared_encoding(original.raw) if original is not None else "utf-8"
    xmlio.write_atomically(path, text, encoding)
    return text


# --------------------------------------------------------------------------- validating


def validate(
    config: SchedulerConfig, running: SchedulerConfig | None = None
) -> list[ValidationIssue]:
    """Every rule ``config`` breaks; ``running`` (the RM's current config) adds the
    rules about changes (removing a RUNNING queue, ...)."""
    if isinstance(config, CapacitySchedulerConfig):
        previous = running if isinstance(running, CapacitySchedulerConfig) else None
        return list(validate_capacity(config, previous))
    previous_fair = running if isinstance(running, FairSchedulerConfig) else None
    return list(validate_fair(config, previous_fair))


def raise_if_invalid(
    config: SchedulerConfig, running: SchedulerConfig | None = None, source: str = ""
) -> None:
    """Raise ConfigValidationError (one line, first issue named) when ``config`` breaks
    any rule."""
    raise_for_issues(validate(config, running), source)
