"""Two real ResourceManagers in one HA group, for testing standby handling.

Both RMs run from the same Maven Central jars as :class:`MiniCluster`, with
``yarn.resourcemanager.ha.enabled=true``, automatic failover off and RM recovery off,
so no ZooKeeper is needed: the active one is chosen by hand with
``rmadmin -transitionToActive`` (HAAdmin). By default no NodeManager is started;
standby behaviour is a property of the RM's web filter (RMWebAppFilter) and needs
none. With ``nodemanagers=N`` that many NodeManagers run with the HA pair's addresses:
they register with the active RM, and with the other after a fail-over (which, with
recovery off, knows nothing of what the first was told -- ``updateNodeResource``
included). The scheduler configuration store is ``memory`` so ``PUT
/scheduler-conf`` works.

    with HAResourceManagerPair() as pair:      # rm1 active, rm2 standby
        pair.fail_over("rm1", "rm2")           # now rm2 active
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from yarn_adapt.minicluster import confgen
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.jars import HadoopJars, find_java_home, resolve_hadoop_jars
from yarn_adapt.minicluster.javacmd import CLIENT_HEAP_MB, JavaCommands
from yarn_adapt.minicluster.layout import HOST, ClusterLayout, Ports
from yarn_adapt.minicluster.processes import (
    ManagedProcess,
    kill_marked_processes,
    launch,
    marked_env,
    start_reaper,
)
from yarn_adapt.minicluster.rest import answers, poll
from yarn_adapt.minicluster.spec import DEFAULT_CAPACITY_XML, MiniClusterSpec

RM_IDS = ("rm1", "rm2")
CLUSTER_ID = "yarn-adapt-ha"
RM_ADMIN_CLI = "org.apache.hadoop.yarn.client.cli.RMAdminCLI"
ADMIN_TIMEOUT_S = 120.0
_RM_ROLES = {
    "address": "rm_client",
    "scheduler.address": "rm_scheduler",
    "resource-tracker.address": "rm_tracker",
    "admin.address": "rm_admin",
    "webapp.address": "rm_web",
}


def ha_yarn_site(ports: dict[str, Ports], rm_id: str | None) -> dict[str, str]:
    """yarn-site.xml of one member: every member's addresses, plus its own id (None: a
    NodeManager's, which finds the active member by trying each)."""
    properties = {
        "yarn.resourcemanager.ha.enabled": "true",
        "yarn.resourcemanager.ha.rm-ids": ",".join(ports),
        **({"yarn.resourcemanager.ha.id": rm_id} if rm_id else {}),
        "yarn.resourcemanager.cluster-id": CLUSTER_ID,
        "yarn.resourcemanager.ha.automatic-failover.enabled": "false",
        "yarn.resourcemanager.recovery.enabled": "false",
        "yarn.resourcemanager.scheduler.class": confgen.CAPACITY_SCHEDULER,
        # Writable through the REST API, so a write sent to the standby can be shown
        # to land on the active RM.
        "yarn.scheduler.configuration.store.class": "memory",
        "yarn.timeline-service.enabled": "false",
        # A NodeManager (or client) that finds the standby fails over to the other
        # member after a back-off that defaults to the RM retry interval (30 s in the
        # NodeManager); 0.2-1 s here, or each fail-over costs the tests a minute.
        "yarn.client.failover-sleep-base-ms": "200",
        "yarn.client.failover-sleep-max-ms": "1000",
    }
    for member, member_ports in ports.items():
        properties[f"yarn.resourcemanager.hostname.{member}"] = HOST
        for suffix, role in _RM_ROLES.items():
            properties[f"yarn.resourcemanager.{suffix}.{member}"] = member_ports.address(role)
    return properties


