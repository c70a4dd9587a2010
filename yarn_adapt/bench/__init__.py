"""Benchmarks: ``yarn-adapt bench NAME``.

A benchmark is a function taking :class:`BenchOptions` and returning a
:class:`BenchResult`: rows for a readable table and one flat dict of figures. The runner
prints the table, then the figures as ONE JSON object on the last line (the issue notes
quote that line). Benchmarks report figures; tests assert behaviour.

The benchmarks (docs/benchmarks.md): ``sim_speed``, ``sim_fidelity``, ``comparator``
(``comparator-accuracy``, with ``real_rm``), ``adaptive`` (``adaptive-latency``, with
``adaptive_figures``, ``adaptive_keys``, ``google_cluster`` and ``paper_configs``,
§4.4's configurations), ``search_scale``,
``cilantro``, ``crash_safety`` (with ``crash_harness`` and ``crash_child``),
``trace_risk`` (with ``piggymetrics``, the traced application it generates, and
``otlp_load``, the OTLP clients), ``colocation``, ``preemption``, ``placement`` and
``testbed``.

Each benchmark declares its ``--set`` keys (:mod:`yarn_adapt.set_keys`) when it
registers; :func:`run_and_print` reads them before the benchmark starts, so a wrong
key or value is refused before any work.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from yarn_adapt.errors import SettingsError
from yarn_adapt.set_keys import SetSpec


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """Options every benchmark accepts where they make sense."""

    quick: bool = False
    trace: Path | None = None
    seed: int = 1
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchResult:
    figures: Mapping[str, Any]
    rows: Sequence[Mapping[str, Any]] = ()


BenchFunction = Callable[[BenchOptions], BenchResult]
SpecSource = SetSpec | Callable[[], SetSpec]


@dataclass(frozen=True)
class Benchmark:
    name: str
    summary: str
    run: BenchFunction
    spec_source: SpecSource

    def settings(self) -> SetSpec:
        """Its ``--set`` keys."""
        source = self.spec_source
        return source if isinstance(source, SetSpec) else source()


_REGISTRY: dict[str, Benchmark] = {}


def benchmark(
    name: str, summary: str, settings: SpecSource
) -> Callable[[BenchFunction], BenchFunction]:
    """Register ``fn`` as ``yarn-adapt bench NAME``, its ``--set`` keys ``settings``
    (or a function giving them, when declaring them needs a slow import)."""

    def register(fn: BenchFunction) -> BenchFunction:
        _REGISTRY[name] = Benchmark(name, summary, fn, settings)
        return fn

    return register


def available() -> list[Benchmark]:
    _load_all()
    return sorted(_REGISTRY.values(), key=lambda b: b.name)


def get(name: str) -> Benchmark:
    _load_all()
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise SettingsError(f"unknown benchmark {name!r} (known: {known})")
    return _REGISTRY[name]


def run_and_print(name: str, options: BenchOptions, out: TextIO) -> Mapping[str, Any]:
    bench = get(name)
    bench.settings().read(options.extra, quick=options.quick)  # refused before any work
    result = bench.run(options)
    _print_table(result.rows, out)
    figures = {"bench": name, **result.figures}
    out.write(json.dumps(figures, sort_keys=False, default=_json_default) + "\n")
    return figures


def _print_table(rows: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    if not rows:
        return
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[_cell(row.get(col, "")) for col in columns] for row in rows]
    widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(columns)]
    out.write("  ".join(col.ljust(w) for col, w in zip(columns, widths, strict=True)) + "\n")
    for row_cells in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row_cells, widths, strict=True)) + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _load_all() -> None:
    """Import the modules that register benchmarks (kept lazy: start-up stays fast)."""
    import importlib

    for module in _BENCH_MODULES:
        importlib.import_module(module)


_BENCH_MODULES: list[str] = [
    "yarn_adapt.bench.sim_speed",
    "yarn_adapt.bench.search_scale",
    "yarn_adapt.bench.sim_fidelity.bench",
    "yarn_adapt.bench.comparator",
    "yarn_adapt.bench.adaptive",
    "yarn_adapt.bench.crash_safety",
    "yarn_adapt.bench.cilantro",
    "yarn_adapt.bench.trace_risk",
    "yarn_adapt.bench.placement",
    "yarn_adapt.bench.testbed",
    "yarn_adapt.bench.preemption",
    "yarn_adapt.bench.colocation",
]
