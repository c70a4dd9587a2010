"""RM high availability against a real pair of ResourceManagers (minicluster/ha.py):
standby detection, a write redirected by a real standby, all-standby, and failover
after the active RM dies."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from yarn_adapt.errors import YarnStandby
from yarn_adapt.minicluster.ha import RM_IDS, HAResourceManagerPair
from yarn_adapt.model import HAState
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

pytestmark = pytest.mark.yarn

SETTINGS = HttpSettings(user="yarn-adapt-test", read_timeout_s=20.0, retries=1)
RAISE_A_MAX = """<sched-conf><update-queue><queue-name>root.a</queue-name>
<params><entry><key>maximum-capacity</key><value>{value}</value></entry></params>
</update-queue></sched-conf>"""


@pytest.fixture(scope="module")
def pair() -> Iterator[HAResourceManagerPair]:
    with HAResourceManagerPair() as started:
        yield started


def make_active(pair: HAResourceManagerPair, wanted: str) -> None:
    for rm_id in RM_IDS:
        if rm_id != wanted and pair.ha_state(rm_id) == "ACTIVE":
            pair.transition(rm_id, "standby")
    if pair.ha_state(wanted) != "ACTIVE":
        pair.transition(wanted, "active")


def test_the_active_rm_is_found_among_standbys(pair: HAResourceManagerPair):
    make_active(pair, "rm2")
    with ResourceManagerClient([pair.web_url("rm1"), pair.web_url("rm2")], SETTINGS) as rm:
        info = rm.cluster_info()
        metrics = rm.cluster_metrics()  # a path a standby would redirect
    assert info.ha_state is HAState.ACTIVE
    assert rm.endpoints.active == pair.web_url("rm2")
    assert metrics.total_nodes == 0  # this pair runs no NodeManager


def test_a_write_sent_to_a_standby_lands_on_the_active(
    pair: HAResourceManagerPair, caplog: pytest.LogCaptureFixture
):
    make_active(pair, "rm1")
    with ResourceManagerClient(pair.web_urls, SETTINGS) as rm:
        rm.cluster_info()
        assert rm.endpoints.active == pair.web_url("rm1")
        pair.fail_over("rm1", "rm2")
        with caplog.at_level(logging.INFO, logger="yarn_adapt.yarn.http"):
            answer = rm.update_scheduler_conf(RAISE_A_MAX.format(value=77))
        conf = dict(rm.scheduler_conf())
    assert answer == "Configuration change successfully applied."
    assert any("standby RM redirected PUT" in r.getMessage() for r in caplog.records)
    assert rm.endpoints.active == pair.web_url("rm2")
    assert conf["yarn.scheduler.capacity.root.a.maximum-capacity"] == "77"


def test_all_standby_is_reported_as_standby(pair: HAResourceManagerPair):
    make_active(pair, "rm1")
    with ResourceManagerClient(pair.web_urls, SETTINGS) as rm:
        rm.cluster_info()
        pair.transition("rm1", "standby")
        try:
            with pytest.raises(YarnStandby) as caught:
                rm.cluster_metrics()
        finally:
            pair.transition("rm1", "active")
    for url in pair.web_urls:
        assert f"{url} STANDBY" in str(caught.value)


def test_reads_fail_over_when_the_active_rm_dies(pair: HAResourceManagerPair):
    """Last in the module: it kills rm1 for good."""
    make_active(pair, "rm1")
    with ResourceManagerClient(pair.web_urls, SETTINGS) as rm:
        rm.cluster_info()
        pair.fail_over("rm1", "rm2")
        pair.kill("rm1")
        metrics = rm.cluster_metrics()
    assert metrics.apps_submitted == 0
    assert rm.endpoints.active == pair.web_url("rm2")
