"""The HA pair with NodeManagers: they register with the active ResourceManager and,
after a fail-over, with the other. The ``updateNodeResource`` the first was given is
not in any state store (recovery is off here), yet the new active RM has it: Hadoop
3.4 sends the new total to the NodeManager in its heartbeat answer, and the
NodeManager registers with the other RM under that total. What the guard must notice
is a NodeManager *restart* (test_colocation_cluster.py), not a fail-over."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from yarn_adapt.minicluster.ha import HAResourceManagerPair
from yarn_adapt.model import Resources
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

WHOLE = Resources(2048, 2)


@pytest.fixture(scope="module")
def pair() -> Iterator[HAResourceManagerPair]:
    with HAResourceManagerPair(nodemanagers=2, nm_memory_mb=2048, nm_vcores=2) as started:
        yield started


def totals(pair: HAResourceManagerPair, rm_id: str) -> dict[str, Resources]:
    return {
        str(node["id"]): Resources(
            int(node["totalResource"]["memory"]),  # type: ignore[index]
            int(node["totalResource"]["vCores"]),  # type: ignore[index]
        )
        for node in pair.nodes(rm_id)
    }


def test_after_a_fail_over_the_new_active_rm_has_the_total_the_nodemanager_was_given(
    pair: HAResourceManagerPair,
) -> None:
    first = totals(pair, "rm1")
    assert set(first.values()) == {WHOLE} and len(first) == 2
    lowered = sorted(first)[0]
    with ResourceManagerClient(list(pair.web_urls), HttpSettings(retries=1)) as rm:
        rm.update_node_resource(lowered, Resources(1024, 1))
    assert totals(pair, "rm1")[lowered] == Resources(1024, 1)
    pair.fail_over("rm1", "rm2")
    pair.wait_for_nodes("rm2", 2)
    assert totals(pair, "rm2") == {**first, lowered: Resources(1024, 1)}  # carried by the NM
