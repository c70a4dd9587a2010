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
import logging
import os
from pathlib import Path
from types import ModuleType

from yarn_adapt.errors import SettingsError
from yarn_adapt.sim.native_build import COMPARATOR, why_not_usable

ENGINE_VARIABLE = "YARN_ADAPT_COMPARATOR_ENGINE"
CHOICES = ("auto", "python", "native")
REPO = Path(__file__).resolve().parent.parent

log = logging.getLogger(__name__)


def evaluation_module(choice: str | None = None) -> ModuleType:
    """The :mod:`rules.evaluation` of the engine ``choice`` (else
    ``$YARN_ADAPT_COMPARATOR_ENGINE``, else ``auto``) names."""
    wanted = (choice or os.environ.get(ENGINE_VARIABLE) or "auto").strip().lower()
    if wanted not in CHOICES:
        raise SettingsError(
            f"comparator engine {wanted!r}: use one of {', '.join(CHOICES)} ({ENGINE_VARIABLE})"
        )
    if wanted == "python":
        return importlib.import_module("rules.evaluation")
    why_not = compiled_why_not()
    if not why_not:
        return importlib.import_module(f"{COMPARATOR.native_package()}.evaluation")
    if wanted == "native":
        raise SettingsError(f"the comparator's compiled engine cannot run: {why_not}")
    _note_fallback(why_not)
    return importlib.import_module("rules.evaluation")


@functools.cache
def compiled_why_not() -> str:
    """Why the compiled engine cannot run (``""``: it can)."""
    return why_not_usable(COMPARATOR, REPO)


@functools.cache
def _note_fallback(reason: str) -> None:
    log.info("comparator: pure-Python engine (%s)", reason)
