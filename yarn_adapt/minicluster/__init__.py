"""A real YARN mini cluster for tests and benchmarks.

ResourceManager, NodeManager(s) and MapReduce JobHistory Server run as separate JVMs
from the Maven Central Hadoop jars (``tests/hadoop/pom.xml``) on 127.0.0.1::

    from yarn_adapt.minicluster import MiniCluster, MiniClusterSpec

    with MiniCluster(MiniClusterSpec(scheduler="capacity")) as cluster:
        app = cluster.submit_sleep_app("a", containers=2, sleep_s=5)
        cluster.wait_for_app(app.application_id())

No pytest here: ``yarn-adapt bench`` reuses the same harness.
"""

from yarn_adapt.minicluster.apps import SubmittedApp
from yarn_adapt.minicluster.cluster import (
    TERMINAL_APP_STATES,
    MiniCluster,
    stop_all_clusters,
)
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.jars import HadoopJars, find_java_home, resolve_hadoop_jars
from yarn_adapt.minicluster.spec import (
    DEFAULT_CAPACITY_XML,
    DEFAULT_FAIR_XML,
    MiniClusterSpec,
)

__all__ = [
    "DEFAULT_CAPACITY_XML",
    "DEFAULT_FAIR_XML",
    "TERMINAL_APP_STATES",
    "HadoopJars",
    "MiniCluster",
    "MiniClusterError",
    "MiniClusterSpec",
    "SubmittedApp",
    "find_java_home",
    "resolve_hadoop_jars",
    "stop_all_clusters",
]
