"""Scheduler file text <-> configuration, and the unified diff the page shows."""

from __future__ import annotations

import difflib

from yarn_adapt.model import SchedulerConfig
from yarn_adapt.yarn.confxml import parse_capacity_xml, parse_fair_xml
from yarn_adapt.yarn.schedconf.xmlio import parse_document


def parse_scheduler_text(text: str, source: str) -> SchedulerConfig:
    """A stored scheduler file's configuration, Capacity or Fair by its root."""
    if parse_document(text, source).root_name == "allocations":
        return parse_fair_xml(text, source).config
    return parse_capacity_xml(text, source).config


def unified_xml_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"{name} (running)",
        tofile=f"{name} (proposed)",
    )
    return "".join(lines)
