"""How the service builds the guard from ``[colocation]``: which demand, which
actuator, which mode; bad settings stop it at start with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.factories import TOKEN, settings_for
from yarn_adapt.colocation.actuate import RmNodeTotals
from yarn_adapt.colocation.demand import NoDemand, ObservedUsageDemand
from yarn_adapt.colocation.lra import LearnedLraDemand
from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.colocation.queuecap import QueueCap
from yarn_adapt.demand.model import Demand, DemandSnapshot
from yarn_adapt.errors import SettingsError
from yarn_adapt.service.backend import Observed, YarnBackend
from yarn_adapt.service.service import Service
from yarn_adapt.service.settings import settings_from_mapping
from yarn_adapt.service.state.records import Suggestion


class WithSnapshot:
    """A proposer as the service sees it, carrying the learners' snapshot."""

    snapshot = DemandSnapshot(0, "vcores", (Demand("root.shop", 10.0, 1.0, 0.5, 2.0),))

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        return None


def _service(tmp_path: Path, **colocation: object) -> Service:
    tables: dict[str, dict[str, object]] = {
        "yarn": {"rm": ["http://127.0.0.1:1"]},
        "scheduler": {"via": "mutation"},
        "colocation": dict(colocation),
    }
    settings = settings_for(tmp_path, **tables)
    return Service.build(settings, YarnBackend(settings), WithSnapshot(), token=TOKEN)


def test_an_enabled_guard_in_auto_acts_on_node_totals_with_learned_demand_by_default(
    tmp_path: Path,
) -> None:
    service = _service(tmp_path, enabled=True, mode="auto", period_s=2.0,
                       qos_targets=["frontend=100"])  # fmt: skip
    try:
        assert service.guard is not None
        guard = service.guard.guard
        assert guard.mode is GuardMode.AUTO
        assert isinstance(guard.actuator, RmNodeTotals)
        demand = guard.observer.demand
        assert isinstance(demand, LearnedLraDemand)  # the default: learned, observed meanwhile
        assert isinstance(demand.fallback, ObservedUsageDemand) and demand.min_rounds == 5
        assert demand.memory is demand.usage and demand.reserve_settings.share == "least"
        (spec,) = demand.learner.specs  # no applications: each targeted service is one
        assert (spec.name, spec.services, spec.target_ms) == ("frontend", ("frontend",), 100.0)
        assert guard.settings.policy == "slack" and guard.reclaim_ttl_s == 6.0  # 3 periods
        loop = service.guard.loop
        assert loop is not None and loop.period_s == 2.0 and loop.nodes.max_age_s == 2.0
        backend = service.backend
        assert isinstance(backend, YarnBackend) and backend.node_list == loop.nodes.nodes
    finally:
        service.close()


def test_the_mirror_is_built_on_the_named_file_with_its_refresh_command(tmp_path: Path) -> None:
    mirrored = tmp_path / "hadoop" / "dynamic-resources.xml"
    refresh = ["/opt/hadoop/bin/yarn", "rmadmin", "-refreshNodesResources"]
    service = _service(tmp_path, enabled=True, dynamic_resources_file=str(mirrored),
                       refresh_nodes_resources_command=refresh)  # fmt: skip
    try:
        assert service.guard is not None
        actuator = service.guard.guard.actuator
        assert isinstance(actuator, RmNodeTotals) and actuator.mirror is not None
        assert actuator.mirror.path == mirrored and actuator.mirror.refresh == tuple(refresh)
        assert actuator.mirror.guard_dir == service.settings.state.state_dir / "guard"
    finally:
        service.close()
    off = _service(tmp_path, enabled=True)
    try:
        assert off.guard is not None
        assert off.guard.guard.actuator.mirror is None  # type: ignore[attr-defined]
    finally:
        off.close()


def test_observed_demand_stays_selectable(tmp_path: Path) -> None:
    service = _service(tmp_path, enabled=True, demand="observed", demand_headroom=0.5)
    try:
        assert service.guard is not None
        demand = service.guard.guard.observer.demand
        assert isinstance(demand, ObservedUsageDemand) and demand.headroom == 0.5
    finally:
        service.close()


