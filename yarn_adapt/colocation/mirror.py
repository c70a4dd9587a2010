"""The guard's totals mirrored into the RM's ``dynamic-resources.xml`` (optional, off by
default: ``[colocation] dynamic_resources_file``).

``updateNodeResource`` lives in the ResourceManager's memory. A NodeManager that
registers afresh (after its restart; or after an RM restart that follows one) brings
the total it is configured with -- unless the RM lists the node in
``dynamic-resources.xml`` (YARN-998), which it reads when it starts (and on ``yarn
rmadmin -refreshNodesResources``) and applies to a node as it registers. With the
mirror, a restarted RM starts from the guard's totals instead of waiting for the
guard's next cycle to push them again.

The file holds, for every node the guard holds lowered, its total with an overcommit
timeout of -1 (``yarn.resource.dynamic.<node>.memory`` / ``.vcores`` /
``.overcommittimeout``, and the node in ``yarn.resource.dynamic.nodes``), beside
whatever the operator had listed there (kept as it was; for the guard's nodes the
guard's totals win). Before the guard's first write the operator's file is copied to
``<state dir>/guard/dynamic-resources.orig.xml`` (a note says whether there was one);
once the guard holds no node, that file is put back (or removed, if there was none)
and the note goes. Every write is atomic and durable, keeping the file's owner and
mode. The mirror never asks the RM to refresh: the guard's own pushes do that.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from yarn_adapt.errors import ConfigFileError
from yarn_adapt.model import Resources
from yarn_adapt.yarn.schedconf.xmlio import write_bytes_atomically
from yarn_adapt.yarn.site import read_properties

PREFIX = "yarn.resource.dynamic."
NODES = PREFIX + "nodes"
NOTE_NAME = "dynamic-resources.json"
ORIGINAL_NAME = "dynamic-resources.orig.xml"


def mirrored_properties(
    operators: Mapping[str, str], totals: Mapping[str, Resources]
) -> dict[str, str]:
    """The file's properties: the operator's, with the guard's nodes added or overridden."""
    listed = [n.strip() for n in operators.get(NODES, "").split(",") if n.strip()]
    nodes = listed + [n for n in sorted(totals) if n not in listed]
    properties = {k: v for k, v in operators.items() if k != NODES}
    for node_id, total in totals.items():
        properties[f"{PREFIX}{node_id}.memory"] = str(total.memory_mb)
        properties[f"{PREFIX}{node_id}.vcores"] = str(total.vcores)
        properties[f"{PREFIX}{node_id}.overcommittimeout"] = "-1"
    if nodes:
        properties[NODES] = ",".join(nodes)
    return properties


def render(properties: Mapping[str, str]) -> bytes:
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             "<!-- the co-location guard's node totals (yarn-adapt); see its docs -->",
             "<configuration>"]  # fmt: skip
    for name, value in properties.items():
        lines.append(
            f"  <property><name>{escape(name)}</name><value>{escape(value)}</value></property>"
        )
    lines.append("</configuration>")
    return ("\n".join(lines) + "\n").encode("utf-8")


class DynamicResourcesMirror:
    def __init__(self, path: Path, guard_dir: Path) -> None:
        self.path = path
        self.guard_dir = guard_dir
        self.note = guard_dir / NOTE_NAME
        self.original = guard_dir / ORIGINAL_NAME

    def sync(self, totals: Mapping[str, Resources]) -> bool:
        """Make the file say ``totals`` (the guard's lowered nodes); True if it wrote."""
        if not totals:
            return self.clear()
        operators = self._operators()
        wanted = render(mirrored_properties(operators, totals))
        if self._current() == wanted:
            return False
        write_bytes_atomically(self.path, wanted)
        return True

    def clear(self) -> bool:
        """The operator's file back as it was before the guard's first write."""
        if not self.note.exists():
            return False
        had_file = bool(json.loads(self.note.read_text(encoding="utf-8"))["had_file"])
        if had_file:
            write_bytes_atomically(self.path, self.original.read_bytes())
        else:
            self.path.unlink(missing_ok=True)
        self.original.unlink(missing_ok=True)
        self.note.unlink()
        return True

    def _operators(self) -> dict[str, str]:
        """The operator's own properties: from the copy once the guard has written."""
        if not self.note.exists():
            self._keep_original()
        if self.original.exists():
            return read_properties(self.original)
        return {}

    def _keep_original(self) -> None:
        self.guard_dir.mkdir(parents=True, exist_ok=True)
        had_file = self.path.exists()
        if had_file:
            read_properties(self.path)  # refuses a file that is not a configuration
            write_bytes_atomically(self.original, self.path.read_bytes())
        partial = self.note.with_name(f".{self.note.name}.partial")
        partial.write_text(json.dumps({"path": str(self.path), "had_file": had_file}))
        partial.replace(self.note)

    def _current(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigFileError(str(self.path), f"cannot read: {exc.strerror or exc}") from exc


def journalled_mirror(guard_dir: Path) -> DynamicResourcesMirror | None:
    """The mirror the guard left written (for ``yarn-adapt recover``), if any."""
    note = guard_dir / NOTE_NAME
    if not note.exists():
        return None
    return DynamicResourcesMirror(Path(json.loads(note.read_text(encoding="utf-8"))["path"]),
                                  guard_dir)  # fmt: skip
