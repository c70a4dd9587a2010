"""Each latency-critical application's learned demand, with its bounds and the rounds
behind it, in ``/api/guard``, ``yarn-adapt guard status`` and on the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.colocation.factories import qos, risk
from tests.colocation.test_edges import FixedRisk, rm_node
from tests.service.factories import TOKEN, settings_for
from yarn_adapt.cli.guard import status_lines
from yarn_adapt.colocation.demand import ObservedUsageDemand
from yarn_adapt.colocation.lra import LearnedLraDemand, NodeUtilizationUsage
from yarn_adapt.colocation.model import RiskReading
from yarn_adapt.colocation.observe import GuardObserver
from yarn_adapt.demand.lra import LraDemandLearner, LraRound, LraSettings, LraSpec
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.service import Service
from yarn_adapt.service.web.app import create_app


class _NoProposer:
    def propose(self, observed: object, frozen: frozenset[str]) -> None:
        return None


def provider(rounds: int) -> LearnedLraDemand:
    """``shop`` with ``rounds`` feedback rounds; ``ads`` has no latency target."""
    specs = [LraSpec("shop", ("frontend",), target_ms=20.0), LraSpec("ads", ("banner",))]
    learner = LraDemandLearner(specs, LraSettings(min_requests=10))
    for step in range(rounds):
        requests = 3000 + 60 * step
        learner.observe(LraRound("shop", 60.0, requests, requests, 4.0, {"a:1": 1.0},
                                 {"a:1": 500.0 + step}))  # fmt: skip
    usage = NodeUtilizationUsage({"shop": ["frontend"], "ads": ["banner"]})
    demand = LearnedLraDemand(learner, usage, memory=usage, fallback=ObservedUsageDemand(),
                              min_rounds=5)  # fmt: skip
    demand.snapshot = learner.snapshot(0)
    demand.memory_snapshot = learner.memory_snapshot(0)
    return demand


def _service(tmp_path: Path, rounds: int) -> Service:
    colocation = {"enabled": True, "qos_targets": ["frontend=20"]}
    settings = settings_for(tmp_path, yarn={"rm": ["http://127.0.0.1:1"]},
                            scheduler={"via": "mutation"}, colocation=colocation)  # fmt: skip
    service = Service.build(settings, YarnBackend(settings), _NoProposer(), token=TOKEN)
    assert service.guard is not None
    reading = RiskReading(risk({}, paths={("frontend", "a:1"): 4.0}), (qos(19.0, 20.0, ["a:1"]),))
    guard = service.guard.guard
    guard.observer = GuardObserver(FixedRisk(reading), provider(rounds))
    guard.run_round([rm_node("a:1")], 1)
    return service


def learned(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {app["application"]: app for app in status["learned_demand"]}


def test_the_status_shows_each_applications_learned_demand_bounds_and_rounds(
    tmp_path: Path,
) -> None:
    service = _service(tmp_path, rounds=6)
    try:
        assert service.guard is not None
        status = service.guard.status()
        apps = learned(status)
        shop, ads = apps["shop"], apps["ads"]
        assert (shop["rounds"], shop["memory_samples"], shop["min_rounds"]) == (6, 6, 5)
        assert shop["cpu_used"] == "learned" and shop["memory_used"] == "learned"
        cpu, memory = shop["cpu"], shop["memory"]
        assert cpu["source"] == "learned" and cpu["load_rps"] > 50.0
        assert cpu["lower_vcores"] <= cpu["estimate_vcores"] <= cpu["upper_vcores"]
        assert memory["upper_mb"] >= 505.0  # at least the largest working set held
        assert ads["cpu"] is None and ads["cpu_used"] == "observed"
        assert ads["cpu_short"] == "no latency target, nothing to learn"
        lines = status_lines(status)
        assert any(line.startswith("learned demand shop (6 rounds, 5 wanted): ") and
                   f"bound {cpu['upper_vcores']:.2f} at " in line and
                   f"bound {memory['upper_mb']:.0f} MB (6 samples), in use" in line
                   for line in lines)  # fmt: skip
        assert any(line.startswith("learned demand ads (0 rounds, 5 wanted): no CPU demand yet,"
                                   " observed usage in use meanwhile (no latency target")
                   for line in lines)  # fmt: skip
        page = create_app(service).test_client().get("/").get_data(as_text=True)
        assert 'id="guard-learned"' in page and 'data-application="shop"' in page
        assert "6 of 5" in page and "observed <span" in page
    finally:
        service.close()


def test_a_learner_short_of_rounds_says_observed_usage_is_kept_meanwhile(tmp_path: Path) -> None:
    service = _service(tmp_path, rounds=2)
    try:
        assert service.guard is not None
        shop = learned(service.guard.status())["shop"]
        assert shop["rounds"] == 2 and shop["cpu_used"] == "observed"
        assert shop["cpu_short"] == "learner has 2 of 5 rounds"
        assert any("observed usage in use meanwhile (learner has 2 of 5 rounds)" in line
                   for line in status_lines(service.guard.status()))  # fmt: skip
    finally:
        service.close()
