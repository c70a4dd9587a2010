"""``yarn-adapt bench crash-safety``: kill -9 an apply at every journal step and at
random moments, against a real mini YARN, and count the trials where recovery left
the scheduler file (or scheduler-conf), the RM's ``/scheduler`` and the store in
disagreement (issue 8). The trial itself is :mod:`yarn_adapt.bench.crash_harness`.

Per applier path (``file+refresh``: capacity-scheduler.xml + ``rmadmin
-refreshQueues``; ``mutation``: ``PUT /scheduler-conf`` on a memory store;
``fair-reload``: fair-scheduler.xml and the scheduler's own reload), ``--set
trials=N`` trials (default 100; ``--quick``: every kill point once plus two random
kills): half of them kill right after each journal step in turn, across the trial
kinds (a normal apply; the RM refusing; a lagging report; a Fair reload slower than
the verify timeout), the other half after a random delay drawn up to a little more
than the apply's measured length. ``--set paths=file+refresh,mutation`` picks paths,
``--seed`` the random kills; ``--set keep=DIR`` keeps the databases, journals and
child logs there.

Figures (last line): ``trials``, ``inconsistent`` (must be 0), ``by_step`` (where
the kills landed: ``after:<step>`` for the deterministic ones, ``random:<last step
journaled>`` or ``random:finished``), per path the trial count, inconsistencies,
outcomes (the proposal's final state), which configuration ran at the end, and trial
times (mean, median, worst), and ``wall_s``. Each cluster's start is outside the
timings. Every inconsistent trial is listed with its reasons.
"""

from __future__ import annotations

import logging
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.bench.crash_harness import PATHS, CrashHarness, Trial, TrialResult, summarize
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, free_text, whole, words

log = logging.getLogger(__name__)
DEFAULT_TRIALS = 100
QUICK_RANDOM = 2


class Knobs:
    trials = whole("trials", DEFAULT_TRIALS, low=1)
    paths = words("paths", tuple(PATHS), tuple(PATHS))
    keep = free_text("keep", None)


SET_KEYS = SetSpec.of("crash-safety", Knobs)


@benchmark(
    "crash-safety",
    "SIGKILL applies at every journal step and at random on a real mini YARN; "
    "count disagreements after recovery",
    SET_KEYS,
)
def crash_safety(options: BenchOptions) -> BenchResult:
    values = SET_KEYS.read(options.extra, quick=options.quick)
    trials = None if options.quick else values[Knobs.trials]
    rng = random.Random(options.seed)
    results: list[TrialResult] = []
    wall = 0.0
    with _workdir(values[Knobs.keep]) as workdir, _quiet_recovery_logs():
        for name in values[Knobs.paths]:
            with MiniCluster(PATHS[name].cluster) as cluster:
                harness = CrashHarness(PATHS[name], cluster, workdir / name, rng)
                began = time.monotonic()
                total = trial_count(harness, trials)
                for number, trial in enumerate(plan(harness, trials), 1):
                    result = harness.run(trial)  # random delays adapt to the trials so far
                    _report(result)
                    results.append(result)
                    bad = sum(1 for r in results if not r.consistent)
                    report(f"crash-safety {name} trial", number, total, f"{bad} inconsistent")
                wall += time.monotonic() - began
    figures = summarize(results, wall)
    figures["failures"] = [_failure(r) for r in results if not r.consistent]
    return BenchResult(figures, _rows(results))


def plan(harness: CrashHarness, trials: int | None) -> Iterator[Trial]:
    """Deterministic kills at every (kind, step) in turn, alternating with random
    ones: ``trials`` in all (None, quick: each kill point once, then two random)."""
    points = harness.deterministic_trials()
    if trials is None:
        yield from points
        for _ in range(QUICK_RANDOM):
            yield harness.random_trial()
        return
    for number in range(trials):
        if number % 2 == 0:
            yield points[(number // 2) % len(points)]
        else:
            yield harness.random_trial()


def trial_count(harness: CrashHarness, trials: int | None) -> int:
    if trials is None:
        return len(harness.deterministic_trials()) + QUICK_RANDOM
    return trials


@contextmanager
def _workdir(keep: str | None) -> Iterator[Path]:
    if keep:
        path = Path(keep).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="yarn-adapt-crash-") as directory:
        yield Path(directory)


@contextmanager
def _quiet_recovery_logs() -> Iterator[None]:
    """Recovery logs every settled apply as a warning: hundreds of lines here."""
    logger = logging.getLogger("yarn_adapt.service.loop.reconcile")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _report(result: TrialResult) -> None:
    verdict = "ok" if result.consistent else "INCONSISTENT: " + "; ".join(result.problems)
    log.info(
        "%s %s %s -> %s (%s) %.1f s %s",
        result.path, result.kind, result.by_step, result.truth, result.outcome,
        result.seconds, verdict,
    )  # fmt: skip


def _failure(result: TrialResult) -> dict[str, object]:
    return {
        "path": result.path,
        "kind": result.kind,
        "by_step": result.by_step,
        "problems": list(result.problems),
    }


def _rows(results: list[TrialResult]) -> list[dict[str, object]]:
    """One row per path, kind and kill point: trials, inconsistencies, outcomes."""
    counts: dict[tuple[str, str, str], dict[str, int]] = {}
    for result in results:
        row = counts.setdefault((result.path, result.kind, result.by_step), {})
        row["trials"] = row.get("trials", 0) + 1
        row["inconsistent"] = row.get("inconsistent", 0) + (0 if result.consistent else 1)
        row[result.outcome] = row.get(result.outcome, 0) + 1
    return [
        {"path": path, "kind": kind, "kill": kill, **counts[(path, kind, kill)]}
        for path, kind, kill in sorted(counts)
    ]
