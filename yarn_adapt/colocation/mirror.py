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
mode.

The RM keeps what it read of the file in memory (ResourceTrackerService's copy, used
at every registration) until ``yarn rmadmin -refreshNodesResources``. A file changed
without that refresh is worse than none: a NodeManager restarting after the guard had
given its node back would register with the total the RM read long ago. So every
write (and putting the file back) is followed by the refresh command; one that fails
is said and retried on the next sync. The refresh also pushes the file's totals to
their nodes, which are the guard's own (and the operator's, as the operator set them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from yarn_adapt.errors import ConfigFileError
from yarn_adapt.model import Resources
from yarn_adapt.yarn.apply.activation import ActivationFailed, RefreshCommand
from yarn_adapt.yarn.schedconf.xmlio import write_bytes_atomically
from yarn_adapt.yarn.site import read_properties

PREFIX = "yarn.resource.dynamic."
NODES = PREFIX + "nodes"
NOTE_NAME = "dynamic-resources.json"
ORIGINAL_NAME = "dynamic-resources.orig.xml"
DEFAULT_REFRESH_COMMAND = ("yarn", "rmadmin", "-refreshNodesResources")


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
    def __init__(
        self, path: Path, guard_dir: Path, refresh: Sequence[str] = DEFAULT_REFRESH_COMMAND
    ) -> None:
        self.path = path
        self.guard_dir = guard_dir
        self.note = guard_dir / NOTE_NAME
        self.original = guard_dir / ORIGINAL_NAME
        self.refresh = tuple(refresh)
        self.unrefreshed = False  # written, but the RM has not re-read it yet

    def sync(self, totals: Mapping[str, Resources]) -> bool:
        """Make the file say ``totals`` (the guard's lowered nodes) and the RM re-read
        it; True if it wrote."""
        if not totals:
            return self.clear()
        operators = self._operators()
        wanted = render(mirrored_properties(operators, totals))
        if self._current() == wanted:
            self._refresh_if_owed()
            return False
        write_bytes_atomically(self.path, wanted)
        self._refresh()
        return True

    def clear(self) -> bool:
        """The operator's file back as it was before the guard's first write, re-read
        by the RM."""
        if not self.note.exists():
            self._refresh_if_owed()
            return False
        had_file = bool(json.loads(self.note.read_text(encoding="utf-8"))["had_file"])
        if had_file:
            write_bytes_atomically(self.path, self.original.read_bytes())
        else:
            self.path.unlink(missing_ok=True)
        self.original.unlink(missing_ok=True)
        self.note.unlink()
        self._refresh()
        return True

    def _refresh_if_owed(self) -> None:
        if self.unrefreshed:
            self._refresh()

    def _refresh(self) -> None:
        self.unrefreshed = True
        try:
            RefreshCommand(self.refresh, timeout_s=60.0).activate()
        except ActivationFailed as exc:
            problem = f"written, but the RM did not re-read it ({exc}); refreshed again next cycle"
            raise ConfigFileError(str(self.path), problem) from exc
        self.unrefreshed = False

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
        note = {"path": str(self.path), "had_file": had_file, "refresh": list(self.refresh)}
        partial.write_text(json.dumps(note))
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
    written = json.loads(note.read_text(encoding="utf-8"))
    refresh = written.get("refresh") or DEFAULT_REFRESH_COMMAND
    return DynamicResourcesMirror(Path(written["path"]), guard_dir, refresh)
