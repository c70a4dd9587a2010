"""The rule engine decides mechanism: each activation group's rules on table cases,
one decision per fact (activation-group semantics), catch-alls, caching by signature,
and a variant rule book that changes what the comparator computes."""

from __future__ import annotations

import pytest

from rules.compiler import MechanismCompiler, signature
from rules.inputs import NO_CONSTRAINTS, GroupConstraints
from rules.rulebook import (
    ALLOCATION,
    CONSTRAINTS,
    DEFAULT_BOOK,
    ESTIMATION,
    ORDERING,
    UNSUPPORTED,
    Rule,
    RuleBook,
    decide,
)
from tests.rules.factories import capacity, containers, fair, job, latencies, mix, run
from yarn_adapt.errors import SettingsError
from yarn_adapt.model import Resources

ALLOCATION_CASES = [
    (
        {"scheduler": "capacity", "elastic": False, "parent_policy": "fair"},
        "capacity-static-guarantees",
    ),
    (
        {"scheduler": "capacity", "elastic": True, "parent_policy": "fair"},
        "capacity-elastic-guarantees",
    ),
    ({"scheduler": "fair", "elastic": False, "parent_policy": "fair"}, "fair-weighted-sharing"),
    ({"scheduler": "fair", "elastic": False, "parent_policy": "drf"}, "fair-drf-sharing"),
    ({"scheduler": "fifo", "elastic": False, "parent_policy": "fair"}, UNSUPPORTED),
]


@pytest.mark.parametrize(("facts", "rule"), ALLOCATION_CASES)
def test_allocation_rules(facts: dict[str, object], rule: str) -> None:
    choice = decide(DEFAULT_BOOK, ALLOCATION, facts)
    assert (choice.rule if choice.kernel != UNSUPPORTED else UNSUPPORTED) == rule


def test_static_and_elastic_capacity_bind_different_ceilings() -> None:
    static = decide(DEFAULT_BOOK, ALLOCATION, ALLOCATION_CASES[0][0])
    elastic = decide(DEFAULT_BOOK, ALLOCATION, ALLOCATION_CASES[1][0])
    assert (static.kernel, static.binding("ceiling")) == ("guaranteed_share", "capacity")
    assert (elastic.kernel, elastic.binding("ceiling")) == ("guaranteed_share", "maximum")


def _ordering(policy: str, uniform: bool = False, deadlines: bool = False) -> dict[str, object]:
    return {"scheduler": "fair", "policy": policy, "uniform_shape": uniform, "deadlines": deadlines}


@pytest.mark.parametrize(
    ("facts", "kernel", "measure", "rule"),
    [
        (_ordering("fifo"), "fifo", "", "fifo"),
        (_ordering("fair"), "least_used", "memory", "fair-share"),
        (_ordering("drf"), "least_used", "dominant", "drf"),
        (
            _ordering("drf", uniform=True),
            "least_used",
            "memory",
            "drf-on-uniform-containers-is-fair",
        ),
        (_ordering("edf", deadlines=True), "earliest_deadline", "", "edf"),
        (_ordering("edf"), "fifo", "", "edf-without-deadlines"),
        (_ordering("lrtf"), "least_remaining_time", "", "lrtf"),
    ],
)
def test_ordering_rules(facts: dict[str, object], kernel: str, measure: str, rule: str) -> None:
    choice = decide(DEFAULT_BOOK, ORDERING, facts)
    assert (choice.kernel, choice.binding("measure"), choice.rule) == (kernel, measure, rule)


def _constraint(kind: str, **facts: object) -> dict[str, object]:
    base: dict[str, object] = {
        "kind": kind,
        "scheduler": "capacity",
        "bounded": False,
        "enabled": True,
        "constrained": False,
        "calculator": "default",
        "nodes_known": True,
        "multiple": "default",
    }
    return {**base, **facts}


@pytest.mark.parametrize(
    ("facts", "rule"),
    [
        (_constraint("queue_bounds"), "queue-bounds-from-configuration"),
        (_constraint("queue_bounds", bounded=True), "queue-bounds-from-constraints"),
        (_constraint("am"), "capacity-am-limit"),
        (_constraint("am", scheduler="fair"), "fair-am-share"),
        (_constraint("am", enabled=False), "no-am-containers"),
        (_constraint("placement"), "any-machine"),
        (_constraint("placement", constrained=True), "machine-placement"),
        (_constraint("user_limit"), "capacity-user-limit"),
        (_constraint("user_limit", scheduler="fair"), "no-user-limit"),
        (_constraint("resource_fit"), "capacity-default-calculator"),
        (_constraint("resource_fit", calculator="dominant"), "both-dimensions"),
        (_constraint("resource_fit", scheduler="fair"), "both-dimensions"),
        (_constraint("heartbeat"), "capacity-multiple-assignments"),
        (_constraint("heartbeat", multiple="no"), "capacity-single-assignment"),
        (_constraint("heartbeat", scheduler="fair"), "fair-one-container-per-heartbeat"),
        (_constraint("heartbeat", scheduler="fair", multiple="yes"), "fair-assign-multiple"),
        (_constraint("heartbeat", nodes_known=False), "no-node-heartbeats"),
    ],
)
def test_constraint_rules(facts: dict[str, object], rule: str) -> None:
    assert decide(DEFAULT_BOOK, CONSTRAINTS, facts).rule == rule


