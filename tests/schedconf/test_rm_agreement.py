"""The real ResourceManager (3.4.x from Maven Central) and our validator agree.

Every case of agreement_cases.py is written over the mini cluster's baseline
configuration: capacity cases are applied with ``rmadmin -refreshQueues`` (refused =
non-zero exit), fair cases through the same command and the RM log (refused =
"Failed to reload allocations file"; ignored = a policy error). The offline test
holds our validator to the same table, so passing both means they agree. The
cluster fixture puts the baseline back after every case.

The mutation bodies of ``mutation_body`` are applied to a Capacity Scheduler with
the ``memory`` configuration store and the RM's resulting configuration must mean the
same as the target.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.schedconf.agreement_cases import CAPACITY_CASES, FAIR_CASES, AgreementCase
from tests.schedconf.factories import capacity_xml
from tests.schedconf.verdicts import our_verdict, parse_case, rm_capacity_verdict, rm_fair_verdict
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.model import CapacityQueue, CapacitySchedulerConfig, Percentage, QueueState
from yarn_adapt.yarn.confxml import diff_configs, mutation_body, parse_capacity_xml, render_diff

pytestmark = [pytest.mark.yarn, pytest.mark.slow]


@pytest.mark.parametrize("case", CAPACITY_CASES, ids=lambda c: c.name)
def test_capacity_scheduler_agrees(capacity_cluster: MiniCluster, case: AgreementCase) -> None:
    ours, reasons = our_verdict(case)
    theirs, message = rm_capacity_verdict(capacity_cluster, case)
    assert (ours, theirs) == (case.verdict, case.verdict), f"ours {reasons}; RM: {message}"
    if theirs == "accepted":
        wanted = parse_case(case)
        assert isinstance(wanted, CapacitySchedulerConfig)
        assert capacity_cluster.queue_paths() == {q.path for q in wanted.queues()}


@pytest.mark.parametrize("case", FAIR_CASES, ids=lambda c: c.name)
def test_fair_scheduler_agrees(fair_cluster: MiniCluster, case: AgreementCase) -> None:
    ours, reasons = our_verdict(case)
    theirs, message = rm_fair_verdict(fair_cluster, case)
    assert (ours, theirs) == (case.verdict, case.verdict), f"ours {reasons}; RM: {message}"
    # Every case adds root.c; a queue whose policy its parent forbids is not created.
    if theirs == "accepted":
        assert "root.c" in fair_cluster.queue_paths()
    elif theirs == "ignored":
        assert "root.c" not in fair_cluster.queue_paths()


# --------------------------------------------------------------------------- mutation


def rm_config(cluster: MiniCluster) -> CapacitySchedulerConfig:
    """The RM's mutable configuration as a model."""
    return parse_capacity_xml(capacity_xml(cluster.scheduler_conf()), "scheduler-conf").config


def _edit_capacities(config: CapacitySchedulerConfig) -> CapacitySchedulerConfig:
    default, a, b = config.root.children
    return replace(
        config,
        root=replace(
            config.root,
            children=(
                replace(default, capacity=Percentage(50.0)),
                replace(a, capacity=Percentage(20.0), user_limit_factor=2.0),
                b,
            ),
        ),
    )


def _add_parent(config: CapacitySchedulerConfig) -> CapacitySchedulerConfig:
    default, a, b = config.root.children
    c = CapacityQueue(
        "root.c",
        capacity=Percentage(20.0),
        ordering_policy="priority-utilization",
        children=(
            CapacityQueue("root.c.x", capacity=Percentage(70.0), ordering_policy="fair"),
            CapacityQueue("root.c.y", capacity=Percentage(30.0)),
        ),
    )
    children = (replace(default, capacity=Percentage(20.0)), a, b, c)
    globals_ = (*config.global_properties, ("yarn.scheduler.capacity.queue-mappings", "u:x:c.x"))
    return replace(config, root=replace(config.root, children=children), global_properties=globals_)


def _remove_running_queue(config: CapacitySchedulerConfig) -> CapacitySchedulerConfig:
    default, a, _ = config.root.children
    children = (replace(default, capacity=Percentage(70.0)), a)
    kept = tuple(kv for kv in config.global_properties if "node-locality-delay" not in kv[0])
    return replace(config, root=replace(config.root, children=children), global_properties=kept)


def _stop_queue(config: CapacitySchedulerConfig) -> CapacitySchedulerConfig:
    default, a, b = config.root.children
    children = (default, a, replace(b, state=QueueState.STOPPED))
    return replace(config, root=replace(config.root, children=children))


@pytest.mark.parametrize(
    "change", [_edit_capacities, _add_parent, _remove_running_queue, _stop_queue],
    ids=lambda f: f.__name__.strip("_"),
)  # fmt: skip
def test_mutation_body_takes_the_rm_to_the_target(
    capacity_memory_cluster: MiniCluster, change: object
) -> None:
    assert callable(change)
    before = rm_config(capacity_memory_cluster)
    target = change(before)
    status, answer = capacity_memory_cluster.put_scheduler_conf(mutation_body(before, target))
    assert status == 200, answer
    after = rm_config(capacity_memory_cluster)
    # A removed queue's state=STOPPED stays behind as an orphan global property.
    leftovers = [c for c in diff_configs(target, after) if not c.prop.endswith(".state")]
    assert leftovers == [], render_diff(leftovers)
    assert capacity_memory_cluster.queue_paths() == {q.path for q in target.queues()}
