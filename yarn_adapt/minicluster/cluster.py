"""A real YARN cluster (RM + NodeManagers + JobHistory Server) on 127.0.0.1.

Each daemon is a separate JVM started by main class from the Maven Central jars, with
a generated configuration directory. The cluster is meant for tests and benchmarks:
it starts in seconds, picks its own free ports, keeps every file under one temporary
directory, and leaves no process behind however its owner ends.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from yarn_adapt.minicluster import confgen, cpusets, schedconf
from yarn_adapt.minicluster.apps import SubmittedApp
from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.jars import HadoopJars, find_java_home, resolve_hadoop_jars
from yarn_adapt.minicluster.javacmd import JavaCommands
from yarn_adapt.minicluster.layout import HOST, ClusterLayout, Ports, free_ports
from yarn_adapt.minicluster.machines import Machine, MachineViews, cpu_list
from yarn_adapt.minicluster.processes import (
    ManagedProcess,
    kill_marked_processes,
    launch,
    marked_env,
    start_reaper,
)
from yarn_adapt.minicluster.rest import PLAIN, RestAccess, answers, get_json, poll, send
from yarn_adapt.minicluster.security import (
    KerberosRealm,
    TlsMaterial,
    await_kdc,
    make_tls_material,
    ssl_server_properties,
)
from yarn_adapt.minicluster.spec import MiniClusterSpec

KEEP_DIR_ENV = "YARN_ADAPT_KEEP_MINICLUSTER"
KRB5_CONFIG_ENV = "KRB5_CONFIG"
TERMINAL_APP_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})
ACTIVE_APP_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
PORT_CLASH_SIGNS = (
    "java.net.BindException",
    "Address already in use",
    # an RPC client read "HTTP" (0x48545450) as a length: the RPC port it was given is
    # a web server's, e.g. a NodeManager's web app that took the ResourceManager's
    # picked port (as an ephemeral one) before the ResourceManager bound it
    "RPC response has a length of 1213486160",
)
START_ATTEMPTS = 2
CLIENT_TIMEOUT_S = 120.0
QUEUE_SETTLE_S = 12.0  # the Fair Scheduler drops emptied queues every 10 s


def port_clash(log_tail: str) -> bool:
    """Whether a daemon's last log lines say it lost a port it was given."""
    return any(sign in log_tail for sign in PORT_CLASH_SIGNS)


class _PortClash(MiniClusterError):
    """A daemon lost one of its ports to another process between pick and bind."""


