"""The scheduler-conf mutation body: minimal, in the documented XML, aware of the
order and side effects of the RM's ConfigurationUpdateAssembler."""

from __future__ import annotations

from lxml import etree

from tests.schedconf.factories import capacity
from yarn_adapt.yarn.confxml import MutationPlan, mutation_body, mutation_plan, mutation_steps
from yarn_adapt.yarn.schedconf.mutation import QueueParams

NESTED = {"root.a.queues": "x,y", "root.a.x.capacity": "60", "root.a.y.capacity": "40"}


def test_nothing_to_change_is_an_empty_body() -> None:
    plan = mutation_plan(capacity({"root.a.capacity": "50.0"}), capacity())
    assert plan.is_empty
    assert mutation_body(capacity(), capacity()) == "<sched-conf/>\n"


def test_only_changed_values_are_sent() -> None:
    plan = mutation_plan(capacity(), capacity({"root.a.capacity": "30", "root.b.capacity": "70"}))
    assert plan == MutationPlan(
        update=(
            QueueParams("root.a", (("capacity", "30"),)),
            QueueParams("root.b", (("capacity", "70"),)),
        )
    )


def test_the_body_is_the_documented_xml() -> None:
    old = capacity({"maximum-applications": "100"})
    new = capacity(
        {
            "root.queues": "a,b,c",
            "root.a.capacity": "40",
            "root.c.capacity": "10",
            "root.c.maximum-capacity": "20",
        }
    )
    body = etree.fromstring(mutation_body(old, new))
    add = body.find("add-queue")
    assert add is not None and add.findtext("queue-name") == "root.c"
    params = {e.findtext("key"): e.findtext("value") for e in add.iter("entry")}
    assert params == {"capacity": "10", "maximum-capacity": "20"}
    update = body.find("update-queue")
    assert update is not None and update.findtext("queue-name") == "root.a"
    [removed_global] = body.find("global-updates").iter("entry")  # type: ignore[union-attr]
    assert removed_global.findtext("key") == "yarn.scheduler.capacity.maximum-applications"
    assert removed_global.find("value") is None  # no value: the RM unsets the key
    assert [child.tag for child in body] == ["add-queue", "update-queue", "global-updates"]


def test_a_queue_added_in_the_middle_also_fixes_the_order_of_its_siblings() -> None:
    old = capacity()
    new = capacity({"root.queues": "a,m,b", "root.a.capacity": "40", "root.m.capacity": "10"})
    plan = mutation_plan(old, new)
    assert plan.add == (QueueParams("root.m", (("capacity", "10"),)),)
    assert plan.update == (
        QueueParams("root", (("queues", "a,m,b"),)),
        QueueParams("root.a", (("capacity", "40"),)),
    )


def test_a_queue_appended_at_the_end_needs_no_queues_update() -> None:
    plan = mutation_plan(
        capacity(),
        capacity({"root.queues": "a,b,c", "root.a.capacity": "40", "root.c.capacity": "10"}),
    )
    assert all(q.queue != "root" for q in plan.update)


def test_removing_a_running_queue_stops_it_in_the_same_call() -> None:
    old = capacity({**NESTED, "root.a.y.acl_submit_applications": "bob"})
    new = capacity({"root.a.queues": "x", "root.a.x.capacity": "100"})
    plan = mutation_plan(old, new)
    assert plan.remove == ("root.a.y",)
    assert plan.update == (
        QueueParams("root.a.y", (("state", "STOPPED"),)),
        QueueParams("root.a.x", (("capacity", "100"),)),
    )


def test_removing_a_stopped_queue_needs_no_stop() -> None:
    old = capacity({**NESTED, "root.a.y.state": "STOPPED"})
    new = capacity({"root.a.queues": "x", "root.a.x.capacity": "100"})
    plan = mutation_plan(old, new)
    assert plan.remove == ("root.a.y",)
    assert all(q.queue != "root.a.y" for q in plan.update)


def test_removing_a_parent_removes_its_subtree_once_and_stops_every_queue() -> None:
    old = capacity(NESTED)
    new = capacity({"root.queues": "b", "root.b.capacity": "100", "root.a.capacity": None})
    plan = mutation_plan(old, new)
    assert plan.remove == ("root.a",)
    stopped = [q.queue for q in plan.update if q.params == (("state", "STOPPED"),)]
    assert stopped == ["root.a", "root.a.x", "root.a.y"]


def test_steps_stop_first_and_remove_after() -> None:
    old = capacity(NESTED)
    new = capacity({"root.a.queues": "x", "root.a.x.capacity": "100"})
    stop, change = mutation_steps(old, new)
    assert "<remove-queue>" not in stop and "<value>STOPPED</value>" in stop
    assert "<remove-queue>root.a.y</remove-queue>" in change and "STOPPED" not in change
    assert mutation_steps(
        old, capacity({**NESTED, "root.a.x.capacity": "50", "root.a.y.capacity": "50"})
    ) == [
        mutation_body(
            old, capacity({**NESTED, "root.a.x.capacity": "50", "root.a.y.capacity": "50"})
        )
    ]


def test_a_leaf_becoming_a_parent_keeps_the_ordering_policy_it_asks_for() -> None:
    # The RM unsets the parent's ordering-policy when it adds its first child.
    old = capacity({"root.a.ordering-policy": "fair"})
    new = capacity(
        {
            "root.a.queues": "x",
            "root.a.x.capacity": "100",
            "root.a.ordering-policy": "priority-utilization",
        }
    )
    plan = mutation_plan(old, new)
    assert plan.add == (QueueParams("root.a.x", (("capacity", "100"),)),)
    assert plan.update == (QueueParams("root.a", (("ordering-policy", "priority-utilization"),)),)


def test_unset_queue_property_has_no_value() -> None:
    plan = mutation_plan(capacity({"root.a.user-limit-factor": "2"}), capacity())
    assert plan.update == (QueueParams("root.a", (("user-limit-factor", None),)),)
