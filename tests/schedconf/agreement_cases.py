"""Configurations tried on our validator and on a real ResourceManager (3.4.x).

Each case is a whole scheduler file as it would be written over the mini cluster's
baseline (``yarn_adapt.minicluster.spec``: queues default/a/b at 40/30/30 for the
Capacity Scheduler; default/a/b with weight 1 for the Fair Scheduler), and the
verdict both must reach:

* ``accepted``: the RM takes the file (``rmadmin -refreshQueues`` succeeds / the
  allocations load) -- advisory issues may still be raised by yarn-adapt;
* ``refused``: ``refreshQueues`` fails / the Fair Scheduler logs "Failed to reload"
  and keeps the old allocations;
* ``ignored`` (fair only): the file loads but the RM logs an error and drops a
  setting (scheduling-policy hierarchy).

``test_agreement_offline`` checks our validator against the table on every run;
``test_rm_agreement`` (marked ``yarn``) checks the real RM against the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tests.schedconf.factories import capacity_xml, fair_xml

Verdict = Literal["accepted", "refused", "ignored"]


@dataclass(frozen=True)
class AgreementCase:
    name: str
    scheduler: Literal["capacity", "fair"]
    xml: str
    verdict: Verdict


BASELINE = {
    "root.queues": "default,a,b",
    "root.default.capacity": "40",
    "root.a.capacity": "30",
    "root.b.capacity": "30",
}
# A new parent root.c (10%) for cases that need children without converting a
# RUNNING leaf of the baseline.
WITH_C = {
    **BASELINE,
    "root.queues": "default,a,b,c",
    "root.default.capacity": "30",
    "root.c.capacity": "10",
    "root.c.queues": "x,y",
    "root.c.x.capacity": "50",
    "root.c.y.capacity": "50",
}


def capacity_case(
    name: str,
    verdict: Verdict,
    changes: dict[str, str | None],
    base: dict[str, str] = BASELINE,
) -> AgreementCase:
    """``base`` with ``changes`` (None removes a key), keys relative to
    ``yarn.scheduler.capacity.``."""
    properties = dict(base)
    for key, value in changes.items():
        if value is None:
            properties.pop(key, None)
        else:
            properties[key] = value
    return AgreementCase(name, "capacity", capacity_xml(properties), verdict)


CAPACITY_CASES = [
    capacity_case("new split", "accepted",
                  {"root.default.capacity": "50", "root.a.capacity": "25",
                   "root.b.capacity": "25"}),
    capacity_case("children sum to 110", "refused", {"root.a.capacity": "40"}),
    capacity_case("sum 99.99 is within precision", "accepted", {"root.default.capacity": "39.99"}),
    capacity_case("sum 99.9 is not", "refused", {"root.default.capacity": "39.9"}),
    capacity_case("capacity above 100", "refused",
                  {"root.a.capacity": "120", "root.default.capacity": "-50"}),
    capacity_case("capacity that does not parse", "refused", {"root.a.capacity": "abc"}),
    capacity_case("maximum-capacity below capacity", "accepted", {"root.a.maximum-capacity": "10"}),
    capacity_case("maximum-capacity above 100", "accepted", {"root.a.maximum-capacity": "150"}),
    capacity_case("maximum-capacity as a weight", "refused", {"root.a.maximum-capacity": "2w"}),
    capacity_case("all weights", "accepted",
                  {"root.default.capacity": "2w", "root.a.capacity": "1w",
                   "root.b.capacity": "1w"}),
    capacity_case("weights mixed with percentages", "refused", {"root.default.capacity": "2w"}),
    capacity_case("absolute before percentages", "refused",
                  {"root.default.capacity": "[memory=2048,vcores=2]"}),
    capacity_case("percentages before absolute", "accepted",
                  {"root.b.capacity": "[memory=1024,vcores=1]"}),
    capacity_case("leaf with a parent ordering policy", "refused",
                  {"root.a.ordering-policy": "utilization"}),
    capacity_case("leaf with fair ordering", "accepted", {"root.a.ordering-policy": "fair"}),
    capacity_case("DRAINING configured", "refused", {"root.a.state": "DRAINING"}),
    capacity_case("user-limit-factor 0", "accepted", {"root.a.user-limit-factor": "0"}),
    capacity_case("minimum-user-limit-percent 0", "accepted",
                  {"root.a.minimum-user-limit-percent": "0"}),
    capacity_case("maximum-am-resource-percent 1.5", "accepted",
                  {"root.a.maximum-am-resource-percent": "1.5"}),
    capacity_case("remove a RUNNING queue", "refused",
                  {"root.queues": "default,a", "root.default.capacity": "70",
                   "root.b.capacity": None}),
    capacity_case("remove a queue the file marks STOPPED", "accepted",
                  {"root.queues": "default,a", "root.default.capacity": "70",
                   "root.b.capacity": None, "root.b.state": "STOPPED"}),
    capacity_case("a RUNNING leaf becomes a parent", "refused",
                  {"root.a.queues": "x", "root.a.x.capacity": "100"}),
    capacity_case("root without children", "refused", {"root.queues": None}),
    capacity_case("a new parent with children", "accepted", {}, WITH_C),
    capacity_case("new children adding up to 0", "refused",
                  {"root.c.x.capacity": "0", "root.c.y.capacity": "0"}, WITH_C),
    capacity_case("new children adding up to 0, allowed", "accepted",
                  {"root.c.x.capacity": "0", "root.c.y.capacity": "0",
                   "root.c.allow-zero-capacity-sum": "true"}, WITH_C),
    capacity_case("RUNNING child of a new STOPPED parent", "refused",
                  {"root.c.state": "STOPPED", "root.c.x.state": "RUNNING"}, WITH_C),
    capacity_case("absolute child of a percentage parent", "refused",
                  {"root.c.x.capacity": "[memory=1024,vcores=1]", "root.c.y.capacity": "0"},
                  WITH_C),
    capacity_case("parent with a leaf ordering policy", "refused",
                  {"root.c.ordering-policy": "fair"}, WITH_C),
    capacity_case("node label capacities add up", "accepted",
                  {"root.accessible-node-labels.gpu.capacity": "100",
                   "root.a.accessible-node-labels": "gpu",
                   "root.a.accessible-node-labels.gpu.capacity": "100"}),
    capacity_case("node label capacity missing among root's children", "refused",
                  {"root.accessible-node-labels.gpu.capacity": "100",
                   "root.a.accessible-node-labels": "gpu"}),
    capacity_case("default label expression not accessible", "refused",
                  {"root.a.accessible-node-labels": "gpu",
                   "root.a.default-node-label-expression": "ssd"}),
    capacity_case("weights and percentages in non-legacy mode", "accepted",
                  {"root.default.capacity": "2w", "legacy-queue-mode.enabled": "false"}),
]  # fmt: skip


def fair_case(name: str, verdict: Verdict, queues: str, top: str = "") -> AgreementCase:
    baseline = (
        '<queue name="default"><weight>1.0</weight></queue>\n'
        '<queue name="a"><weight>1.0</weight></queue>\n'
        '<queue name="b"><weight>1.0</weight></queue>\n'
    )
    return AgreementCase(name, "fair", fair_xml(top + baseline + queues), verdict)


FAIR_CASES = [
    fair_case("a new leaf", "accepted", '<queue name="c"><weight>2</weight></queue>'),
    fair_case("negative weight", "accepted", '<queue name="c"><weight>-1</weight></queue>'),
    fair_case("weight that does not parse", "refused",
              '<queue name="c"><weight>heavy</weight></queue>'),
    fair_case("maxAMShare on a parent", "refused",
              '<queue name="c"><maxAMShare>0.5</maxAMShare><queue name="d"/></queue>'),
    fair_case("unknown scheduling policy", "refused",
              '<queue name="c"><schedulingPolicy>lottery</schedulingPolicy></queue>'),
    fair_case("fifo as the default policy", "refused", '<queue name="c"/>',
              "<defaultQueueSchedulingPolicy>fifo</defaultQueueSchedulingPolicy>\n"),
    fair_case("a rule after a terminal one", "refused", '<queue name="c"/>',
              '<queuePlacementPolicy><rule name="default"/><rule name="specified"/>'
              "</queuePlacementPolicy>\n"),
    fair_case("fifo on a new parent", "ignored",
              '<queue name="c"><schedulingPolicy>fifo</schedulingPolicy>'
              '<queue name="d"/></queue>'),
    fair_case("drf under the fair root", "ignored",
              '<queue name="c"><schedulingPolicy>drf</schedulingPolicy></queue>'),
]  # fmt: skip

ALL_CASES = CAPACITY_CASES + FAIR_CASES
