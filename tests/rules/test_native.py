"""Which comparator engine runs (:mod:`rules.native`): the compiled copy when it is
built from the sources in place, the Python engine otherwise or when asked; the two
give the same estimates (here and in every pinned latency,
tests/rules/test_pinned_latencies.py)."""

from __future__ import annotations

import pytest

from rules import native
from rules.comparator import Comparator
from tests.rules.engines import engines
from tests.rules.factories import capacity, containers, fair
from tests.rules.pinned_scenarios import ten_jobs
from yarn_adapt.errors import SettingsError
from yarn_adapt.sim import native_build


def test_the_python_engine_is_always_there() -> None:
    assert native.evaluation_module("python").__name__ == "rules.evaluation"


@pytest.mark.skipif("native" not in engines(), reason="compiled engine not built")
def test_auto_prefers_the_compiled_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.ENGINE_VARIABLE, raising=False)
    module = native.evaluation_module()
    assert module.__name__ == "rules._native.evaluation"
    assert module.__file__.endswith(".so")


def test_a_compiled_engine_built_from_other_sources_is_never_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native_build, "source_digest", lambda copy, repo: "edited since")
    native.compiled_why_not.cache_clear()
    try:
        assert native.evaluation_module("auto").__name__ == "rules.evaluation"
        with pytest.raises(SettingsError, match=r"cannot run: it (was built from other|is not)"):
            native.evaluation_module("native")
    finally:
        monkeypatch.undo()
        native.compiled_why_not.cache_clear()


def test_an_unknown_engine_is_a_one_line_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENGINE_VARIABLE, "turbo")
    with pytest.raises(SettingsError, match=r"use one of auto, python, native") as caught:
        native.evaluation_module()
    assert "\n" not in str(caught.value)


@pytest.mark.skipif("native" not in engines(), reason="compiled engine not built")
@pytest.mark.parametrize("kind", ["capacity", "fair"])
def test_both_engines_estimate_alike_and_follow_the_same_paths(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's worth of configurations on one comparator per engine: the same
    estimates, and the same ones answered from kept paths."""
    mix, resources = ten_jobs(4), containers(16, 4)
    answers = {}
    for engine in ("python", "native"):
        monkeypatch.setenv(native.ENGINE_VARIABLE, engine)
        comparator = Comparator(mix, resources)
        estimates = []
        for share in (10.0, 25.0, 30.0, 50.0, 70.0, 90.0, 30.0, 10.0):
            if kind == "capacity":
                config = capacity(("a", share, 100.0), ("b", 100.0 - share, 100.0))
            else:
                config = fair(("a", share), ("b", 100.0 - share))
            estimates.append(comparator.estimate(config))
        answers[engine] = (estimates, comparator.paths_followed)
    python, compiled = answers["python"], answers["native"]
    assert compiled[1] == python[1] > 0
    for ours, theirs in zip(compiled[0], python[0], strict=True):
        assert ours.latencies == theirs.latencies
        assert ours.mean_latency_s == theirs.mean_latency_s
        assert ours.unfinished == theirs.unfinished
