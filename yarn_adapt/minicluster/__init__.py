"""A real YARN mini cluster for tests and benchmarks.

ResourceManager, NodeManager(s) and MapReduce JobHistory Server run as separate JVMs
from the Maven Central Hadoop jars (``tests/hadoop/pom.xml``) on 127.0.0.1::

    from yarn_adapt.minicluster import MiniCluster, MiniClusterSpec

    with MiniCluster(MiniClusterSpec(scheduler="capacity")) as cluster:
        app = cluster.submit_sleep_app("a", containers=2, sleep_s=5)
        cluster.wait_for_app(app.application_id())

No pytest here: ``yarn-adapt bench`` reuses the same harness.

- ``cluster`` / ``spec``: start the RM, NodeManagers and JobHistory as separate JVMs;
  ``ha``: an RM HA pair without ZooKeeper; ``jars``: resolves the Maven Central jars of
  ``tests/hadoop/pom.xml`` once into a cache; ``processes`` / ``reaper``: no JVM
  outlives its owner, even after SIGKILL; ``confgen``, ``javacmd``, ``layout``,
  ``rest``, ``schedconf``, ``apps`` (``submit_shell_app`` runs any command in
  distributed-shell containers), ``errors`` (``MiniClusterError``).
- ``security``: a secured cluster (``MiniClusterSpec(kerberos=True, https=True)``).
  Hadoop's MiniKdc (``hadoop-minikdc``, run through its standalone ``main`` as one more
  reaped JVM) creates the principals and one keytab; the harness writes its own
  ``krb5.conf`` (KDC on 127.0.0.1 over TCP, no DNS or reverse-DNS canonicalisation) for
  the JVMs (``-Djava.security.krb5.conf``) and for Python (``$KRB5_CONFIG``, set while
  the cluster runs). Daemon principals name the host (``rm/127.0.0.1@YARN-ADAPT.TEST``,
  not ``_HOST``, which Hadoop resolves differently per code path); the web filters
  accept every ``HTTP/*`` principal of the keytab (``HTTP/127.0.0.1``,
  ``HTTP/localhost``). RPC is Kerberos, every web UI and REST API is SPNEGO (the RM's
  own kerberos/delegation-token filter), and the NodeManager runs with the
  ``DefaultContainerExecutor``: it starts and registers over Kerberos (the
  ``LinuxContainerExecutor`` is needed only to run containers as their submitting user,
  which the secured tests do not do). HTTPS only: a CA and a server certificate for
  127.0.0.1/localhost made with ``cryptography``, in a PKCS#12 keystore named by
  ``ssl-server.xml``. The harness's own REST calls use SPNEGO and the CA
  (``rest.RestAccess``).
- ``redis_server``: a real redis-server in a temporary directory (free port, optional
  AOF, kill and restart on the same port) for the tracing tests and ``bench
  trace-risk``.
- ``cpusets``: ``MiniClusterSpec(nm_cpusets=("0", "1"))`` pins each NodeManager JVM and
  every container it forks to its own CPUs with a cgroup v1 cpuset
  (``/sys/fs/cgroup/cpuset/yarn-adapt-<cluster dir>/nm-<i>``; the daemon joins before
  ``exec`` through a ``sh`` wrapper), so NodeManagers on one host behave as separate
  machines; a ``cpu`` group with a weight of its own can hold the cluster's work too.
  ``stop()`` and the reaper remove the groups.
- ``machines``: each pinned NodeManager runs in a mount namespace of its own that
  shows it its machine in ``/proc/stat``, ``/proc/meminfo`` and ``/proc/cpuinfo`` (its
  CPUs, its memory), so the node utilization it reports to the RM is its node's,
  not the host's.
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
