"""Session-wide fixtures: real YARN mini clusters from the Maven Central Hadoop jars.

Five cluster fixtures, one per set-up:

- ``capacity_cluster``         Capacity Scheduler, file store (XML + ``rmadmin -refreshQueues``)
- ``capacity_memory_cluster``  Capacity Scheduler, ``memory`` store (``PUT /scheduler-conf``)
- ``fair_cluster``             Fair Scheduler (allocation file reload)
- ``secure_cluster``           Capacity Scheduler, ``memory`` store, Kerberos (MiniKdc) with
                               SPNEGO on every web service, HTTPS only (a generated CA)
- ``colocation_cluster``       Capacity Scheduler (DRF), ``memory`` store, two NodeManagers
                               of 4 vcores / 4 GB, each pinned to one CPU by a cpuset

Each cluster starts the first time a test asks for it and then serves the whole
session, but at most one runs at a time (the test machine has two cores): asking for
another variant stops the running one. Tests are therefore reordered so that all
tests of one variant run together, after the tests that need no cluster. Every test
that uses a cluster gets it back in its baseline state afterwards (no running apps,
initial node sizes, initial scheduler configuration), and is marked ``yarn``.

When a cluster cannot start, its tests fail if ``CI=true`` and are skipped (with the
reason) otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator

import pytest

from yarn_adapt.minicluster import MiniCluster, MiniClusterError, MiniClusterSpec
from yarn_adapt.testbed.cluster import COLOCATION_SPEC

CLUSTER_SPECS = {
    "capacity_cluster": MiniClusterSpec(scheduler="capacity", conf_store="file"),
    "capacity_memory_cluster": MiniClusterSpec(scheduler="capacity", conf_store="memory"),
    "fair_cluster": MiniClusterSpec(scheduler="fair"),
    "secure_cluster": MiniClusterSpec(
        scheduler="capacity", conf_store="memory", kerberos=True, https=True
    ),
    "colocation_cluster": COLOCATION_SPEC,
}
VARIANT_ORDER = list(CLUSTER_SPECS)


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


class ClusterPool:
    """Starts cluster variants on demand and keeps at most one of them running."""

    def __init__(self) -> None:
        self._clusters: dict[str, MiniCluster] = {}
        self._start_failures: dict[str, str] = {}

    def activate(self, name: str) -> MiniCluster:
        cluster = self._clusters.setdefault(name, MiniCluster(CLUSTER_SPECS[name]))
        for other in self._clusters.values():
            if other is not cluster:
                other.stop()
        if name in self._start_failures:
            unavailable(self._start_failures[name])
        if cluster.running and not cluster.healthy():
            cluster.stop()  # a daemon died (e.g. a test killed it): start afresh
        if not cluster.running:
            self._start(name, cluster)
        return cluster

    def _start(self, name: str, cluster: MiniCluster) -> None:
        try:
            cluster.start()
        except MiniClusterError as exc:
            self._start_failures[name] = f"{name} could not start: {exc.one_line()}"
            unavailable(self._start_failures[name])

    def stop_all(self) -> None:
        for cluster in self._clusters.values():
            cluster.stop()


def unavailable(reason: str) -> None:
    """Fail in CI (a missing cluster must never pass silently), skip elsewhere."""
    if running_in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cluster_pool() -> Iterator[ClusterPool]:
    pool = ClusterPool()
    yield pool
    pool.stop_all()


@pytest.fixture(scope="session")
def capacity_cluster(cluster_pool: ClusterPool) -> MiniCluster:
    return cluster_pool.activate("capacity_cluster")


@pytest.fixture(scope="session")
def capacity_memory_cluster(cluster_pool: ClusterPool) -> MiniCluster:
    return cluster_pool.activate("capacity_memory_cluster")


@pytest.fixture(scope="session")
def fair_cluster(cluster_pool: ClusterPool) -> MiniCluster:
    return cluster_pool.activate("fair_cluster")


@pytest.fixture(scope="session")
def secure_cluster(cluster_pool: ClusterPool) -> MiniCluster:
    return cluster_pool.activate("secure_cluster")


@pytest.fixture(scope="session")
def colocation_cluster(cluster_pool: ClusterPool) -> MiniCluster:
    return cluster_pool.activate("colocation_cluster")


def cluster_fixture_of(item: pytest.Item) -> str | None:
    names = [name for name in VARIANT_ORDER if name in getattr(item, "fixturenames", ())]
    if len(names) > 1:
        raise pytest.UsageError(f"{item.nodeid} asks for two mini clusters: {names}")
    return names[0] if names else None


@pytest.fixture(autouse=True)
def _cluster_baseline(request: pytest.FixtureRequest) -> Iterator[None]:
    """Make sure the test's cluster runs, and put it back to baseline afterwards."""
    name = cluster_fixture_of(request.node)
    if name is None:
        yield
        return
    pool: ClusterPool = request.getfixturevalue("cluster_pool")
    cluster = pool.activate(name)
    yield
    if not cluster.healthy():
        cluster.stop()
        return
    try:
        cluster.reset()
    except BaseException:
        cluster.stop()  # the next test gets a fresh cluster instead of a dirty one
        raise


MEASURING_VARIANTS = frozenset({"colocation_cluster"})  # CPUs pinned, latency measured
# Variants with more tests than one worker should carry: their tests are dealt, in
# collection order, into this many xdist groups, so that many workers each start a copy.
SHARDS = {"capacity_cluster": 2}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark cluster tests ``yarn``; run plain tests first, then each variant together.

    Under pytest-xdist (``tests/run``) each variant's tests stay on one worker (the
    ``xdist_group`` of its name), so a worker runs one cluster at a time; the tests of a
    measuring variant are marked ``alone`` and run after the others, one at a time.
    ``tryfirst``: xdist's worker reads the ``xdist_group`` marks in its own hook of this
    name (it appends ``@group`` to the node id), and that hook would otherwise run
    before this one and find none, leaving every cluster test free to go to any worker.
    """
    shard_of = {item.nodeid: index % SHARDS[name] for name in SHARDS for index, item
                in enumerate(i for i in items if cluster_fixture_of(i) == name)}  # fmt: skip
    for item in items:
        name = cluster_fixture_of(item)
        if name is None:
            continue
        item.add_marker(pytest.mark.yarn)
        group = f"{name}-{shard_of[item.nodeid]}" if name in SHARDS else name
        item.add_marker(pytest.mark.xdist_group(group))
        if name in MEASURING_VARIANTS:
            item.add_marker(pytest.mark.alone)

    def group(item: pytest.Item) -> int:
        name = cluster_fixture_of(item)
        return 0 if name is None else 1 + VARIANT_ORDER.index(name)

    items.sort(key=group)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the daemon logs of the test's cluster to a failed test's report."""
    report = yield
    name = cluster_fixture_of(item)
    if name is not None and report.failed and call.when == "call":
        cluster = item.funcargs.get(name) if hasattr(item, "funcargs") else None
        if isinstance(cluster, MiniCluster):
            report.sections.append(("mini cluster logs", cluster.logs_tail(25)))
    return report