class HAResourceManagerPair:
    """rm1 and rm2 on 127.0.0.1; after start() rm1 is active and rm2 standby."""

    def __init__(
        self,
        *,
        base_dir: Path | None = None,
        jars: HadoopJars | None = None,
        start_timeout_s: float = 180.0,
        nodemanagers: int = 0,
        nm_memory_mb: int = 2048,
        nm_vcores: int = 2,
    ) -> None:
        self.nm_spec = MiniClusterSpec(
            nodemanagers=max(1, nodemanagers), nm_memory_mb=nm_memory_mb, nm_vcores=nm_vcores
        )
        self.nodemanagers = nodemanagers
        self._base_dir = base_dir
        self._jars = jars
        self.start_timeout_s = start_timeout_s
        self.root: Path | None = None
        self._ports: dict[str, Ports] = {}
        self._java: dict[str, JavaCommands] = {}
        self._daemons: dict[str, ManagedProcess] = {}
        self._reaper: ManagedProcess | None = None

    def __enter__(self) -> HAResourceManagerPair:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses

    def web_url(self, rm_id: str) -> str:
        return f"http://{HOST}:{self._member_ports(rm_id).rm_web}"

    @property
    def web_urls(self) -> tuple[str, ...]:
        return tuple(self.web_url(rm_id) for rm_id in RM_IDS)

    def _member_ports(self, rm_id: str) -> Ports:
        if rm_id not in self._ports:
            raise MiniClusterError(f"no running ResourceManager {rm_id!r}")
        return self._ports[rm_id]

    def _root(self) -> Path:
        if self.root is None:
            raise MiniClusterError("the HA pair has not been started")
        return self.root

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> HAResourceManagerPair:
        jars, java_home = self._jars or resolve_hadoop_jars(), find_java_home()
        self.root = Path(tempfile.mkdtemp(prefix="yarn-adapt-ha-", dir=self._base_dir))
        self._reaper = start_reaper(self.root, self.root / "reaper.log")
        self._ports = {rm_id: Ports.pick() for rm_id in RM_IDS}
        try:
            for rm_id in RM_IDS:
                self._java[rm_id] = JavaCommands(java_home, jars, self._prepare(rm_id))
                self._launch(rm_id)
            for rm_id in RM_IDS:
                self.wait_for_state(rm_id, "STANDBY", self.start_timeout_s)
            self.transition(RM_IDS[0], "active")
            if self.nodemanagers:
                self._start_nodemanagers(java_home, jars)
                self.wait_for_nodes(RM_IDS[0], self.nodemanagers, self.start_timeout_s)
        except BaseException:
            self.stop(keep_dir=True)
            raise
        return self

    def _prepare(self, rm_id: str) -> ClusterLayout:
        layout = ClusterLayout(self._root() / rm_id)
        layout.create()
        files = {
            "core-site.xml": confgen.site_xml(confgen.core_site(layout)),
            "yarn-site.xml": confgen.site_xml(ha_yarn_site(self._ports, rm_id)),
            "capacity-scheduler.xml": DEFAULT_CAPACITY_XML,
            "log4j.properties": confgen.LOG4J_PROPERTIES,
        }
        for name, text in files.items():
            (layout.conf_dir / name).write_text(text)
        return layout

    def _launch(self, rm_id: str) -> None:
        java = self._java[rm_id]
        env = marked_env(self._root(), {"JAVA_HOME": str(java.java_home),
                                        "HADOOP_CONF_DIR": str(java.layout.conf_dir)})  # fmt: skip
        log = java.layout.logs_dir / "resourcemanager.log"
        self._daemons[rm_id] = launch(rm_id, java.resource_manager(), log, env, java.layout.root)

    def _start_nodemanagers(self, java_home: Path, jars: HadoopJars) -> None:
        layout = ClusterLayout(self._root() / "nodemanagers")
        layout.create()
        site = {**ha_yarn_site(self._ports, None), **confgen.nodemanager_properties(self.nm_spec)}
        files = {
            "core-site.xml": confgen.site_xml(confgen.core_site(layout)),
            "yarn-site.xml": confgen.site_xml(site),
            # several ShuffleHandlers on one host: any free port each (see mapred_site)
            "mapred-site.xml": confgen.site_xml({"mapreduce.shuffle.port": "0"}),
            "log4j.properties": confgen.LOG4J_PROPERTIES,
        }
        for name, text in files.items():
            (layout.conf_dir / name).write_text(text)
        java = JavaCommands(java_home, jars, layout)
        env = marked_env(self._root(), {"JAVA_HOME": str(java_home),
                                        "HADOOP_CONF_DIR": str(layout.conf_dir)})  # fmt: skip
        for index in range(self.nodemanagers):
            layout.nodemanager_dir(index).mkdir(exist_ok=True)
            name = f"nodemanager-{index}"
            log = layout.logs_dir / f"{name}.log"
            self._daemons[name] = launch(name, java.node_manager(index), log, env, layout.root)

    def nodes(self, rm_id: str) -> list[dict[str, object]]:
        """The RUNNING nodes as ``rm_id`` lists them (its own answer, never redirected:
        ask the active member)."""
        body = answers(f"{self.web_url(rm_id)}/ws/v1/cluster/nodes?states=RUNNING")
        found = ((body or {}).get("nodes") or {}).get("node") or []
        return found if isinstance(found, list) else [found]

    def wait_for_nodes(self, rm_id: str, count: int, timeout_s: float = 120.0) -> None:
        def registered() -> bool | None:
            for name, process in self._daemons.items():
                if not process.alive():
                    raise MiniClusterError(f"{name} exited (log: {process.log_path})")
            return True if len(self.nodes(rm_id)) >= count else None

        poll(registered, timeout_s, f"{count} NodeManager(s) RUNNING on {rm_id}", 0.3)

    def stop(self, *, keep_dir: bool = False) -> None:
        for process in self._daemons.values():
            process.kill_group()
        self._daemons.clear()
        if self.root is not None:
            kill_marked_processes(self.root)
        if self._reaper is not None:
            self._reaper.kill_group()
            self._reaper = None
        if self.root is not None and not keep_dir:
            shutil.rmtree(self.root, ignore_errors=True)

    def kill(self, rm_id: str) -> None:
        """SIGKILL one ResourceManager (its web port then refuses connections)."""
        self._daemons.pop(rm_id).kill_group()

    # ------------------------------------------------------------------ HA state

    def ha_state(self, rm_id: str) -> str | None:
        """``haState`` from the RM's own /info (never redirected), None if it is down."""
        body = answers(f"{self.web_url(rm_id)}/ws/v1/cluster/info")
        state = ((body or {}).get("clusterInfo") or {}).get("haState")
        return str(state) if state else None

    def wait_for_state(self, rm_id: str, state: str, timeout_s: float = 60.0) -> None:
        def reached() -> bool | None:
            self._fail_if_dead(rm_id)
            return True if self.ha_state(rm_id) == state else None

        poll(reached, timeout_s, f"{rm_id} to report haState {state}", 0.3)

    def _fail_if_dead(self, rm_id: str) -> None:
        process = self._daemons.get(rm_id)
        if process is not None and not process.alive():
            raise MiniClusterError(f"{rm_id} exited during start (log: {process.log_path})")

    def transition(self, rm_id: str, to: str) -> None:
        """``rmadmin -transitionToActive|-transitionToStandby rm_id``, then wait for it."""
        flag = {"active": "-transitionToActive", "standby": "-transitionToStandby"}[to]
        done = self.rmadmin(flag, rm_id)
        if done.returncode != 0:
            raise MiniClusterError(f"rmadmin {flag} {rm_id} failed: {java_failure(done.stderr)}")
        self.wait_for_state(rm_id, to.upper())

    def fail_over(self, from_id: str, to_id: str) -> None:
        self.transition(from_id, "standby")
        self.transition(to_id, "active")

    def rmadmin(self, *args: str) -> subprocess.CompletedProcess[str]:
        java = self._java[RM_IDS[0]]
        command = [
            str(java.java_home / "bin" / "java"), *java.base_flags(CLIENT_HEAP_MB),
            "-Dhadoop.root.logger=WARN,console", "-cp", java.classpath, RM_ADMIN_CLI, *args,
        ]  # fmt: skip
        env = marked_env(self._root(), {"HADOOP_CONF_DIR": str(java.layout.conf_dir)})
        return subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=ADMIN_TIMEOUT_S, check=False)  # fmt: skip


def java_failure(stderr: str) -> str:
    """What a failed Java command says went wrong: the exception lines (a stack trace's
    ``Caused by:`` lines name the cause, its tail only where it was thrown), else the
    output's last 300 characters."""
    causes = [
        line.strip() for line in stderr.splitlines()
        if ("Exception" in line or "Error" in line) and not line.lstrip().startswith("at ")
    ]  # fmt: skip
    return " | ".join(causes)[-600:] if causes else stderr.strip()[-300:]
