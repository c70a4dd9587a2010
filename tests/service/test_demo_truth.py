"""The demo tells the truth about its run (issue 14 item 7): a cluster sized from
the trace's demand, the realised latency of the whole run beside the same trace
replayed under the starting configuration, and each proposal's prediction beside
what its own jobs realised."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.service.factories import FixedProposer
from yarn_adapt.cli.conventions import json_key_problems
from yarn_adapt.model import JobSpec, Workload
from yarn_adapt.service.demo.replay import (
    DemoOptions,
    RecordingProposer,
    build_demo,
    note_round,
    run_summary,
    sized_nodes,
    split_in_half,
)
from yarn_adapt.service.demo.simcluster import SimulatedCluster
from yarn_adapt.service.service import Service
from yarn_adapt.workload import load_trace
from yarn_adapt.workload.bundled import bundled_trace
from yarn_adapt.workload.queues import spread_over


def _replay() -> tuple[JobSpec, ...]:
    workload = load_trace(bundled_trace(), seed=0, queues=spread_over(["q1", "q2"]))
    return split_in_half(workload)[1].jobs


def test_the_cluster_is_sized_from_the_trace_demand_not_a_constant() -> None:
    jobs = _replay()
    window = 4 * 3600.0
    nodes = sized_nodes(Workload(jobs), window, 8)
    first = min(j.submit_s for j in jobs)
    work = sum(j.total_task_seconds for j in jobs if j.submit_s <= first + window)
    # enough containers for 70 % busy, and not a node more
    assert work / (nodes * 8 * window) <= 0.70 < work / ((nodes - 1) * 8 * window)
    doubled = Workload(jobs + tuple(replace(j, id=f"{j.id}-again") for j in jobs))
    assert sized_nodes(doubled, window, 8) in range(2 * nodes - 1, 2 * nodes + 2)
    assert sized_nodes(Workload(jobs), window, 8, target=0.35) >= 2 * nodes - 1


STEP_S = 900.0  # two of the replay's first jobs are in progress at its end


def _run(tmp_path: Path, proposer: FixedProposer, rounds: int) -> tuple[Service, dict[str, Any]]:
    options = DemoOptions(state_dir=tmp_path, serve=False, step_s=STEP_S, rounds=rounds)
    service = build_demo(options, proposer)
    for _ in range(rounds):
        note_round(service, service.loop.run_round())
    return service, run_summary(service, options, rounds)


def test_without_a_proposal_the_run_realises_what_the_starting_configuration_does(
    tmp_path: Path,
) -> None:
    service, found = _run(tmp_path, FixedProposer(triggered=False), 2)
    assert found["proposals"] == 0 and found["prediction_error_median_ratio"] is None
    assert found["realised_jobs"] > 0
    assert found["realised_latency_tuned_s"] == found["realised_latency_static_s"] > 0
    assert found["open_jobs_tuned"] == found["open_jobs_static"]
    service.close()


def test_each_proposal_is_judged_on_the_jobs_it_predicted_for(tmp_path: Path) -> None:
    service, found = _run(tmp_path, FixedProposer(after_s=80.0), 4)
    proposer = service.loop.proposer
    assert isinstance(proposer, RecordingProposer)
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    assert isinstance(cluster, SimulatedCluster)
    first = proposer.by_proposal[1]
    assert first.jobs and first.time_s == cluster.started_s + STEP_S
    assert all(j in cluster.ended for j in first.jobs)
    realised = statistics.fmean(
        cluster.ended[j].finish_s - cluster.ended[j].submit_s  # type: ignore[operator]
        for j in first.jobs
    )
    errors = found["prediction_error_ratios"]
    assert errors[0] == round(abs(80.0 - realised) / realised, 3)
    assert found["prediction_error_median_ratio"] == statistics.median(errors)
    assert found["nodes"] >= 1 and 0 < found["utilisation_ratio"] <= 1.0
    assert json_key_problems(found) == []  # docs/CLI.md's rule for JSON keys
    # the stand-in proposer states no range: nothing to cover, said as such
    assert (found["ranges_checked"], found["interval_coverage"]) == (0, None)
    assert service.store.run_summary() is not None  # the page's copy
    service.close()
