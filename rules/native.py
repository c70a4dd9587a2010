"""Which comparator engine runs: the Python one or its compiled copy (issue 27).

The numeric engine of Algorithm 1 -- :mod:`rules.engine` and the modules it runs
on, up to :mod:`rules.evaluation`, the comparator's entry point -- is typed Python.
The build that compiles the simulator's core (``setup.py``,
:mod:`yarn_adapt.sim.native_build`) compiles a copy of it with mypyc into
``rules._native``; the copy is the same source with its imports naming the copies,
so both give the same estimates (tests/rules/test_native.py).

``YARN_ADAPT_COMPARATOR_ENGINE`` chooses, as ``YARN_ADAPT_SIM_ENGINE`` does for the
simulator: ``auto`` (default; the compiled copy when it was built from the sources
now in place), ``python``, or ``native`` (a :class:`SettingsError` saying why it
cannot run, when it cannot).
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from types import ModuleType

from yarn_adapt.sim.native import runs_compiled
from yarn_adapt.sim.native_build import COMPARATOR, why_not_usable

ENGINE_VARIABLE = "YARN_ADAPT_COMPARATOR_ENGINE"
REPO = Path(__file__).resolve().parent.parent


def evaluation_module(choice: str | None = None) -> ModuleType:
    """The :mod:`rules.evaluation` of the engine ``choice`` (else
    ``$YARN_ADAPT_COMPARATOR_ENGINE``, else ``auto``) names."""
    if runs_compiled(choice, ENGINE_VARIABLE, "comparator", compiled_why_not):
        return importlib.import_module(f"{COMPARATOR.native_package()}.evaluation")
    return importlib.import_module("rules.evaluation")


@functools.cache
def compiled_why_not() -> str:
    """Why the compiled engine cannot run (``""``: it can)."""
    return why_not_usable(COMPARATOR, REPO)
