"""The demo's wiring (simulated cluster on the bundled trace, recommend mode with
auto-approve, output and summary); the tuner is stood in for here -- the end-to-end
`yarn-adapt demo --once` test runs the real one."""

from __future__ import annotations

from pathlib import Path

from tests.service.factories import FixedProposer
from yarn_adapt.service.demo.replay import DemoOptions, build_demo, describe_round, summary
from yarn_adapt.service.settings import Mode
from yarn_adapt.service.state.records import DecisionKind


def test_the_demo_applies_each_proposal_and_summarises(tmp_path: Path) -> None:
    options = DemoOptions(state_dir=tmp_path, serve=False, step_s=600.0)
    service = build_demo(options, FixedProposer())
    assert service.settings.service.mode is Mode.RECOMMEND
    assert service.settings.service.auto_approve
    report = service.loop.run_round()
    [decision] = report.decisions
    assert decision.kind is DecisionKind.APPLIED, decision.reason
    cluster = service.backend.cluster  # type: ignore[attr-defined]
    assert cluster.clock_s > 0 and cluster.config.find("root.q1").capacity.percent == 70.0
    lines = describe_round(report, service, cluster.elapsed_s)
    assert lines[0] == "round 1 (simulated 0:10:00): done"
    assert any("proposal 1 (applied): predicted mean job latency 1 m 40 s → 1 m 20 s" in line
               for line in lines)  # fmt: skip
    assert any("root.q1 capacity: 50 → 70" in line for line in lines)
    result = summary(service, 1, cluster.elapsed_s)
    assert result["proposals"] == 1 and result["applied"] == 1
    assert (result["predicted_latency_before_s"], result["predicted_latency_after_s"]) == (
        100.0,
        80.0,
    )
    assert (tmp_path / "conf" / "capacity-scheduler.xml").read_text().count("<value>70</value>")
