"""The house's layering, read from the code's imports: data flows one way.

Every import between two of the product's packages runs down the layers below (a
package imports only packages of lower layers; packages of one layer are peers and
import none of each other), and no two modules import each other, directly or
through others. Every import counts: at module level, inside a function, or under
``TYPE_CHECKING``. A new package must be given its layer here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP_PACKAGES = ("yarn_adapt", "rules", "tracing", "preemption")
GENERATED = ("yarn_adapt/sim/_native",)

LAYERS: tuple[tuple[str, ...], ...] = (  # from the ground up
    ("yarn_adapt.errors", "yarn_adapt.durations"),
    (
        "yarn_adapt.model",
        "yarn_adapt.progress",
        "yarn_adapt.set_keys",
        "yarn_adapt.tomlsettings",
        "tracing",
    ),
    ("yarn_adapt.semantics",),
    ("yarn_adapt.yarn", "yarn_adapt.sim", "yarn_adapt.workload"),
    ("rules", "preemption", "yarn_adapt.minicluster"),
    ("yarn_adapt.tuning",),
    ("yarn_adapt.demand",),
    ("yarn_adapt.colocation",),
    ("yarn_adapt.cosim",),
    ("yarn_adapt.placement", "yarn_adapt.service"),
    ("yarn_adapt.doctor",),
    ("yarn_adapt.testbed",),
    ("yarn_adapt.bench",),
    ("yarn_adapt.cli",),
    ("yarn_adapt.__main__",),
)
LAYER = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every product module."""
    found: dict[str, Path] = {}
    for top in TOP_PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if relative.as_posix().startswith(GENERATED):
                continue
            name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The product modules ``name`` (at ``path``) imports: ``from a import b`` names
    module ``a.b`` when there is one, else ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if candidate in modules:
                    yield candidate
                elif base in modules:
                    yield base


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def package_of(module: str) -> str:
    """The package a module belongs to, as :data:`LAYERS` names them."""
    parts = module.split(".")
    if parts[0] == "yarn_adapt" and len(parts) > 1:
        return f"yarn_adapt.{parts[1]}"
    return parts[0]


def import_graph() -> nx.DiGraph:
    modules = module_files()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, target) for target in imported(name, path, modules))
    graph.remove_edges_from(nx.selfloop_edges(graph))
    return graph


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph()


def test_every_package_has_a_layer(graph: nx.DiGraph) -> None:
    packages = {package_of(module) for module in graph} - {"yarn_adapt"}
    assert sorted(packages - set(LAYER)) == []


def test_imports_between_packages_run_down(graph: nx.DiGraph) -> None:
    upward = []
    for source, target in graph.edges:
        above, below = package_of(source), package_of(target)
        if above == below or "yarn_adapt" in (above, below):
            continue
        if LAYER.get(below, -1) >= LAYER.get(above, -1):
            upward.append(f"{source} -> {target} ({above} may not import {below})")
    assert sorted(upward) == []


def test_no_modules_import_each_other(graph: nx.DiGraph) -> None:
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert sorted(circles) == []


def test_the_check_reads_imports_of_every_kind(tmp_path: Path) -> None:
    """A lazy import and one under ``TYPE_CHECKING`` are seen like any other."""
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from yarn_adapt.service.state import store\n"
        "def f():\n    from yarn_adapt.cli import main\n"
        "from . import sibling\n"
    )
    modules = {
        "yarn_adapt.service.state.store": source,
        "yarn_adapt.cli": source,
        "pkg.sibling": source,
    }
    found = set(imported("pkg.m", source, modules))
    assert found == {"yarn_adapt.service.state.store", "yarn_adapt.cli", "pkg.sibling"}
