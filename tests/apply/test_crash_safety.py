"""The crash harness, short form (the full form is ``yarn-adapt bench crash-safety``):
the service's apply runs in a child process that is SIGKILLed right after each
journal step (and once at a random moment), against the real mini YARN; the
service's recovery then runs as ``serve`` does at start, and the file (or the RM's
scheduler-conf), the RM's ``/scheduler`` and the store must agree on one of the two
configurations, with the true outcome recorded.

Rows of the tables below that reproduce the issue's bug list:

- ``("normal", ACTIVATED)`` on every path: a crash after the refresh and before the
  verification was recorded "rolled back" while the new configuration ran;
- ``("lagging", RESTORED)``: the backup written back but the crash came before the
  refresh, so the RM kept the refused configuration;
- ``("normal", PLANNED)`` / ``BACKED_UP``: a crash before anything was written left
  the proposal ``failed`` instead of ``approved``.
"""

from __future__ import annotations

import random
from pathlib import Path

from yarn_adapt.bench.crash_harness import PATHS, CrashHarness, Trial, TrialResult
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.yarn.apply import ApplyStep

S = ApplyStep
OLD_APPROVED = ("old", "approved")
OLD_FAILED = ("old", "failed")
NEW_APPLIED = ("new", "applied")

FILE_REFRESH = {
    ("normal", S.PLANNED): OLD_APPROVED,
    ("normal", S.BACKED_UP): OLD_APPROVED,
    ("normal", S.WRITTEN): NEW_APPLIED,
    ("normal", S.ACTIVATED): NEW_APPLIED,
    ("normal", S.VERIFIED): NEW_APPLIED,
    ("refused", S.ROLLING_BACK): OLD_FAILED,
    ("lagging", S.ROLLING_BACK): OLD_FAILED,
    ("lagging", S.RESTORED): OLD_FAILED,
    ("lagging", S.ROLLED_BACK): OLD_FAILED,
}
MUTATION = {
    ("normal", S.PLANNED): OLD_APPROVED,
    ("normal", S.ACTIVATED): NEW_APPLIED,
    ("normal", S.VERIFIED): NEW_APPLIED,
    ("refused", S.FAILED): OLD_FAILED,
    ("lagging", S.ROLLING_BACK): OLD_FAILED,
    ("lagging", S.RESTORED): OLD_FAILED,
    ("lagging", S.ROLLED_BACK): OLD_FAILED,
}
FAIR_RELOAD = {
    ("normal", S.PLANNED): OLD_APPROVED,
    ("normal", S.BACKED_UP): OLD_APPROVED,
    ("normal", S.WRITTEN): NEW_APPLIED,
    ("normal", S.ACTIVATED): NEW_APPLIED,
    ("normal", S.VERIFIED): NEW_APPLIED,
    ("short", S.ROLLING_BACK): OLD_FAILED,
    ("short", S.RESTORED): OLD_FAILED,
    ("short", S.ROLLED_BACK): OLD_FAILED,
}


def run_short_form(
    path: str,
    cluster: MiniCluster,
    workdir: Path,
    expected: dict[tuple[str, ApplyStep], tuple[str, str]],
) -> list[TrialResult]:
    harness = CrashHarness(PATHS[path], cluster, workdir, random.Random(8))
    results = []
    for (kind, step), (truth, outcome) in expected.items():
        result = harness.run(Trial(kind, kill_after=step))
        assert result.consistent, f"{path} {kind} killed after {step}: {result.problems}"
        assert result.by_step == f"after:{step}"
        assert (result.truth, result.outcome) == (truth, outcome), (kind, step, result)
        results.append(result)
    randomly = harness.run(harness.random_trial())
    assert randomly.consistent, f"{path} random kill ({randomly.by_step}): {randomly.problems}"
    return [*results, randomly]


def test_file_and_refresh_survive_a_kill_at_every_journal_step(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    covered = run_short_form("file+refresh", capacity_cluster, tmp_path, FILE_REFRESH)
    steps = {r.by_step for r in covered}
    assert {f"after:{step}" for _, step in PATHS["file+refresh"].kill_points} <= steps


def test_the_mutation_api_survives_a_kill_at_every_journal_step(
    capacity_memory_cluster: MiniCluster, tmp_path: Path
) -> None:
    covered = run_short_form("mutation", capacity_memory_cluster, tmp_path, MUTATION)
    steps = {r.by_step for r in covered}
    assert {f"after:{step}" for _, step in PATHS["mutation"].kill_points} <= steps


def test_the_fair_reload_survives_a_kill_at_every_journal_step(
    fair_cluster: MiniCluster, tmp_path: Path
) -> None:
    covered = run_short_form("fair-reload", fair_cluster, tmp_path, FAIR_RELOAD)
    steps = {r.by_step for r in covered}
    assert {f"after:{step}" for _, step in PATHS["fair-reload"].kill_points} <= steps
