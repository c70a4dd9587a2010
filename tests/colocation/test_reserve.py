"""What the guard keeps for the latency-critical services on a node: learned demand
once their learners have enough rounds, observed usage (with the reason) until
then, the learned memory bound, and a Cilantro policy where services share a node
(``colocation/reserve.py``, through ``LearnedLraDemand`` at the end)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.colocation.factories import NOW_S, node
from tests.demand.test_shared import ADS, SHOP
from tracing.model import NodeRisk, RiskSnapshot
from yarn_adapt.colocation.decide import wanted_visible
from yarn_adapt.colocation.demand import ObservedUsageDemand
from yarn_adapt.colocation.lra import LearnedLraDemand, NodeUtilizationUsage
from yarn_adapt.colocation.model import GuardSettings, NodeDemand, RequestTally, RiskReading
from yarn_adapt.colocation.reserve import Part, ReserveSettings, Splits, node_demand
from yarn_adapt.demand.lra import LraDemandLearner, LraSettings, LraSpec
from yarn_adapt.demand.model import Demand, DemandSource
from yarn_adapt.demand.shared import SharePolicy
from yarn_adapt.model import Node, NodeState, NodeUtilization, Resources

OBSERVED = NodeDemand("a:1", 1.5, 800.0, "observed usage outside containers + 25%", 1.2)
CPU = Demand("shop", 100.0, 2.0, 1.0, 3.0, DemandSource.LEARNED, 5)
MEMORY = Demand("shop", 100.0, 600.0, 500.0, 700.0, DemandSource.LEARNED, 5)
STATED = Demand("shop", 100.0, 5.0, 5.0, 5.0, DemandSource.STATED, 0)
SHORT = "learner has 2 of 5 rounds"


def part(**fields: object) -> Part:
    values: dict[str, object] = {"application": "shop", "rounds": 5}
    values.update(fields)
    return Part(**values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- fallback


@pytest.mark.parametrize(
    ("parts", "observed", "vcores", "memory_mb", "words"),
    [
        # too few rounds: observed usage, and the reason says whose learner and how far
        ([part(cpu=CPU, memory=MEMORY, cpu_short=SHORT, memory_short=SHORT)], OBSERVED,
         1.5, 800.0, "observed usage outside containers + 25% (shop: learner has 2 of 5 rounds)"),
        # enough rounds: the learned upper bounds, CPU and memory
        ([part(cpu=CPU, memory=MEMORY)], OBSERVED, 3.0, 700.0,
         "vcores: shop learned upper bound at forecast load (5 rounds); "
         "memory: learned working-set bound shop 700 MB"),
        # CPU learned, memory not yet: each resource on its own
        ([part(cpu=CPU, memory=MEMORY, memory_short="memory learner has 1 of 5 rounds")],
         OBSERVED, 3.0, 800.0, "memory: observed usage outside containers + 25% "
         "(shop: memory learner has 1 of 5 rounds)"),
        # no latency target: nothing to learn, observed usage for good
        ([part(memory=MEMORY, cpu_short="no latency target, nothing to learn")], OBSERVED,
         1.5, 700.0, "vcores: observed usage outside containers + 25% (shop: no latency "
         "target, nothing to learn)"),
        # no service traced on the node
        ([], OBSERVED, 1.5, 800.0,
         "observed usage outside containers + 25% (no latency-critical service learned here)"),
        # a stated demand is the operator's word: kept as it is
        ([part(cpu=STATED, memory=MEMORY)], OBSERVED, 5.0, 700.0,
         "vcores: shop stated demand x forecast load"),
        # one service short keeps the whole node on observed usage
        ([part(cpu=CPU, memory=MEMORY),
          part(application="ads", cpu=CPU, memory=MEMORY, cpu_short=SHORT, memory_short=SHORT)],
         OBSERVED, 1.5, 800.0, "observed usage outside containers + 25% (ads: learner has 2"),
        # nothing observed (no NodeManager measure): the learned figures, shortfall said
        ([part(cpu=CPU, memory=MEMORY, cpu_short=SHORT, memory_short=SHORT)], None, 3.0, 700.0,
         "vcores: shop learned upper bound at forecast load; shop: learner has 2 of 5 rounds"),
    ],
)  # fmt: skip
def test_learned_once_enough_rounds_observed_usage_with_the_reason_until_then(
    parts: list[Part], observed: NodeDemand | None, vcores: float, memory_mb: float, words: str
) -> None:
    demand = node_demand("a:1", parts, observed, 8.0)
    assert demand is not None and demand.node_id == "a:1"
    assert (demand.vcores, demand.memory_mb) == pytest.approx((vcores, memory_mb))
    assert words in demand.source


def test_nothing_learned_and_nothing_observed_is_no_demand() -> None:
    assert node_demand("a:1", [part(cpu_short=SHORT, memory_short=SHORT)], None, 8.0) is None


def test_the_recommendation_is_kept_when_asked() -> None:
    demand = node_demand("a:1", [part(cpu=CPU)], None, 8.0, ReserveSettings("recommendation"))
    assert demand is not None and demand.vcores == 2.0 and "eq. 6 recommendation" in demand.source


# --------------------------------------------------------------------------- memory bound


@pytest.mark.parametrize(
    ("memories", "kept_mb", "visible_mb"),
    [
        ((700.0,), 700.0, 8192 - 700),
        ((700.0, 1500.0), 2200.0, 8192 - 2200),  # never shared by a policy: summed
        # more than the node can give: batch still keeps its floor (min_visible_fraction)
        ((7000.0, 1500.0), 8500.0, 2048),
    ],
)
def test_the_guard_never_leaves_a_node_short_of_its_services_memory_bound(
    memories: tuple[float, ...], kept_mb: float, visible_mb: int
) -> None:
    parts = [
        part(application=f"app{i}", memory=Demand(f"app{i}", 10.0, mb * 0.8, mb * 0.6, mb))
        for i, mb in enumerate(memories)
    ]
    demand = node_demand("a:1", parts, None, 8.0)
    assert demand is not None and demand.memory_mb == pytest.approx(kept_mb)
    wanted, _ = wanted_visible(node("a:1"), 0.0, demand, None, GuardSettings())
    assert wanted.memory_mb == visible_mb


# --------------------------------------------------------------------------- shared node


def shared(name: str, claim_cpu: Demand, model: object) -> Part:
    return part(application=name, cpu=claim_cpu, memory=MEMORY, model=model, goal=0.95)


@pytest.mark.parametrize(
    ("policy", "capacity", "vcores", "words"),
    [
        (SharePolicy.LEAST, 8.0, 5.6,
         "policy least -> njc (every SLO met by the learned curves): shop 2.80 + ads 2.80 of "
         "6.00 vcores pooled"),
        (SharePolicy.NJC, 8.0, 5.6, "policy njc (every SLO met by the learned curves)"),
        (SharePolicy.SW, 8.0, 3.0, "policy sw (not every SLO met): shop 1.50 + ads 1.50"),
        (SharePolicy.LEAST, 4.0, 4.0, "shop 2.00 + ads 2.00 of 4.00 vcores pooled"),
    ],
)  # fmt: skip
def test_services_sharing_a_node_keep_what_the_policy_gives_each(
    policy: SharePolicy, capacity: float, vcores: float, words: str
) -> None:
    parts = [shared("shop", SHOP.demand, SHOP.model), shared("ads", ADS.demand, ADS.model)]
    demand = node_demand("a:1", parts, OBSERVED, capacity, ReserveSettings("upper", policy))
    assert demand is not None
    assert demand.vcores == pytest.approx(vcores)
    assert demand.vcores < SHOP.demand.upper + ADS.demand.upper  # not the independent sum
    assert words in demand.source
    assert demand.memory_mb == pytest.approx(2 * MEMORY.upper)


# --------------------------------------------------------------------------- end to end


def rm_node(node_id: str) -> Node:
    use = NodeUtilization(
        node_cpu=3.0, node_memory_mb=2048, containers_cpu=2.0, containers_memory_mb=1024
    )  # 1 core, 1024 MB outside containers
    return Node(node_id, node_id.split(":")[0], "/default-rack", NodeState.RUNNING,
                Resources(8192, 8), Resources(2048, 2), utilization=use)  # fmt: skip


def test_the_provider_keeps_observed_usage_until_the_learner_has_its_rounds() -> None:
    specs = [LraSpec("frontend", ("frontend",), target_ms=100.0)]
    learner = LraDemandLearner(specs, LraSettings(min_requests=10))
    usage = NodeUtilizationUsage({"frontend": ["frontend"]})
    observed = ObservedUsageDemand(headroom=0.25)
    provider = LearnedLraDemand(
        learner, usage, round_s=10.0, memory=usage, fallback=observed, min_rounds=3
    )
    nodes, views = [rm_node("a:1")], [node("a:1")]
    snapshot = RiskSnapshot(0, 1, 0.5, 10, 30, (), (NodeRisk("a:1", ("frontend",), 1.0, 1.0),))
    sources: list[str] = []
    for step in range(5):
        now_s = NOW_S + 10.0 * step
        tally = RequestTally("frontend", 500, 495, 100.0, int(now_s * 1e6),
                             int((now_s + 10) * 1e6), ("a:1",))  # fmt: skip
        provider.feed(RiskReading(snapshot, tallies=(tally,)), views, nodes, now_s)
        (demand,) = provider.demands(nodes, snapshot, now_s)
        sources.append(demand.source)
    observed = "observed usage outside containers + 25%"
    assert sources[0] == (
        f"vcores: {observed} (frontend: no load seen yet); "
        f"memory: {observed} (frontend: memory learner has 0 of 3 rounds)"
    )
    assert sources[2] == (
        f"vcores: {observed} (frontend: learner has 2 of 3 rounds); "
        f"memory: {observed} (frontend: memory learner has 2 of 3 rounds)"
    )
    assert sources[3] == (
        "vcores: frontend learned upper bound at forecast load (3 rounds); "
        "memory: learned working-set bound frontend 1024 MB"
    )
    (app,) = provider.applications()
    assert (app.rounds, app.min_rounds, app.cpu_short, app.memory_short) == (4, 3, None, None)
    assert app.memory is not None and app.memory.upper >= 1024.0  # never less than it held


def test_a_split_is_remembered_until_the_parts_change() -> None:
    splits: Splits = {}
    parts = [shared("shop", SHOP.demand, SHOP.model), shared("ads", ADS.demand, ADS.model)]
    first = node_demand("a:1", parts, None, 8.0, splits=splits)
    again = node_demand("b:1", parts, None, 8.0, splits=splits)
    assert len(splits) == 1 and first is not None and again is not None
    assert first.vcores == again.vcores
    later = [replace(parts[0], rounds=6), parts[1]]
    node_demand("a:1", later, None, 8.0, splits=splits)
    assert len(splits) == 2


def test_an_application_holding_only_memory_on_a_node_leaves_its_cpu_to_the_others() -> None:
    memory_only = part(application="ads", memory=MEMORY)  # no CPU share here
    demand = node_demand("a:1", [part(cpu=CPU, memory=MEMORY), memory_only], OBSERVED, 8.0)
    assert demand is not None and demand.vcores == 3.0 and demand.memory_mb == 1400.0
    assert "vcores: shop learned upper bound" in demand.source
