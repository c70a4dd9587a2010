"""The testbed's YARN: two NodeManagers, each pinned to one CPU, as two machines."""

from __future__ import annotations

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

COLOCATION_SPEC = MiniClusterSpec(
    scheduler="capacity",
    conf_store="memory",
    nodemanagers=2,
    nm_memory_mb=NODE_MEMORY_MB,
    nm_vcores=NODE_VCORES,
    scheduler_xml=DRF_CAPACITY_XML,
    nm_cpusets=("0", "1"),
)
