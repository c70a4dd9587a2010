"""The testbed's YARN: two NodeManagers, each pinned to one CPU, as two machines; and
what the testbed reads of them (their node ids and JVMs, an application's preempted
containers)."""

from __future__ import annotations

import time
from pathlib import Path

import requests

from preemption.nodemanager import NODEMANAGER_CLASS, java_main_class
from preemption.procfs import ProcFs
from yarn_adapt.minicluster.cluster import MiniCluster
from yarn_adapt.minicluster.confgen import NM_DIR_PROPERTY
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.spec import MiniClusterSpec

# A vcore is a quarter of a CPU: each "machine" is one CPU advertised as 4 vcores, and
# the scheduler counts vcores (DRF) as well as memory. Batch work runs in "default",
# whose one user may fill the cluster (user-limit-factor 3 x its 40 % guarantee).
DRF_CAPACITY_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <property><name>yarn.scheduler.capacity.resource-calculator</name><value>org.apache.hadoop.yarn.util.resource.DominantResourceCalculator</value></property>
  <property><name>yarn.scheduler.capacity.maximum-applications</name><value>1000</value></property>
  <property><name>yarn.scheduler.capacity.maximum-am-resource-percent</name><value>0.5</value></property>
  <property><name>yarn.scheduler.capacity.node-locality-delay</name><value>-1</value></property>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>default,a,b</value></property>
  <property><name>yarn.scheduler.capacity.root.default.capacity</name><value>40</value></property>
  <property><name>yarn.scheduler.capacity.root.default.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.default.user-limit-factor</name><value>3</value></property>
  <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>30</value></property>
  <property><name>yarn.scheduler.capacity.root.a.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value></property>
  <property><name>yarn.scheduler.capacity.root.b.maximum-capacity</name><value>100</value></property>
</configuration>
"""

NODE_VCORES = 4
NODE_MEMORY_MB = 4096
NODE_CPU_MILLICORES = 1000  # one CPU per "machine" (its cpuset)
MILLICORES_PER_VCORE = NODE_CPU_MILLICORES // NODE_VCORES

COLOCATION_SPEC = MiniClusterSpec(
    scheduler="capacity",
    conf_store="memory",
    nodemanagers=2,
    nm_memory_mb=NODE_MEMORY_MB,
    nm_vcores=NODE_VCORES,
    scheduler_xml=DRF_CAPACITY_XML,
    nm_cpusets=("0", "1"),
)


def nodemanager_id(cluster: MiniCluster, index: int, timeout_s: float = 30.0) -> str:
    """The node id NodeManager ``index`` registered as (from its log)."""
    log_path = cluster.layout.logs_dir / f"nodemanager-{index}.log"
    deadline = time.monotonic() + timeout_s
    marker = "Registered with ResourceManager as "
    while time.monotonic() < deadline:
        for line in log_path.read_text(errors="replace").splitlines():
            if marker in line:
                return line.split(marker, 1)[1].split()[0]
        time.sleep(0.2)
    raise MiniClusterError(f"nodemanager-{index} did not log its node id ({log_path})")


def nodemanager_pid(cluster: MiniCluster, index: int) -> int:
    """NodeManager ``index``'s JVM, for its agent to verify (the agent trusts no process
    by its command line: it is given this pid)."""
    nm_dir = cluster.layout.nodemanager_dir(index)
    pid = nodemanager_jvm(nm_dir)
    if pid is None:
        raise MiniClusterError(f"nodemanager-{index}: no JVM with -D{NM_DIR_PROPERTY}={nm_dir}")
    return pid


def nodemanager_jvm(nm_dir: Path) -> int | None:
    """The NodeManager JVM started with ``nm_dir`` as its directory property (other
    mini clusters may run on the host), or None."""
    marker = f"-D{NM_DIR_PROPERTY}={nm_dir}"
    procfs = ProcFs()
    for pid in procfs.pids():
        argv = procfs.cmdline(pid)
        if marker in argv and java_main_class(argv) == NODEMANAGER_CLASS:
            return pid
    return None


def await_answer(url: str, timeout_s: float) -> None:

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise MiniClusterError(f"{url} did not answer within {timeout_s:.0f} s")


def preempted(cluster: MiniCluster, app_id: str) -> int:
    app = cluster.app(app_id)
    return int(app.get("numNonAMContainerPreempted", 0)) + int(
        app.get("numAMContainerPreempted", 0)
    )
