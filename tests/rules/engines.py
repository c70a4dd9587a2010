"""Which comparator engines a test runs on: the Python one, and the compiled copy
(:mod:`rules.native`) where it is built -- always in CI, where a missing compiled
engine fails the tests that ask for it."""

from __future__ import annotations

import os

import pytest

from rules import native


def engines() -> list[str]:
    built = not native.compiled_why_not() or os.environ.get("CI", "").lower() == "true"
    return ["python", "native"] if built else ["python"]


@pytest.fixture(params=engines())
def comparator_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test's comparators on each engine in turn."""
    monkeypatch.setenv(native.ENGINE_VARIABLE, request.param)
    return str(request.param)
