"""Which simulator core runs: the Python one or its compiled copy (issue 15).

The core -- :mod:`~yarn_adapt.sim.state`, ``shares``, ``preemption``,
``capacity``, ``fair`` and ``engine`` -- is typed Python. ``pip install`` also
compiles a byte-for-byte copy of it with mypyc into ``yarn_adapt.sim._native``
when mypy and a C compiler are at hand (``setup.py``,
:mod:`yarn_adapt.sim.native_build`); a missing compiler leaves the Python core
alone. The copy is the same source, so both give the same results
(tests/sim/test_native.py); the compiled one is about three times faster.

``YARN_ADAPT_SIM_ENGINE`` chooses (``simulate(..., engine=...)`` overrides it):

* ``auto`` (default): the compiled core if it was built from the sources now in
  place, else the Python one;
* ``python``: the Python core;
* ``native``: the compiled core, or a :class:`SettingsError` saying why not.

A compiled copy older than the sources (an editable install edited since) is
never used: ``python -m yarn_adapt.sim.native`` rebuilds it in place, with the
comparator's compiled engine, which the same build makes (:mod:`rules.native`).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from yarn_adapt.errors import SettingsError
from yarn_adapt.sim.native_build import (
    COPIES,
    SIMULATOR,
    build_in_place,
    why_not_usable,
)

ENGINE_VARIABLE = "YARN_ADAPT_SIM_ENGINE"
CHOICES = ("auto", "python", "native")
SIM_DIR = Path(__file__).resolve().parent
REPO = SIM_DIR.parent.parent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Core:
    """The modules of one simulator core."""

    kind: str  # "python" or "native"
    capacity: ModuleType
    fair: ModuleType
    engine: ModuleType


def select_core(choice: str | None = None) -> Core:
    """The core ``choice`` (else ``$YARN_ADAPT_SIM_ENGINE``, else ``auto``) names."""
    if runs_compiled(choice, ENGINE_VARIABLE, "simulator", lambda: _native_core()[1]):
        native = _native_core()[0]
        assert native is not None
        return native
    return python_core()


def runs_compiled(choice: str | None, variable: str, name: str, why_not: Callable[[], str]) -> bool:
    """Whether the compiled copy of the ``name`` (``simulator``, ``comparator``) runs:
    ``choice``, else ``$variable``, else ``auto`` says (see the module's docstring);
    ``why_not``: why the copy cannot run (``""``: it can)."""
    wanted = (choice or os.environ.get(variable) or "auto").strip().lower()
    if wanted not in CHOICES:
        raise SettingsError(
            f"{name} engine {wanted!r}: use one of {', '.join(CHOICES)} ({variable})"
        )
    if wanted == "python":
        return False
    reason = why_not()
    if not reason:
        return True
    if wanted == "native":
        raise SettingsError(f"the {name}'s compiled code cannot run: {reason}")
    _note_fallback(name, reason)
    return False


@functools.cache
def python_core() -> Core:
    return _core("python", "yarn_adapt.sim")


def native_available() -> bool:
    return _native_core()[0] is not None


@functools.cache
def _native_core() -> tuple[Core | None, str]:
    why_not = why_not_usable(SIMULATOR, REPO)
    if why_not:
        return None, why_not
    return _core("native", SIMULATOR.native_package()), ""


def _core(kind: str, package: str) -> Core:
    def load(name: str) -> ModuleType:
        return importlib.import_module(f"{package}.{name}")

    return Core(kind, load("capacity"), load("fair"), load("engine"))


@functools.cache
def _note_fallback(name: str, reason: str) -> None:
    log.info("%s: pure Python (%s)", name, reason)


def main(argv: list[str]) -> int:
    """``python -m yarn_adapt.sim.native [--if-stale]``: compile the core in place
    (a source checkout; ``--if-stale``: only if the built one is missing or older
    than the sources), then say which core runs."""
    if "--if-stale" in argv and not any(why_not_usable(copy, REPO) for copy in COPIES):
        return 0
    if not (REPO / "setup.py").exists():
        print(f"yarn-adapt: no setup.py beside {SIM_DIR.parent}; reinstall the package instead")
        return 2
    build_in_place(REPO)
    importlib.invalidate_caches()
    _native_core.cache_clear()
    failed = 0
    for copy in COPIES:
        why_not = why_not_usable(copy, REPO)
        print(f"compiled copy of {copy.what}: " + (f"not used: {why_not}" if why_not else "ready"))
        failed += bool(why_not)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