class MiniCluster:
    """Start with ``with MiniCluster(spec) as cluster:`` or start()/stop()."""

    def __init__(
        self,
        spec: MiniClusterSpec | None = None,
        *,
        base_dir: Path | None = None,
        jars: HadoopJars | None = None,
        start_timeout_s: float = 180.0,
        keep_dir: bool | None = None,
    ) -> None:
        self.spec = spec or MiniClusterSpec()
        self.start_timeout_s = start_timeout_s
        self.start_seconds: float | None = None
        self._base_dir = base_dir
        self._jars = jars
        self._keep_dir = keep_dir if keep_dir is not None else bool(os.environ.get(KEEP_DIR_ENV))
        self._layout: ClusterLayout | None = None
        self._ports: Ports | None = None
        self._nm_ports: tuple[int, ...] = ()  # each NodeManager's RPC port: its node id's
        self._java: JavaCommands | None = None
        self._daemons: dict[str, ManagedProcess] = {}
        self._clients: list[ManagedProcess] = []
        # Log names stay unique across resets: a reused name would show an old app id.
        self._client_numbers = itertools.count()
        self._reaper: ManagedProcess | None = None
        self._machines: MachineViews | None = None
        self._baseline_mtime_ns = 0
        self._baseline_store: dict[str, str] = {}
        self._baseline_queues: frozenset[str] = frozenset()
        self._state_lock = threading.RLock()  # stop() may re-enter from a signal handler
        self._kdc: ManagedProcess | None = None
        self._realm: KerberosRealm | None = None
        self._tls: TlsMaterial | None = None
        self._rest: RestAccess = PLAIN
        self._saved_krb5_config: tuple[str | None] | None = None
        self._running = False
        self.rm_restarts = 0

    # ------------------------------------------------------------------ addresses

    @property
    def running(self) -> bool:
        return self._running

    @property
    def layout(self) -> ClusterLayout:
        if self._layout is None:
            raise MiniClusterError("the mini cluster has not been started")
        return self._layout

    @property
    def ports(self) -> Ports:
        if self._ports is None:
            raise MiniClusterError("the mini cluster has not been started")
        return self._ports

    @property
    def root(self) -> Path:
        return self.layout.root

    @property
    def conf_dir(self) -> Path:
        return self.layout.conf_dir

    @property
    def scheduler_xml_path(self) -> Path:
        """The file the RM reads its scheduler configuration from."""
        return self.layout.conf_dir / self.spec.scheduler_file_name

    @property
    def yarn_script(self) -> Path:
        return self.layout.yarn_script

    def nm_cpuset(self, index: int) -> Path | None:
        """The cpuset NodeManager ``index`` and its containers run in (None: unpinned)."""
        if not self.spec.nm_cpusets:
            return None
        return cpusets.group_for(self.root) / f"nm-{index}"

    @property
    def refresh_command(self) -> list[str]:
        """``yarn rmadmin -refreshQueues`` for this cluster."""
        return [str(self.yarn_script), "rmadmin", "-refreshQueues"]

    @property
    def scheme(self) -> str:
        return "https" if self.spec.https else "http"

    @property
    def rm_url(self) -> str:
        return f"{self.scheme}://{HOST}:{self.ports.rm_web}"

    @property
    def jhs_url(self) -> str:
        return f"{self.scheme}://{HOST}:{self.ports.jhs_web}"

    @property
    def kerberos(self) -> KerberosRealm:
        """The KDC's realm, keytab and krb5.conf (a ``kerberos`` spec only)."""
        if self._realm is None:
            raise MiniClusterError("this mini cluster has no Kerberos realm")
        return self._realm

    @property
    def tls(self) -> TlsMaterial:
        """The CA clients must trust (an ``https`` spec only)."""
        if self._tls is None:
            raise MiniClusterError("this mini cluster serves no HTTPS")
        return self._tls

    def client_env(self) -> dict[str, str]:
        """Environment a client process needs: ``KRB5_CONFIG`` on a Kerberized cluster."""
        return {KRB5_CONFIG_ENV: str(self._realm.krb5_conf)} if self._realm else {}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> MiniCluster:
        """Start every daemon and return once all of them answer over REST."""
        if self._running:
            return self
        began = time.monotonic()
        self._prepare_directory()
        _LIVE_CLUSTERS.add(self)
        _install_exit_hooks()
        self._running = True
        self._reaper = start_reaper(self.root, self.layout.logs_dir / "reaper.log")
        try:
            self._start_security()
            self._start_daemons(began + self.start_timeout_s)
        except BaseException:
            self.stop(keep_dir=True)
            raise
        self._record_baseline()
        self.start_seconds = time.monotonic() - began
        return self

    def _prepare_directory(self) -> None:
        jars = self._jars or resolve_hadoop_jars()
        prefix = f"yarn-adapt-{self.spec.label}-"
        self._layout = ClusterLayout(Path(tempfile.mkdtemp(prefix=prefix, dir=self._base_dir)))
        self._layout.create()
        self._java = JavaCommands(java_home=find_java_home(), jars=jars, layout=self._layout)

    def stop(self, *, keep_dir: bool | None = None) -> None:
        """Kill every process of the cluster; safe to call twice and from signal handlers."""
        with self._state_lock:
            if not self._running:
                return
            self._running = False
        for process in [*self._clients, *self._daemons.values(), *self._security_processes()]:
            process.kill_group()
        self._kdc = None
        self._restore_krb5_config()
        if self._layout is not None:
            kill_marked_processes(self._layout.root)
        if self._reaper is not None:
            self._reaper.kill_group()
        if self._machines is not None:
            self._machines.stop()
            self._machines = None
        if self._layout is not None:
            cpusets.remove(self._layout.root)
        # Forget the handles so no later kill can hit a process group id the kernel
        # has since given to someone else.
        self._clients.clear()
        self._daemons.clear()
        self._reaper = None
        _LIVE_CLUSTERS.discard(self)
        if self._layout is not None and not (self._keep_dir if keep_dir is None else keep_dir):
            shutil.rmtree(self._layout.root, ignore_errors=True)

    def healthy(self) -> bool:
        """Running, with every daemon process still alive."""
        processes = [*self._daemons.values(), *self._security_processes()]
        return self._running and all(p.alive() for p in processes)

    def control_pids(self) -> list[int]:
        """The processes that are not a "machine": the ResourceManager, the JobHistory
        Server (and the KDC of a Kerberized cluster)."""
        daemons = [d for name, d in self._daemons.items() if not name.startswith("nodemanager")]
        return [process.pid for process in [*daemons, *self._security_processes()]]

    def _security_processes(self) -> list[ManagedProcess]:
        return [self._kdc] if self._kdc is not None else []

    # ------------------------------------------------------------------ security

    def _start_security(self) -> None:
        """TLS material, then the KDC: both outlive a restart after a port clash."""
        flags: list[str] = []
        if self.spec.https:
            self._tls = make_tls_material(self.layout.security_dir / "tls")
        if self.spec.kerberos:
            self._realm = self._start_kdc()
            flags.append(f"-Djava.security.krb5.conf={self._realm.krb5_conf}")
            self._use_krb5_config(self._realm.krb5_conf)
        self._java = replace(self._java_commands(), extra_flags=tuple(flags))
        self._rest = self._rest_access()

    def _start_kdc(self) -> KerberosRealm:
        work_dir = self.layout.security_dir / "kdc"
        work_dir.mkdir(parents=True, exist_ok=True)
        log = self.layout.logs_dir / "kdc.log"
        command = self._java_commands().kdc(work_dir)
        env = marked_env(self.layout.root, self._java_env())
        self._kdc = launch("kdc", command, log, env, cwd=self.layout.root)
        return await_kdc(work_dir, log, self._kdc.alive)

    def _use_krb5_config(self, path: Path) -> None:
        """MIT Kerberos in this process (the harness's own SPNEGO) reads $KRB5_CONFIG;
        the previous value comes back at stop()."""
        if self._saved_krb5_config is None:
            self._saved_krb5_config = (os.environ.get(KRB5_CONFIG_ENV),)
        os.environ[KRB5_CONFIG_ENV] = str(path)

    def _restore_krb5_config(self) -> None:
        if self._saved_krb5_config is None:
            return
        (previous,) = self._saved_krb5_config
        if previous is None:
            os.environ.pop(KRB5_CONFIG_ENV, None)
        else:
            os.environ[KRB5_CONFIG_ENV] = previous
        self._saved_krb5_config = None

    def _rest_access(self) -> RestAccess:
        verify: bool | str = str(self._tls.ca_cert) if self._tls else True
        if self._realm is None:
            return RestAccess(verify=verify)
        from yarn_adapt.yarn.spnego import spnego_auth

        auth = spnego_auth(self._realm.principals.client, str(self._realm.keytab))
        return RestAccess(auth=auth, verify=verify)

    def _start_daemons(self, deadline: float) -> None:
        for attempt in range(1, START_ATTEMPTS + 1):
            self._ports = Ports.pick()
            self._nm_ports = free_ports(self.spec.nodemanagers)
            self._write_configuration()
            self._launch_daemons()
            try:
                self._wait_until_ready(deadline)
                return
            except _PortClash:
                if attempt == START_ATTEMPTS:
                    raise
                for process in self._daemons.values():
                    process.kill_group()

    def _write_configuration(self) -> None:
        layout, ports, java = self.layout, self.ports, self._java_commands()
        files = {
            "core-site.xml": confgen.site_xml(confgen.core_site(layout)),
            "yarn-site.xml": confgen.site_xml(confgen.yarn_site(self.spec, layout, ports,
                                                                java.jars)),
            "mapred-site.xml": confgen.site_xml(confgen.mapred_site(layout, ports, java.jars)),
            "log4j.properties": confgen.LOG4J_PROPERTIES,
            **self._secured_files(),
        }  # fmt: skip
        for name, text in files.items():
            (layout.conf_dir / name).write_text(text)
        self.write_scheduler_xml(self.spec.initial_scheduler_xml)
        layout.yarn_script.write_text(java.yarn_script())
        layout.yarn_script.chmod(0o755)

    def _secured_files(self) -> dict[str, str]:
        """core/yarn/mapred-site.xml of a secured cluster (replacing the plain ones),
        and ssl-server.xml."""
        if not (self.spec.kerberos or self.spec.https):
            return {}
        layout, ports, java = self.layout, self.ports, self._java_commands()
        core = confgen.core_site(layout)
        yarn = confgen.yarn_site(self.spec, layout, ports, java.jars)
        mapred = confgen.mapred_site(layout, ports, java.jars)
        files: dict[str, str] = {}
        if self._realm is not None:
            core |= confgen.kerberos_core_site(self._realm)
            yarn |= confgen.kerberos_yarn_site(self._realm)
            mapred |= confgen.kerberos_mapred_site(self._realm)
        if self._tls is not None:
            yarn |= confgen.https_yarn_site(ports)
            mapred |= confgen.https_mapred_site(ports)
            files["ssl-server.xml"] = confgen.site_xml(ssl_server_properties(self._tls))
        yarn |= dict(self.spec.yarn_site)  # the spec's own properties still win
        files["core-site.xml"] = confgen.site_xml(core)
        files["yarn-site.xml"] = confgen.site_xml(yarn)
        files["mapred-site.xml"] = confgen.site_xml(mapred)
        return files

    def _launch_daemons(self) -> None:
        java = self._java_commands()
        commands = {
            "resourcemanager": java.resource_manager(),
            "historyserver": java.history_server(),
        }
        for index in range(self.spec.nodemanagers):
            self.layout.nodemanager_dir(index).mkdir(exist_ok=True)
            commands[f"nodemanager-{index}"] = self._nodemanager_command(index)
        self._daemons = {name: self._launch(name, command) for name, command in commands.items()}

    def _nodemanager_command(self, index: int) -> list[str]:
        """NodeManager ``index`` on its own RPC port; when the spec pins it, in its cpuset
        and seeing its own machine in /proc (:mod:`~yarn_adapt.minicluster.machines`)."""
        command = self._java_commands().node_manager(index, self._nm_ports[index])
        if not self.spec.nm_cpusets:
            return command
        groups = cpusets.create(self.root, self.spec.nm_cpusets)
        machine = self._machine_views(groups).machines[index]
        return machine.wrap(cpusets.wrap(command, groups[index]))

    def _machine_views(self, groups: Sequence[Path]) -> MachineViews:
        if self._machines is None:
            machines = [
                Machine(self.root / "machines" / f"nm-{index}", tuple(cpu_list(cpus)),
                        self.spec.nm_memory_mb, groups[index])
                for index, cpus in enumerate(self.spec.nm_cpusets)
            ]  # fmt: skip
            self._machines = MachineViews(machines).start()
        return self._machines

    def _launch(self, name: str, command: list[str]) -> ManagedProcess:
        env = marked_env(self.layout.root, self._java_env())
        log = self.layout.logs_dir / f"{name}.log"
        return launch(name, command, log, env, cwd=self.layout.root)

    def _java_env(self) -> dict[str, str]:
        return {"JAVA_HOME": str(self._java_commands().java_home),
                "HADOOP_CONF_DIR": str(self.layout.conf_dir)}  # fmt: skip

    def _java_commands(self) -> JavaCommands:
        if self._java is None:
            raise MiniClusterError("the mini cluster has not been started")
        return self._java

    # ------------------------------------------------------------------ readiness

    def _wait_until_ready(self, deadline: float) -> None:
        checks = {
            "ResourceManager active": self._rm_active,
            f"{self.spec.nodemanagers} NodeManager(s) RUNNING": self._nodes_running,
            "JobHistory Server answering": self._history_answering,
        }
        pending = dict(checks)
        while pending:
            self._fail_if_a_daemon_died()
            pending = {what: check for what, check in pending.items() if not check()}
            if pending and time.monotonic() >= deadline:
                raise MiniClusterError(
                    f"mini cluster not ready after {self.start_timeout_s:.0f} s: "
                    f"{', '.join(pending)} not reached (logs in {self.layout.logs_dir})"
                )
            if pending:
                time.sleep(0.2)

    def _rm_active(self) -> bool:
        info = answers(f"{self.rm_url}/ws/v1/cluster/info", self._rest)
        cluster = (info or {}).get("clusterInfo", {})
        return bool(cluster.get("haState") == "ACTIVE" and cluster.get("state") == "STARTED")

    def _nodes_running(self) -> bool:
        body = answers(f"{self.rm_url}/ws/v1/cluster/nodes?states=RUNNING", self._rest)
        return len(_nodes_of(body)) >= self.spec.nodemanagers

    def _history_answering(self) -> bool:
        return answers(f"{self.jhs_url}/ws/v1/history/info", self._rest) is not None

    def _fail_if_a_daemon_died(self) -> None:
        for process in self._daemons.values():
            if process.alive():
                continue
            tail = _tail(process.log_path, 400)
            error = _PortClash if port_clash(tail) else MiniClusterError
            raise error(
                f"{process.name} exited with code {process.popen.returncode} during start; "
                f"last error: {_last_error(tail)} (log: {process.log_path})"
            )

    def _record_baseline(self) -> None:
        self._baseline_mtime_ns = self.scheduler_xml_path.stat().st_mtime_ns
        self.layout.admin_marker.unlink(missing_ok=True)
        if not self._baseline_queues:
            self._baseline_queues = self.queue_paths()
        if self.spec.conf_store == "memory" and not self._baseline_store:
            self._baseline_store = self.scheduler_conf()

    # ------------------------------------------------------------------ REST

    def rm_get(self, path: str) -> Any:
        """JSON of ``/ws/v1/cluster/<path>`` on the RM."""
        return get_json(f"{self.rm_url}/ws/v1/cluster/{path.lstrip('/')}", self._rest)

    def jhs_get(self, path: str) -> Any:
        """JSON of ``/ws/v1/history/<path>`` on the JobHistory Server."""
        return get_json(f"{self.jhs_url}/ws/v1/history/{path.lstrip('/')}", self._rest)

    def node_ids(self) -> list[str]:
        return sorted(node["id"] for node in _nodes_of(self.rm_get("nodes")))

    def queue_paths(self) -> frozenset[str]:
        """Every queue the scheduler reports, as full paths (``root.a``)."""
        info = self.rm_get("scheduler")["scheduler"]["schedulerInfo"]
        top = info.get("rootQueue", info)
        return frozenset(_queue_paths(top)) | {"root"}

    def scheduler_conf(self) -> dict[str, str]:
        """The RM's mutable scheduler configuration (memory store only)."""
        body = self.rm_get("scheduler-conf")
        return {p["name"]: p["value"] for p in _as_list(body.get("property"))}

    def put_scheduler_conf(self, sched_conf_xml: str) -> tuple[int, str]:
        """PUT a ``<sched-conf>`` body; returns the status and the RM's plain-text answer."""
        response = send(
            "PUT", f"{self.rm_url}/ws/v1/cluster/scheduler-conf", self._rest,
            data=sched_conf_xml.encode(),
            headers={"Content-Type": "application/xml", "Accept": "application/json"},
        )  # fmt: skip
        return response.status_code, response.text

    def set_node_resource(self, node_id: str, memory_mb: int, vcores: int) -> None:
        """POST /nodes/{id}/resource, then wait until /nodes/{id} reports the new total."""
        body = {"resource": {"memory": memory_mb, "vCores": vcores}, "overCommitTimeout": -1}
        url = f"{self.rm_url}/ws/v1/cluster/nodes/{node_id}/resource"
        response = send("POST", url, self._rest, json=body, headers={"Accept": "application/json"})
        if response.status_code != 200:
            raise MiniClusterError(f"POST {url} -> HTTP {response.status_code}: {response.text}")
        wanted = (memory_mb, vcores)
        poll(lambda: True if self._node_total(node_id) == wanted else None, 30,
             f"node {node_id} to report {memory_mb} MB / {vcores} vcores")  # fmt: skip

    def _node_total(self, node_id: str) -> tuple[int, int]:
        total = self.rm_get(f"nodes/{node_id}")["node"]["totalResource"]
        return int(total["memory"]), int(total["vCores"])

    # ------------------------------------------------------------------ commands

    def yarn(
        self, *args: str, timeout_s: float = CLIENT_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run ``bin/yarn ARGS`` to completion and return its output."""
        return subprocess.run(
            [str(self.yarn_script), *args], capture_output=True, text=True, timeout=timeout_s,
            env=marked_env(self.layout.root, {}), cwd=self.layout.home_dir, check=False,
        )  # fmt: skip

    def rmadmin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``yarn rmadmin ARGS``; a refused command has a non-zero return code."""
        return self.yarn("rmadmin", *args)

    def refresh_queues(self) -> subprocess.CompletedProcess[str]:
        return self.rmadmin("-refreshQueues")

    def submit_sleep_app(
        self,
        queue: str,
        containers: int,
        sleep_s: float,
        container_mb: int = 256,
        vcores: int = 1,
        name: str = "sleep",
        am_mb: int = 256,
    ) -> SubmittedApp:
        """Submit a distributed-shell app running ``sleep sleep_s`` in ``containers`` containers."""
        return self._submit("distributed-shell", name, [
            "distributedshell", "-appname", name, "-queue", queue,
            "-shell_command", "sleep", "-shell_args", f"{sleep_s:g}",
            "-num_containers", str(containers),
            "-container_memory", str(container_mb), "-container_vcores", str(vcores),
            "-master_memory", str(am_mb), "-master_vcores", "1",
            "-timeout", str(int((sleep_s + 3600) * 1000)),
        ])  # fmt: skip

    def submit_shell_app(
        self,
        queue: str,
        containers: int,
        command: str,
        args: Sequence[str] = (),
        *,
        container_mb: int = 256,
        vcores: int = 1,
        name: str = "shell",
        am_mb: int = 256,
        timeout_s: float = 3600.0,
    ) -> SubmittedApp:
        """Submit a distributed-shell app running ``command args`` in ``containers``
        containers (e.g. a CPU burner as batch work)."""
        shell_args = ["-shell_args", *args] if args else []
        return self._submit("distributed-shell", name, [
            "distributedshell", "-appname", name, "-queue", queue,
            "-shell_command", command, *shell_args,
            "-num_containers", str(containers),
            "-container_memory", str(container_mb), "-container_vcores", str(vcores),
            "-master_memory", str(am_mb), "-master_vcores", "1",
            "-timeout", str(int(timeout_s * 1000)),
        ])  # fmt: skip

    def submit_mr_sleep_job(
        self,
        queue: str,
        maps: int = 2,
        reduces: int = 1,
        map_ms: int = 1000,
        reduce_ms: int = 1000,
        task_mb: int = 256,
    ) -> SubmittedApp:
        """Submit the MapReduce SleepJob (job name ``Sleep job``) into ``queue``."""
        return self._submit("mapreduce", "sleepjob", [
            "sleepjob", f"-Dmapreduce.job.queuename={queue}",
            f"-Dmapreduce.map.memory.mb={task_mb}", f"-Dmapreduce.reduce.memory.mb={task_mb}",
            "-m", str(maps), "-r", str(reduces), "-mt", str(map_ms), "-rt", str(reduce_ms),
        ])  # fmt: skip

    def _submit(self, kind: str, name: str, args: list[str]) -> SubmittedApp:
        if not self._running:
            raise MiniClusterError("cannot submit: the mini cluster is not running")
        log = self.layout.logs_dir / f"client-{next(self._client_numbers):03d}-{name}.log"
        env = marked_env(self.layout.root, {})
        client = launch(name, [str(self.yarn_script), *args], log, env, cwd=self.layout.home_dir)
        self._clients.append(client)
        return SubmittedApp(self, client, kind)

    # ------------------------------------------------------------------ applications

    def app(self, app_id: str) -> dict[str, Any]:
        app: dict[str, Any] = self.rm_get(f"apps/{app_id}")["app"]
        return app

    def wait_for_app(
        self, app_id: str, timeout_s: float = 300.0, states: Iterable[str] = TERMINAL_APP_STATES
    ) -> dict[str, Any]:
        """Wait until the RM reports ``app_id`` in one of ``states``; return its /apps entry."""
        wanted = frozenset(states)

        def reached() -> dict[str, Any] | None:
            app = self.app(app_id)
            return app if app["state"] in wanted else None

        return poll(reached, timeout_s, f"{app_id} to reach {'/'.join(sorted(wanted))}", 0.25)

    def wait_for_history_job(self, job_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Wait until the JobHistory Server serves ``job_id``; return its /jobs/{id} entry."""

        def served() -> dict[str, Any] | None:
            body = answers(f"{self.jhs_url}/ws/v1/history/mapreduce/jobs/{job_id}", self._rest)
            return None if body is None else dict(body["job"])

        return poll(served, timeout_s, f"JobHistory to serve {job_id}", 0.5)

    def kill_app(self, app_id: str) -> None:
        url = f"{self.rm_url}/ws/v1/cluster/apps/{app_id}/state"
        send(
            "PUT", url, self._rest, json={"state": "KILLED"}, headers={"Accept": "application/json"}
        )

    def kill_active_apps(self, timeout_s: float = 60.0) -> list[str]:
        """Kill every application not yet finished and wait until the RM agrees."""
        states = ",".join(ACTIVE_APP_STATES)
        active = [app["id"] for app in _apps_of(self.rm_get(f"apps?states={states}"))]
        for app_id in active:
            self.kill_app(app_id)
        for app_id in active:
            self.wait_for_app(app_id, timeout_s)
        return active

    # ------------------------------------------------------------------ baseline

    def write_scheduler_xml(self, text: str) -> None:
        """Replace the scheduler file atomically (the RM never sees half a file)."""
        target = self.scheduler_xml_path
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(text)
        partial.replace(target)

    def read_scheduler_xml(self) -> str:
        return self.scheduler_xml_path.read_text()

    def reset(self) -> None:
        """Back to the state right after start: no running apps, node sizes, scheduler config."""
        # Clients first, so none can submit after the RM was asked what runs.
        for client in self._clients:
            client.kill_group()
        self._clients.clear()
        self.kill_active_apps()
        self._restore_node_resources()
        self.restore_initial_scheduler_config()

    def restore_initial_scheduler_config(self) -> None:
        """Make the RM run the spec's initial scheduler configuration again.

        Cheap when nothing changed: the file is compared with the baseline, the memory
        store with what the RM held after start, and ``bin/yarn`` marks every admin
        command it ran. Queues that cannot be removed while RUNNING are stopped first;
        if the RM still refuses, it is restarted from the baseline file.
        """
        file_changed = self._scheduler_file_changed()
        if file_changed:
            self.write_scheduler_xml(self.spec.initial_scheduler_xml)
        if self.spec.conf_store == "memory":
            restored = self._restore_memory_store()
        elif file_changed or self.layout.admin_marker.exists():
            restored = self.refresh_queues().returncode == 0
        else:
            restored = True
        if not (restored and self._queues_back_to_baseline()):
            self.restart_resourcemanager()
        self._record_baseline()

    def _queues_back_to_baseline(self) -> bool:
        # The Fair Scheduler drops a queue that left the allocation file only once it is
        # empty, on a later update pass, so give it a few seconds.
        try:
            poll(lambda: True if self.queue_paths() == self._baseline_queues else None,
                 QUEUE_SETTLE_S, "the baseline queues")  # fmt: skip
        except MiniClusterError:
            return False
        return True

    def _scheduler_file_changed(self) -> bool:
        # The mtime catches an edit that was later undone: the Fair Scheduler may have
        # reloaded it in between.
        mtime_ns = self.scheduler_xml_path.stat().st_mtime_ns
        text = self.read_scheduler_xml()
        return text != self.spec.initial_scheduler_xml or mtime_ns != self._baseline_mtime_ns

    def _restore_memory_store(self) -> bool:
        current = self.scheduler_conf()
        if current == self._baseline_store:
            return True
        extra = schedconf.capacity_queues(current) - schedconf.capacity_queues(self._baseline_store)
        if extra:
            self.put_scheduler_conf(schedconf.stop_queues_body(extra))
        send("GET", f"{self.rm_url}/ws/v1/cluster/scheduler-conf/format", self._rest)
        return self.scheduler_conf() == self._baseline_store

    def _restore_node_resources(self) -> None:
        wanted = (self.spec.nm_memory_mb, self.spec.nm_vcores)
        for node_id in self.node_ids():
            if self._node_total(node_id) != wanted:
                self.set_node_resource(node_id, *wanted)

    def stop_resourcemanager(self) -> None:
        """Kill the RM alone (clients then find nothing listening); the cluster is
        unhealthy until :meth:`restart_resourcemanager`."""
        self._daemons["resourcemanager"].kill_group()

    def restart_resourcemanager(self) -> None:
        """Kill and start the RM again (it forgets all apps); NodeManagers re-register."""
        self.rm_restarts += 1
        self._daemons["resourcemanager"].kill_group()
        self._daemons["resourcemanager"] = self._launch(
            "resourcemanager", self._java_commands().resource_manager()
        )
        deadline = time.monotonic() + self.start_timeout_s
        self._wait_until_ready(deadline)

    def nodemanager_id(self, index: int) -> str:
        """The node id (``host:port``) NodeManager ``index`` registers under."""
        port = f":{self._nm_ports[index]}"
        found = [node_id for node_id in self.node_ids() if node_id.endswith(port)]
        if len(found) != 1:
            raise MiniClusterError(f"the RM lists no node on port {port[1:]} (NodeManager {index})")
        return found[0]

    def restart_nodemanager(self, index: int, *, down_s: float = 0.0) -> None:
        """Kill NodeManager ``index`` and start it again on the same port, so it registers
        under the same node id with the total it is configured with; waits until the RM
        has taken the new registration (the node's web address changes: its web port is
        picked afresh) and lists the node RUNNING."""
        node_id = self.nodemanager_id(index)
        before = self._node_record(node_id).get("nodeHTTPAddress")
        name = f"nodemanager-{index}"
        self._daemons[name].kill_group()
        time.sleep(down_s)
        self._daemons[name] = self._launch(name, self._nodemanager_command(index))

        def registered_again() -> bool | None:
            self._fail_if_a_daemon_died()
            node = self._node_record(node_id)
            again = node.get("nodeHTTPAddress") not in (None, before)
            return True if again and node.get("state") == "RUNNING" else None

        poll(registered_again, self.start_timeout_s, f"{node_id} to register again", 0.3)

    def _node_record(self, node_id: str) -> dict[str, Any]:
        found = [n for n in _nodes_of(self.rm_get("nodes")) if n["id"] == node_id]
        return found[0] if found else {}

    # ------------------------------------------------------------------ diagnostics

    def log_paths(self) -> list[Path]:
        if self._layout is None or not self._layout.logs_dir.is_dir():
            return []
        return sorted(self._layout.logs_dir.glob("*.log"))

    def logs_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of every daemon and client log, for failure reports."""
        return "\n".join(f"==> {path} <==\n{_tail(path, lines)}" for path in self.log_paths())


# ---------------------------------------------------------------------- helpers


def _as_list(value: Any) -> list[Any]:
    """Hadoop's JSON gives one element as an object and none as null."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _nodes_of(body: Any) -> list[dict[str, Any]]:
    return _as_list(((body or {}).get("nodes") or {}).get("node"))


def _apps_of(body: Any) -> list[dict[str, Any]]:
    return _as_list(((body or {}).get("apps") or {}).get("app"))


def _queue_paths(queue: dict[str, Any]) -> Iterator[str]:
    """Walk a Capacity (``queues.queue``) or Fair (``childQueues.queue``) queue tree."""
    children = queue.get("queues") or queue.get("childQueues") or {}
    for child in _as_list(children.get("queue")):
        yield child.get("queuePath") or child["queueName"]
        yield from _queue_paths(child)


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 200 * lines))
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _last_error(log_text: str) -> str:
    markers = ("Exception", "ERROR", "Error:")
    found = [line.strip() for line in log_text.splitlines() if any(m in line for m in markers)]
    return found[-1][:300] if found else "none logged"


# ---------------------------------------------------------------------- exit hooks

_LIVE_CLUSTERS: weakref.WeakSet[MiniCluster] = weakref.WeakSet()
_hooks_installed = False


def stop_all_clusters() -> None:
    """Stop every cluster this process started (used at exit and on SIGTERM/SIGHUP)."""
    for cluster in list(_LIVE_CLUSTERS):
        with suppress(Exception):
            cluster.stop()


def _install_exit_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(stop_all_clusters)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _stop_then_die)


def _stop_then_die(signum: int, frame: FrameType | None) -> None:
    stop_all_clusters()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
