"""``yarn-adapt demo`` as an operator meets it (issue 29, item 5): a cluster sized from
the trace alone, an honest ETA that counts the judging after the last round, progress
through that judging, SIGTERM handled like SIGINT there too, and the review token
described as what it is. The tuner is stood in for (the real one: test_demo.py's
end-to-end run and docs/demo.md's figures)."""

from __future__ import annotations

import io
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.factories import FixedProposer
from yarn_adapt import progress
from yarn_adapt.cli.demo import ETA_AFTER_ROUNDS, DemoProgress, _run
from yarn_adapt.service.demo.replay import DemoOptions, build_demo


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    progress.configure(enabled=True, stream=stream)
    yield stream
    progress.configure(enabled=True)


def test_the_cluster_is_sized_from_the_trace_alone(tmp_path: Path) -> None:
    sizes = set()
    for rounds in (1, 8, 20):
        options = DemoOptions(state_dir=tmp_path / str(rounds), serve=False, rounds=rounds)
        service = build_demo(options, FixedProposer(triggered=False))
        sizes.add(len(service.backend.cluster.cluster.nodes))  # type: ignore[attr-defined]
        service.close()
    assert len(sizes) == 1, sizes


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_eta_waits_for_three_rounds_and_counts_the_judging() -> None:
    clock = Clock()
    bar = DemoProgress(10)
    bar.clock, bar.started = clock, 0.0
    clock.now = 2.0
    bar.simulated_wall_s = 0.5
    assert bar.line(1, clock.now).endswith(f"ETA after {ETA_AFTER_ROUNDS} rounds")
    clock.now, bar.simulated_wall_s = 30.0, 6.0
    # 3 rounds in 30 s: 70 s for the other 7, and the replay of all 10 segments
    # after them costs what simulating them did (2 s each): 20 s
    assert bar.line(3, clock.now) == (
        "yarn-adapt: demo round 3/10 · 30 s elapsed · ETA 1 m 30 s (then judging the run)"
    )
    assert bar.line(10, 60.0).endswith("judging the run next")


def _options(tmp_path: Path) -> DemoOptions:
    return DemoOptions(
        state_dir=tmp_path, serve=False, step_s=900.0, rounds=3, interval_s=0.01, port=0
    )


def test_the_judging_shows_its_progress(tmp_path: Path, lines: io.StringIO) -> None:
    options = _options(tmp_path)
    service = build_demo(options, FixedProposer())
    found = _run(
        service, options, 3, keep_serving=False, announce=lambda _: None,
        stop_event=threading.Event(),
    )  # fmt: skip
    service.close()
    assert found["complete"] is True and found["rounds"] == 3
    judging = [line for line in lines.getvalue().splitlines() if "judging the run" in line]
    assert judging[-1].startswith(
        "yarn-adapt: demo judging the run: the starting configuration replayed 3/3"
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_judging_ends_it_with_what_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """SIGTERM is SIGINT: either, arriving while the run is judged, stops the replay;
    the summary then says it is incomplete (before, SIGTERM killed the process there
    and nothing was printed)."""
    options = _options(tmp_path)
    service = build_demo(options, FixedProposer())
    replayed = DemoProgress.replayed

    def and_signal(self: DemoProgress, done: int, total: int) -> None:
        replayed(self, done, total)
        if done == 1:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(DemoProgress, "replayed", and_signal)
    found = _run(service, options, 3, keep_serving=False, announce=lambda _: None)
    service.close()
    assert found["complete"] is False
    assert "realised_latency_static_s" not in found and found["rounds"] == 3
    assert "interval_coverage" in found  # what could be judged is there
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are given back
