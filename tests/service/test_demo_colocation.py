"""The demo's co-location half: the guard (the service's own, in auto) lowers a
service's node when the application's slack falls, the simulated agents report, the
summary's keys follow docs/CLI.md's unit rule, and the same seed gives the same run;
``colocation=False`` is the batch-only demo. The tuner is stood in for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.service.factories import FixedProposer
from yarn_adapt.cli.conventions import json_key_problems
from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.service.demo.replay import DemoOptions, build_demo, summary
from yarn_adapt.service.demo.simcoloc import DemoColocation
from yarn_adapt.service.service import Service

KEYS = {"lc_services", "lc_requests", "lc_p95_ms", "lc_target_ms", "lc_slo_met_ratio",
        "lc_nodes_batch_vcore_s", "lc_nodes_capacity_vcore_s", "guard_lowered_nodes",
        "guard_node_updates"}  # fmt: skip


def one_round(tmp_path: Path, **options: Any) -> Service:
    service = build_demo(DemoOptions(state_dir=tmp_path, serve=False, **options), FixedProposer())
    service.loop.run_round()  # 900 simulated s: 15 guard cycles
    return service


def test_the_guard_lowers_a_services_node_when_its_slack_falls(tmp_path: Path) -> None:
    service = one_round(tmp_path)
    try:
        assert service.guard is not None and service.guard.guard.mode is GuardMode.AUTO
        beside = service.backend.beside  # type: ignore[attr-defined]
        assert isinstance(beside, DemoColocation)
        rows = [row for node in beside.service_nodes for row in service.guard.store.history(node)]
        lowered = [row for row in rows if row["action"] == "lower" and row["result"] == "done"]
        assert lowered, [dict(row) for row in rows]
        for row in lowered:  # each because the application's slack fell below the watermark
            assert row["state"] in ("throttle", "emergency")
            assert (row["target_vcores"], row["target_mb"]) < (row["capacity_vcores"],
                                                               row["capacity_mb"])  # fmt: skip
            paths = json.loads(row["paths"])
            assert any(p["application"] == "frontend" and p["slack_ratio"] < 0.1 for p in paths)
        status = service.guard.status()
        assert [a["application"] for a in status["applications"]] == ["frontend"]
        assert set(status["agents"]) == {n.id for n in beside.cluster.cluster.nodes}
        assert any(line.startswith("squeeze:") for line in status["agents"]["node-0002"]["lines"])
        assert beside.rm.updates >= 3
        found = summary(service, 1, beside.cluster.elapsed_s)
        assert set(found) >= KEYS and json_key_problems(found) == []
        assert found["lc_target_ms"] == 25.0 and found["guard_lowered_nodes"] >= 1
        assert found["lc_requests"] == 900 * 5
        assert 0 < found["lc_nodes_batch_vcore_s"] < found["lc_nodes_capacity_vcore_s"]
    finally:
        service.close()
    # closing gives every node back
    assert all(n.total == n_spec.resources for n, n_spec in
               zip(beside.rm.nodes(), beside.cluster.cluster.nodes, strict=True))  # fmt: skip


def test_the_same_seed_gives_the_same_run(tmp_path: Path) -> None:
    figures = []
    for run in ("a", "b"):
        service = one_round(tmp_path / run)
        figures.append(summary(service, 1, 900.0))
        service.close()
    assert figures[0] == figures[1]


def test_without_colocation_the_demo_is_batch_only(tmp_path: Path) -> None:
    service = one_round(tmp_path, colocation=False)
    try:
        assert service.guard is None
        assert service.backend.beside is None  # type: ignore[attr-defined]
        assert not KEYS & set(summary(service, 1, 900.0))
    finally:
        service.close()
