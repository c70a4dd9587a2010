"""The compiled core (mypyc, :mod:`yarn_adapt.sim.native`) gives exactly what the
Python core gives, and which core runs is chosen safely.

The compiled core is built by ``pip install`` (or ``python -m
yarn_adapt.sim.native`` in a checkout). Where it is not built these tests run the
Python core only, except in CI, where a missing compiled core fails them."""

from __future__ import annotations

import os

import pytest

from tests.sim.golden import SCENARIOS, fingerprint
from yarn_adapt.errors import SettingsError
from yarn_adapt.sim import native, native_build
from yarn_adapt.sim.native import native_available, select_core

COMPARED = [s for s in SCENARIOS if s.quick]


def engines() -> list[str]:
    """The cores to run tests on: the Python one, and the compiled one where it is
    built (always in CI)."""
    built = native_available() or os.environ.get("CI", "").lower() == "true"
    return ["python", "native"] if built else ["python"]


@pytest.mark.skipif("native" not in engines(), reason="compiled core not built")
@pytest.mark.parametrize("scenario", COMPARED[:6], ids=lambda s: s.name)
def test_both_cores_give_the_same_results(scenario: object) -> None:
    python = fingerprint(scenario.run("python"))  # type: ignore[attr-defined]
    compiled = fingerprint(scenario.run("native"))  # type: ignore[attr-defined]
    assert compiled == python


def test_the_python_core_is_always_there() -> None:
    core = select_core("python")
    assert core.kind == "python"
    assert core.engine.__name__ == "yarn_adapt.sim.engine"


@pytest.mark.skipif("native" not in engines(), reason="compiled core not built")
def test_auto_prefers_the_compiled_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.ENGINE_VARIABLE, raising=False)
    core = select_core()
    assert core.kind == "native"
    assert core.engine.__name__ == "yarn_adapt.sim._native.engine"
    assert core.engine.__file__.endswith(".so")


def test_a_compiled_core_built_from_other_sources_is_never_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native_build, "source_digest", lambda copy, repo: "edited since")
    native._native_core.cache_clear()
    try:
        assert select_core("auto").kind == "python"
        with pytest.raises(SettingsError, match=r"cannot run: it (was built from other|is not)"):
            select_core("native")
    finally:
        monkeypatch.undo()
        native._native_core.cache_clear()


@pytest.mark.parametrize("choice", ["fast", ""])
def test_an_unknown_engine_is_a_one_line_settings_error(
    choice: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(native.ENGINE_VARIABLE, "turbo")
    with pytest.raises(SettingsError, match=r"use one of auto, python, native") as caught:
        select_core(choice or None)
    assert "\n" not in str(caught.value)
