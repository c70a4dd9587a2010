"""The configuration files of a mini cluster, as text.

Values follow the research notes (shared/research/yarn.md §5.2) and the Hadoop 3.4
``*-default.xml`` names; every deviation from the Hadoop defaults is there to make a
one-host test cluster start quickly and schedule without waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from xml.sax.saxutils import escape

from yarn_adapt.minicluster.jars import HadoopJars
from yarn_adapt.minicluster.layout import HOST, ClusterLayout, Ports
from yarn_adapt.minicluster.security import KerberosRealm
from yarn_adapt.minicluster.spec import MiniClusterSpec

CAPACITY_SCHEDULER = (
    "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler"
)
SHUFFLE_HANDLER = "org.apache.hadoop.mapred.ShuffleHandler"
FAIR_SCHEDULER = "org.apache.hadoop.yarn.server.resourcemanager.scheduler.fair.FairScheduler"

# Resolved by Hadoop's Configuration from a -D system property of each NodeManager JVM,
# so several NodeManagers share one yarn-site.xml but not their directories.
NM_DIR_PROPERTY = "yarn.adapt.nm.dir"
NM_PORT_PROPERTY = "yarn.adapt.nm.port"  # the NM's RPC port, the port of its node id

# Small JVMs for MR containers; C1 only and the serial GC keep their start cheap.
TASK_JAVA_OPTS = "-Xmx200m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
TASK_MEMORY_MB = "256"
CONTAINER_JVM_ENV = "JAVA_TOOL_OPTIONS=-XX:+UseSerialGC -XX:TieredStopAtLevel=1"

LOG4J_PROPERTIES = """\
# Console logging for every daemon and client; the harness sends each process's
# output to its own file. Override the level per process with -Dhadoop.root.logger.
hadoop.root.logger=INFO,console
log4j.rootLogger=${hadoop.root.logger}
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.metrics2=WARN
log4j.logger.org.eclipse.jetty=WARN
log4j.logger.http.requests=WARN
"""


def site_xml(properties: Mapping[str, str]) -> str:
    """A Hadoop ``<configuration>`` document holding ``properties``."""
    rows = "".join(
        f"  <property><name>{escape(name)}</name><value>{escape(value)}</value></property>\n"
        for name, value in properties.items()
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<configuration>\n{rows}</configuration>\n'


def application_classpath(layout: ClusterLayout, jars: HadoopJars) -> str:
    return f"{layout.conf_dir},{jars.classpath_glob}"


def core_site(layout: ClusterLayout) -> dict[str, str]:
    """Where a cluster's daemons keep their files: all under its own directory. (The
    RM's node-attribute and node-label stores default to /tmp/hadoop-yarn-<user>/,
    whatever hadoop.tmp.dir says: RMs of clusters started side by side then share one
    store, and one RM's transition to active failed on the other's files. YARN reads
    them from core-site too, and every daemon of every variant reads this one.)"""
    return {
        "fs.defaultFS": "file:///",
        "hadoop.tmp.dir": str(layout.tmp_dir),
        "yarn.node-attribute.fs-store.root-dir": (layout.tmp_dir / "node-attribute").as_uri(),
        "yarn.node-labels.fs-store.root-dir": (layout.tmp_dir / "node-labels").as_uri(),
    }


def yarn_site(
    spec: MiniClusterSpec, layout: ClusterLayout, ports: Ports, jars: HadoopJars
) -> dict[str, str]:
    properties = {
        **_resourcemanager_properties(ports),
        **nodemanager_properties(spec),
        **_scheduler_properties(spec, layout),
        "yarn.application.classpath": application_classpath(layout, jars),
        "yarn.log-aggregation-enable": "false",
        "yarn.timeline-service.enabled": "false",
    }
    properties.update(spec.yarn_site)
    return properties


def _resourcemanager_properties(ports: Ports) -> dict[str, str]:
    return {
        "yarn.resourcemanager.hostname": HOST,
        "yarn.resourcemanager.address": ports.address("rm_client"),
        "yarn.resourcemanager.scheduler.address": ports.address("rm_scheduler"),
        "yarn.resourcemanager.resource-tracker.address": ports.address("rm_tracker"),
        "yarn.resourcemanager.admin.address": ports.address("rm_admin"),
        "yarn.resourcemanager.webapp.address": ports.address("rm_web"),
        "yarn.resourcemanager.recovery.enabled": "false",
        # NodeManagers start together with the RM: retry its ports quickly instead of
        # the 30 s default interval.
        "yarn.resourcemanager.connect.retry-interval.ms": "200",
        "yarn.resourcemanager.connect.max-wait.ms": "120000",
        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms": "500",
        # A failed AM fails the test at once rather than after a second attempt.
        "yarn.resourcemanager.am.max-attempts": "1",
    }


def nodemanager_properties(spec: MiniClusterSpec) -> dict[str, str]:
    nm_dir = "${" + NM_DIR_PROPERTY + "}"
    nm_port = "${" + NM_PORT_PROPERTY + "}"
    return {
        "yarn.nodemanager.hostname": HOST,
        # 0 at first start; the same port again when a NodeManager is restarted, so it
        # registers under the same node id (host:port)
        "yarn.nodemanager.address": f"{HOST}:{nm_port}",
        "yarn.nodemanager.localizer.address": f"{HOST}:0",
        "yarn.nodemanager.webapp.address": f"{HOST}:0",
        "yarn.nodemanager.local-dirs": f"{nm_dir}/local",
        "yarn.nodemanager.log-dirs": f"{nm_dir}/logs",
        "yarn.nodemanager.recovery.dir": f"{nm_dir}/recovery",
        "yarn.nodemanager.resource.memory-mb": str(spec.nm_memory_mb),
        "yarn.nodemanager.resource.cpu-vcores": str(spec.nm_vcores),
        "yarn.nodemanager.vmem-check-enabled": "false",
        "yarn.nodemanager.pmem-check-enabled": "false",
        # Developer and CI disks are often more than 90 % full, which would mark the
        # only node UNHEALTHY.
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99",
        "yarn.nodemanager.aux-services": "mapreduce_shuffle",
        "yarn.nodemanager.aux-services.mapreduce_shuffle.class": SHUFFLE_HANDLER,
        # Reaches every container JVM, including application masters whose command
        # line the harness does not control (distributed shell).
        "yarn.nodemanager.admin-env": f"MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,{CONTAINER_JVM_ENV}",
    }


def _scheduler_properties(spec: MiniClusterSpec, layout: ClusterLayout) -> dict[str, str]:
    common = {
        "yarn.scheduler.minimum-allocation-mb": str(spec.min_allocation_mb),
        "yarn.scheduler.maximum-allocation-mb": str(spec.nm_memory_mb),
        "yarn.scheduler.maximum-allocation-vcores": str(spec.nm_vcores),
    }
    if spec.scheduler == "fair":
        return {
            **common,
            "yarn.resourcemanager.scheduler.class": FAIR_SCHEDULER,
            "yarn.scheduler.fair.allocation.file": str(layout.conf_dir / spec.scheduler_file_name),
            "yarn.scheduler.fair.user-as-default-queue": "false",
            # One container per node heartbeat (the default) makes multi-container
            # applications trickle in.
            "yarn.scheduler.fair.assignmultiple": "true",
        }
    capacity = {**common, "yarn.resourcemanager.scheduler.class": CAPACITY_SCHEDULER}
    if spec.conf_store == "memory":
        capacity["yarn.scheduler.configuration.store.class"] = "memory"
    return capacity


def mapred_site(layout: ClusterLayout, ports: Ports, jars: HadoopJars) -> dict[str, str]:
    return {
        "mapreduce.framework.name": "yarn",
        "mapreduce.application.classpath": application_classpath(layout, jars),
        "yarn.app.mapreduce.am.staging-dir": str(layout.staging_dir),
        "mapreduce.jobhistory.address": ports.address("jhs_client"),
        "mapreduce.jobhistory.webapp.address": ports.address("jhs_web"),
        "mapreduce.jobhistory.admin.address": ports.address("jhs_admin"),
        # Finished jobs move from the intermediate to the done directory every second
        # instead of every three minutes.
        "mapreduce.jobhistory.move.interval-ms": "1000",
        "mapreduce.jobhistory.jhist.format": "json",
        "mapreduce.jobhistory.recovery.enable": "false",
        "mapreduce.am.max-attempts": "1",
        "yarn.app.mapreduce.am.resource.mb": TASK_MEMORY_MB,
        "yarn.app.mapreduce.am.command-opts": TASK_JAVA_OPTS,
        "mapreduce.map.memory.mb": TASK_MEMORY_MB,
        "mapreduce.reduce.memory.mb": TASK_MEMORY_MB,
        "mapreduce.map.java.opts": TASK_JAVA_OPTS,
        "mapreduce.reduce.java.opts": TASK_JAVA_OPTS,
        "mapreduce.task.io.sort.mb": "16",
        "mapreduce.client.completion.pollinterval": "500",
        # Any free port, so several clusters can run at once. It must be here: the
        # ShuffleHandler reads a JobConf, where mapred-default.xml (13562) is loaded
        # after yarn-site.xml and would win over a value set there.
        "mapreduce.shuffle.port": "0",
    }


# --------------------------------------------------------------------------- secured clusters

AUTH_FILTER_INITIALIZER = "org.apache.hadoop.security.AuthenticationFilterInitializer"
# Every HTTP/* principal of the keytab (HTTP/127.0.0.1 and HTTP/localhost), whatever
# host name a client canonicalised 127.0.0.1 to (KerberosAuthenticationHandler).
ANY_HTTP_PRINCIPAL = "*"


def kerberos_core_site(realm: KerberosRealm) -> dict[str, str]:
    """Kerberos for RPC, SPNEGO for every web UI and REST API (the RM swaps in its own
    filter that also takes delegation tokens, RMWebAppUtil.setupSecurityAndFilters)."""
    return {
        "hadoop.security.authentication": "kerberos",
        "hadoop.http.filter.initializers": AUTH_FILTER_INITIALIZER,
        "hadoop.http.authentication.type": "kerberos",
        "hadoop.http.authentication.simple.anonymous.allowed": "false",
        "hadoop.http.authentication.kerberos.principal": ANY_HTTP_PRINCIPAL,
        "hadoop.http.authentication.kerberos.keytab": str(realm.keytab),
    }


def kerberos_yarn_site(realm: KerberosRealm) -> dict[str, str]:
    keytab, principals = str(realm.keytab), realm.principals
    return {
        "yarn.resourcemanager.principal": principals.resourcemanager,
        "yarn.resourcemanager.keytab": keytab,
        "yarn.resourcemanager.webapp.spnego-principal": ANY_HTTP_PRINCIPAL,
        "yarn.resourcemanager.webapp.spnego-keytab-file": keytab,
        "yarn.nodemanager.principal": principals.nodemanager,
        "yarn.nodemanager.keytab": keytab,
        "yarn.nodemanager.webapp.spnego-principal": ANY_HTTP_PRINCIPAL,
        "yarn.nodemanager.webapp.spnego-keytab-file": keytab,
    }


def kerberos_mapred_site(realm: KerberosRealm) -> dict[str, str]:
    keytab = str(realm.keytab)
    return {
        "mapreduce.jobhistory.principal": realm.principals.historyserver,
        "mapreduce.jobhistory.keytab": keytab,
        "mapreduce.jobhistory.webapp.spnego-principal": ANY_HTTP_PRINCIPAL,
        "mapreduce.jobhistory.webapp.spnego-keytab-file": keytab,
    }


def https_yarn_site(ports: Ports) -> dict[str, str]:
    """HTTPS only, on the ports the plain cluster serves HTTP on."""
    return {
        "yarn.http.policy": "HTTPS_ONLY",
        "yarn.resourcemanager.webapp.https.address": ports.address("rm_web"),
        "yarn.nodemanager.webapp.https.address": f"{HOST}:0",
    }


def https_mapred_site(ports: Ports) -> dict[str, str]:
    return {
        "mapreduce.jobhistory.http.policy": "HTTPS_ONLY",
        "mapreduce.jobhistory.webapp.https.address": ports.address("jhs_web"),
    }