@pytest.mark.parametrize(
    ("framework", "kernel"),
    [("mapreduce", "per_task_containers"), ("reuse", "container_reuse"), ("mpi", UNSUPPORTED)],
)
def test_estimation_rules(framework: str, kernel: str) -> None:
    assert decide(DEFAULT_BOOK, ESTIMATION, {"framework": framework}).kernel == kernel


def test_a_fact_no_rule_covers_is_a_clear_error() -> None:
    config = capacity(("q", 100, 100), policy="lifo")
    with pytest.raises(SettingsError, match=r"no ordering rule for .*policy=lifo"):
        run(config, mix(job("a", "q")), containers(2))


def test_mechanisms_are_cached_per_signature() -> None:
    compiler = MechanismCompiler()
    jobs = mix(job("a", "q1"), job("b", "q2"))
    configs = [capacity(("q1", c, c), ("q2", 100 - c, 100 - c)) for c in (20, 40, 60)]
    for config in configs:
        compiler.compile(signature(config, jobs, NO_CONSTRAINTS, containers(4)))
    # one signature (Capacity, static, fifo, fifo): 1 allocation + 2 ordering + 6
    # constraint kinds + 1 estimation decisions, once
    assert compiler.rule_engine_calls == 10


def test_drf_and_fair_share_a_mechanism_only_when_containers_are_uniform() -> None:
    compiler = MechanismCompiler()
    uniform = mix(job("a", "q1"), job("b", "q2"))
    mixed = mix(job("a", "q1"), job("b", "q2", task=Resources(1024, 4)))
    drf, fair_policy = fair(("q1", 1), ("q2", 1), policy="drf"), fair(("q1", 1), ("q2", 1))
    same = [
        compiler.compile(signature(c, uniform, NO_CONSTRAINTS, containers(4)))
        for c in (drf, fair_policy)
    ]
    different = [
        compiler.compile(signature(c, mixed, NO_CONSTRAINTS, containers(4)))
        for c in (drf, fair_policy)
    ]
    assert same[0].ordering[0].binding("measure") == same[1].ordering[0].binding("measure")
    assert different[0].ordering[0].binding("measure") == "dominant"
    assert different[1].ordering[0].binding("measure") == "memory"


# A variant book whose only change is one rule: static Capacity queues are treated as
# elastic up to the whole group. If Python decided mechanism, nothing would change.
ELASTIC_EVERYWHERE = RuleBook("tests.rules.variant-elastic").with_rule(
    "capacity-static-guarantees",
    Rule(
        "capacity-static-guarantees-but-elastic",
        ALLOCATION,
        1,
        DEFAULT_BOOK.rule("capacity-static-guarantees").when,
        "guaranteed_share",
        {"share": "capacity", "order": "used_over_share", "ceiling": "group"},
    ),
)


def test_a_variant_rule_changes_what_the_comparator_computes() -> None:
    # q1 may hold 2 of 4 containers; its one job has 4 tasks of 100 s, q2 is idle
    config = capacity(("q1", 50, 50), ("q2", 50, 50), user_limit_factor=-1)
    jobs = mix(job("a", "q1", maps=4))
    default, _ = run(config, jobs, containers(4))
    variant, grants = run(config, jobs, containers(4), book=ELASTIC_EVERYWHERE)
    assert latencies(default, jobs) == {"a": 200.0}  # two waves of two
    assert latencies(variant, jobs) == {"a": 100.0}  # one wave of four
    assert len(grants) == 4


def test_queue_bounds_from_constraints_cap_a_queue() -> None:
    config = capacity(("q1", 50, 100), ("q2", 50, 100), user_limit_factor=-1)
    jobs = mix(job("a", "q1", maps=4))
    free, _ = run(config, jobs, containers(4))
    bounded, _ = run(config, jobs, containers(4), GroupConstraints(queue_max={"q1": 0.5}))
    assert latencies(free, jobs) == {"a": 100.0}
    assert latencies(bounded, jobs) == {"a": 200.0}