def test_a_config_without_any_target_still_builds_and_learns_nothing(tmp_path: Path) -> None:
    service = _service(tmp_path, enabled=True)
    try:
        assert service.guard is not None
        demand = service.guard.guard.observer.demand
        assert isinstance(demand, LearnedLraDemand) and demand.learner.specs == ()
    finally:
        service.close()


def test_a_disabled_guard_is_off_but_still_gives_nodes_back(tmp_path: Path) -> None:
    service = _service(tmp_path, mode="auto", demand="none")
    try:
        assert service.guard is not None and service.guard.guard.mode is GuardMode.OFF
        assert isinstance(service.guard.guard.observer.demand, NoDemand)
    finally:
        service.close()


def test_learned_demand_is_each_applications_own_learner(tmp_path: Path) -> None:
    service = _service(tmp_path, enabled=True, demand="learned",
                       applications=["shop=frontend,pricing", "ads=banner"],
                       qos_targets=["frontend=250"], stated_demand=["ads=0.02"],
                       reserve="recommendation", actuator="queue-cap",
                       batch_queue="root.default")  # fmt: skip
    try:
        assert service.guard is not None
        guard = service.guard.guard
        demand = guard.observer.demand
        assert isinstance(demand, LearnedLraDemand)
        specs = {spec.name: spec for spec in demand.learner.specs}
        assert specs["shop"].services == ("frontend", "pricing")
        assert specs["shop"].target_ms == 250.0 and specs["shop"].stated is None
        assert specs["ads"].target_ms is None and specs["ads"].stated == 0.02
        assert demand.reserve == "recommendation"
        assert isinstance(guard.actuator, QueueCap)
    finally:
        service.close()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"actuator": "queue-cap"}, "must name the batch queue"),
        ({"nu": -0.5}, "[colocation] nu: -0.5 must be a number >= 0"),
        ({"applications": ["shop"]}, "[colocation] applications"),
        ({"mode": "enforce"}, "expected one of off, recommend, auto"),
        (
            {"policy": "rank"},
            "[colocation] policy: expected one of slack, slack-only, toposch-paper",
        ),
        ({"period_s": 0.0}, "[colocation] period_s: 0.0 must be positive"),
        ({"failure_budget": 0}, "[colocation] failure_budget: 0 must be 1 or more"),
        ({"low_slack_ratio": 0.3}, "[colocation] high_slack_ratio: 0.25 must be above"),
        ({"max_step_down_fraction": 0.0}, "[colocation] max_step_down_fraction"),
    ],
)
def test_impossible_settings_are_refused_in_one_line(
    tmp_path: Path, table: dict[str, object], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        settings_from_mapping({"colocation": table}, "x.toml")
    assert message in raised.value.one_line()
    assert "\n" not in raised.value.one_line()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"demand": "stated"}, "[colocation] applications: () must name the latency-critical"),
        ({"demand": "learnt"}, "[colocation] demand: 'learnt' observed, learned, stated or none"),
        ({"share_policy": "fair"},
         "[colocation] share_policy: expected one of least, njc, sw, ew, got 'fair'"),
        ({"learn_min_rounds": 0}, "[colocation] learn_min_rounds: 0 must be 1 or more"),
        ({"demand": "stated", "applications": ["shop=frontend"], "qos_targets": ["frontend=9"]},
         'must state the demand of each application for demand = "stated": shop'),
        ({"stated_demand": ["shop=-1"]}, "[colocation] stated_demand"),
        ({"applications": ["shop=frontend"], "stated_demand": ["cart=0.1"]},
         "names no application of [colocation] applications: cart"),
        ({"reserve": "lower"}, "[colocation] reserve: 'lower' upper or recommendation"),
        ({"qos_targets": ["frontend=100"], "stated_demand": ["cart=0.1"]},
         "names no application of [colocation] applications: cart"),
        ({"learn_confidence": 1.0}, "[colocation] learn_confidence"),
    ],
)  # fmt: skip
def test_impossible_learning_settings_are_refused_in_one_line(
    table: dict[str, object], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        settings_from_mapping({"colocation": table}, "x.toml")
    assert message in raised.value.one_line()
    assert "\n" not in raised.value.one_line()
