"""What mini cluster to start: scheduler, configuration store, node sizes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Scheduler = Literal["capacity", "fair"]
ConfStore = Literal["file", "memory"]

# Three leaf queues under root so tests can move capacity between them. The AM share
# is raised from the 10% default so several small applications can run in one queue of
# a small test node; node-locality-delay -1 stops the scheduler from waiting for a
# locality match that a single-host cluster gives no reason to wait for.
DEFAULT_CAPACITY_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <property><name>yarn.scheduler.capacity.maximum-applications</name><value>1000</value></property>
  <property><name>yarn.scheduler.capacity.maximum-am-resource-percent</name><value>0.5</value></property>
  <property><name>yarn.scheduler.capacity.node-locality-delay</name><value>-1</value></property>
  <property><name>yarn.scheduler.capacity.root.queues</name><value>default,a,b</value></property>
  <property><name>yarn.scheduler.capacity.root.default.capacity</name><value>40</value></property>
  <property><name>yarn.scheduler.capacity.root.default.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>30</value></property>
  <property><name>yarn.scheduler.capacity.root.a.maximum-capacity</name><value>100</value></property>
  <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value></property>
  <property><name>yarn.scheduler.capacity.root.b.maximum-capacity</name><value>100</value></property>
</configuration>
"""

DEFAULT_FAIR_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<allocations>
  <queue name="default"><weight>1.0</weight></queue>
  <queue name="a"><weight>1.0</weight></queue>
  <queue name="b"><weight>1.0</weight></queue>
  <queueMaxAMShareDefault>0.5</queueMaxAMShareDefault>
  <queuePlacementPolicy>
    <rule name="specified" create="false"/>
    <rule name="default" queue="default"/>
  </queuePlacementPolicy>
</allocations>
"""


@dataclass(frozen=True)
class MiniClusterSpec:
    """The shape of one mini cluster; equal specs describe interchangeable clusters."""

    scheduler: Scheduler = "capacity"
    conf_store: ConfStore = "file"
    nodemanagers: int = 1
    nm_memory_mb: int = 8192
    nm_vcores: int = 8
    min_allocation_mb: int = 128
    scheduler_xml: str | None = None
    yarn_site: Mapping[str, str] = field(default_factory=dict, hash=False)
    # Kerberos (MiniKdc; SPNEGO on every web UI and REST API) and HTTPS only
    # (a generated CA): see yarn_adapt.minicluster.security. The harness talks REST to
    # such a cluster; its Java clients (bin/yarn rmadmin, app submission) are not
    # logged in to Kerberos, so the secured variant serves REST clients only.
    kerberos: bool = False
    https: bool = False
    # One CPU list per NodeManager (e.g. ("0", "1")): each NM JVM and its containers
    # run in a cgroup v1 cpuset of their own (yarn_adapt.minicluster.cpusets), so the
    # NMs behave as separate machines. Empty: no cpusets.
    nm_cpusets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.scheduler not in ("capacity", "fair"):
            raise ValueError(f"scheduler must be 'capacity' or 'fair', not {self.scheduler!r}")
        if self.conf_store not in ("file", "memory"):
            raise ValueError(f"conf_store must be 'file' or 'memory', not {self.conf_store!r}")
        if self.conf_store == "memory" and self.scheduler != "capacity":
            raise ValueError(
                "conf_store='memory' needs the capacity scheduler (MutableConfScheduler)"
            )
        if self.nodemanagers < 1 or self.nm_memory_mb < self.min_allocation_mb:
            raise ValueError("need at least one NodeManager with room for one container")
        if self.nm_cpusets and len(self.nm_cpusets) != self.nodemanagers:
            raise ValueError("nm_cpusets needs one CPU list per NodeManager")
        object.__setattr__(self, "yarn_site", MappingProxyType(dict(self.yarn_site)))

    @property
    def initial_scheduler_xml(self) -> str:
        if self.scheduler_xml is not None:
            return self.scheduler_xml
        return DEFAULT_CAPACITY_XML if self.scheduler == "capacity" else DEFAULT_FAIR_XML

    @property
    def scheduler_file_name(self) -> str:
        return "capacity-scheduler.xml" if self.scheduler == "capacity" else "fair-scheduler.xml"

    @property
    def label(self) -> str:
        """A short name for logs and directory names, e.g. ``capacity-memory``."""
        base = f"{self.scheduler}-{self.conf_store}" if self.scheduler == "capacity" else "fair"
        secured = [name for name, on in (("kerberos", self.kerberos), ("https", self.https)) if on]
        pinned = ["cpusets"] if self.nm_cpusets else []
        return "-".join([base, *secured, *pinned])
