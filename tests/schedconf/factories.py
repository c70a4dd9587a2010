"""Small builders for scheduler configurations used across the schedconf tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig
from yarn_adapt.yarn.confxml import parse_capacity_xml, parse_fair_xml

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "schedconf"
PREFIX = "yarn.scheduler.capacity."

# Two leaves splitting root evenly: every capacity case edits this.
BASE_CAPACITY: dict[str, str] = {
    "root.queues": "a,b",
    "root.a.capacity": "50",
    "root.b.capacity": "50",
}


def capacity_properties(
    changes: Mapping[str, str | None], base: Mapping[str, str] = BASE_CAPACITY
) -> dict[str, str]:
    """``base`` with ``changes`` applied (None removes a key). Keys are relative to
    ``yarn.scheduler.capacity.`` unless they contain no queue path (``site.x``)."""
    merged = dict(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def capacity_xml(properties: Mapping[str, str]) -> str:
    """A capacity-scheduler.xml holding ``properties`` (relative keys get the prefix)."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', "<configuration>"]
    for key, value in properties.items():
        name = key if key.startswith(("yarn.", "site.")) else PREFIX + key
        lines.append(
            f"  <property><name>{escape(name)}</name><value>{escape(value)}</value></property>"
        )
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"


def capacity(changes: Mapping[str, str | None] | None = None, **kw: str) -> CapacitySchedulerConfig:
    """The base capacity config with ``changes`` applied, parsed as YARN would read it."""
    properties = capacity_properties(dict(changes or {}) | dict(kw))
    return parse_capacity_xml(capacity_xml(properties), "case.xml").config


def fair(body: str, defaults: str = "") -> FairSchedulerConfig:
    """A fair config from the inside of <allocations>."""
    text = f'<?xml version="1.0"?>\n<allocations>\n{defaults}\n{body}\n</allocations>\n'
    return parse_fair_xml(text, "case.xml").config


def fair_xml(body: str) -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<allocations>\n{body}\n</allocations>\n'
