"""Running a scenario on a real mini cluster: the scheduler file installed, the apps
submitted through the RM REST API with the distributed shell's own ApplicationMaster
(:class:`RestSubmitter`) or a client JVM each (:class:`ClientSubmitter`), and what the
RM reports of each app (:class:`RealRun`).
"""

from __future__ import annotations

import getpass
import re
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import requests

from yarn_adapt.bench.sim_fidelity.logs import read_timelines
from yarn_adapt.bench.sim_fidelity.scenarios import (
    AM_MB,
    APP_TIMEOUT_S,
    DS_APPLICATION_MASTER,
    FAIR_INCREMENT_PROPERTY,
    MIN_ALLOCATION_MB,
    NM_MEMORY_MB,
    NM_VCORES,
    Scenario,
    SleepApp,
)
from yarn_adapt.errors import SettingsError
from yarn_adapt.minicluster import (
    MiniCluster,
    MiniClusterError,
    MiniClusterSpec,
    resolve_hadoop_jars,
)
from yarn_adapt.minicluster.javacmd import DISTRIBUTED_SHELL_ARTIFACT
from yarn_adapt.minicluster.rest import send
from yarn_adapt.model import Application, AppState
from yarn_adapt.model.resources import Resources
from yarn_adapt.sim import ClusterSpec
from yarn_adapt.sim.calibration import (
    AppTimeline,
    SchedulerKind,
    normalisation_step,
)
from yarn_adapt.yarn.rm import ResourceManagerClient


@dataclass(frozen=True)
class RealApp:
    """One app as real YARN ran it: the RM's /apps entry and, from the RM and NM logs,
    its AM grant and task containers (epoch seconds)."""

    spec: SleepApp
    app: Application
    am_granted_s: float | None
    timeline: AppTimeline | None

    @property
    def submitted_s(self) -> float:
        return self.app.submitted_ms / 1000

    @property
    def latency_s(self) -> float:
        assert self.app.latency_ms is not None
        return self.app.latency_ms / 1000


@dataclass(frozen=True)
class RealRun:
    scenario: Scenario
    apps: tuple[RealApp, ...]
    cluster: ClusterSpec
    wall_s: float


def cluster_spec_for(scheduler: SchedulerKind, first_xml: str) -> MiniClusterSpec:
    """The scenarios' cluster. The Fair Scheduler rounds requests up to the memory
    increment (1024 MiB by default), not to the minimum allocation: setting it to
    the minimum keeps the scenarios' container sizes on both schedulers."""
    increment = {FAIR_INCREMENT_PROPERTY: str(MIN_ALLOCATION_MB)} if scheduler == "fair" else {}
    return MiniClusterSpec(
        scheduler=scheduler,
        nm_memory_mb=NM_MEMORY_MB,
        nm_vcores=NM_VCORES,
        min_allocation_mb=MIN_ALLOCATION_MB,
        scheduler_xml=first_xml,
        yarn_site=increment,
    )


def run_on_cluster(cluster: MiniCluster, scenario: Scenario, via: str = "rest") -> RealRun:
    """Install the scenario's scheduler file (RM restart), submit its apps at their
    offsets (``via`` REST or distributed-shell client JVMs), wait for all, read the
    results."""
    began = time.monotonic()
    install_scheduler_file(cluster, scenario.queues_xml)
    ids = _submit_all(cluster, scenario, via)
    for app_id in ids:
        cluster.wait_for_app(app_id, APP_TIMEOUT_S)
    apps = _finished_apps(cluster, ids)
    timelines = read_timelines(cluster, apps, [a.sleep_s for a in scenario.apps])
    real = tuple(
        RealApp(spec, app, timelines.am_granted.get(app.id), timelines.apps.get(app.id))
        for spec, app in zip(scenario.apps, apps, strict=True)
    )
    return RealRun(scenario, real, _observed_cluster(cluster), time.monotonic() - began)


def install_scheduler_file(cluster: MiniCluster, xml: str) -> None:
    """A clean RM on ``xml``: nothing left running, the file in place, RM restarted
    (queues may come and go between scenarios, which a refresh cannot always do)."""
    if cluster.read_scheduler_xml() == xml and not _apps_of(cluster.rm_get("apps")):
        return  # a fresh RM already on this file
    cluster.kill_active_apps()
    cluster.write_scheduler_xml(xml)
    cluster.restart_resourcemanager()


def _apps_of(body: object) -> list[object]:
    apps = body.get("apps") if isinstance(body, dict) else None
    return list(apps.get("app") or []) if isinstance(apps, dict) else []


def _submit_all(cluster: MiniCluster, scenario: Scenario, via: str) -> list[str]:
    """Submit each app at its offset; their ids in scenario order."""
    submit = RestSubmitter(cluster) if via == "rest" else ClientSubmitter(cluster)
    start = time.monotonic()
    pending: list[Callable[[], str]] = []
    for index, app in enumerate(scenario.apps):
        time.sleep(max(0.0, start + app.offset_s - time.monotonic()))
        pending.append(submit(app, f"{scenario.name}-{index:02d}"))
    return [app_id() for app_id in pending]


class ClientSubmitter:
    """The harness's way: one distributed-shell client JVM per app (it submits a
    few seconds after it starts, and its start-up competes for the CPU)."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster

    def __call__(self, app: SleepApp, name: str) -> Callable[[], str]:
        if app.user is not None:
            raise SettingsError(
                f"sim-fidelity: app {name} runs as {app.user!r}: submit=client cannot "
                "submit as another user, use submit=rest"
            )
        submitted = self.cluster.submit_sleep_app(
            app.queue,
            app.containers,
            app.sleep_s,
            container_mb=app.container_mb,
            vcores=app.vcores,
            name=name,
            am_mb=AM_MB,
        )
        return submitted.application_id


class RestSubmitter:
    """Submits the distributed shell's own ApplicationMaster through the RM REST API
    (``POST /apps``) with the launch context its client would build: AppMaster.jar,
    the command and its arguments as files the AM reads (Java modified UTF-8, as
    the client's ``writeUTF``), the CLASSPATH and the AM command line. No client
    JVM: the app is submitted at its offset to the millisecond and the host's cores
    are left to YARN."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster
        self.files = cluster.root / "fidelity-submit"
        self.files.mkdir(exist_ok=True)
        self.am_jar = resolve_hadoop_jars().jar(DISTRIBUTED_SHELL_ARTIFACT)
        self.classpath = "<CPS>".join(
            ["{{CLASSPATH}}", "./*", *_application_classpath(cluster), "./log4j.properties"]
        )

    def __call__(self, app: SleepApp, name: str) -> Callable[[], str]:
        user = app.user or getpass.getuser()
        reply = self._post("apps/new-application", None, user)
        app_id = str(reply.json()["application-id"])
        self._post("apps", self._submission(app_id, app, name), user)
        return lambda: app_id

    def _post(self, path: str, body: dict[str, object] | None, user: str) -> requests.Response:
        """POST as ``user`` (simple authentication: the RM takes ``user.name``)."""
        url = f"{self.cluster.rm_url}/ws/v1/cluster/{path}"
        reply = send(
            "POST",
            url,
            json=body,
            params={"user.name": user},
            headers={"Accept": "application/json"},
        )
        if reply.status_code not in (200, 202):
            first = (reply.text.strip().splitlines() or [""])[0][:200]
            raise MiniClusterError(f"POST {url} -> HTTP {reply.status_code}: {first}")
        return reply

    def _submission(self, app_id: str, app: SleepApp, name: str) -> dict[str, object]:
        resources = {
            "AppMaster.jar": self.am_jar,
            "shellCommands": self._utf_file("shellCommands", "sleep"),
            "shellArgs": self._utf_file(f"shellArgs-{app.sleep_s:g}", f"{app.sleep_s:g}"),
        }
        return {
            "application-id": app_id,
            "application-name": name,
            "queue": app.queue,
            "priority": 0,
            "unmanaged-AM": False,
            "max-app-attempts": 1,
            "application-type": "YARN",
            "keep-containers-across-application-attempts": False,
            "resource": {"memory": AM_MB, "vCores": 1},
            "am-container-spec": {
                "local-resources": {
                    "entry": [
                        {"key": key, "value": _local_resource(path)}
                        for key, path in resources.items()
                    ]
                },
                "environment": {"entry": [{"key": "CLASSPATH", "value": self.classpath}]},
                "commands": {"command": self._am_command(app, name)},
            },
        }

    def _am_command(self, app: SleepApp, name: str) -> str:
        home = self.cluster.layout.home_dir.as_uri()
        return (
            f'"{{{{JAVA_HOME}}}}/bin/java" -Xmx{AM_MB}m <ADD_OPENS> {DS_APPLICATION_MASTER}'
            f" --container_type GUARANTEED --container_memory {app.container_mb}"
            f" --container_vcores {app.vcores} --num_containers {app.containers} --priority 0"
            f" --appname {name} --homedir {home}"
            " 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"
        )

    def _utf_file(self, name: str, text: str) -> Path:
        """Written once: the NodeManager refuses a resource whose file changed."""
        path = self.files / name
        if not path.exists():
            data = text.encode()
            path.write_bytes(struct.pack(">H", len(data)) + data)
        return path


def _local_resource(path: Path) -> dict[str, object]:
    stat = path.stat()
    return {
        "resource": path.resolve().as_uri(),
        "type": "FILE",
        "visibility": "APPLICATION",
        "size": stat.st_size,
        "timestamp": stat.st_mtime_ns // 1_000_000,
    }


def _application_classpath(cluster: MiniCluster) -> list[str]:
    """``yarn.application.classpath`` of the cluster's yarn-site.xml."""
    value = site_value(cluster, "yarn.application.classpath")
    if value is None:
        raise MiniClusterError(f"{cluster.conf_dir}/yarn-site.xml: no yarn.application.classpath")
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def site_value(cluster: MiniCluster, name: str) -> str | None:
    text = (cluster.conf_dir / "yarn-site.xml").read_text()
    found = re.search(rf"<name>{re.escape(name)}</name>\s*<value>([^<]*)</value>", text)
    return found.group(1) if found else None


def _finished_apps(cluster: MiniCluster, ids: Sequence[str]) -> list[Application]:
    with ResourceManagerClient(cluster.rm_url) as rm:
        apps = [rm.app(app_id) for app_id in ids]
    for app in apps:
        if app.state is not AppState.FINISHED or app.finished_ms is None:
            raise MiniClusterError(
                f"{app.id} ({app.name}) ended {app.state}/{app.final_status}; "
                f"see {cluster.layout.logs_dir}"
            )
    return apps


def _observed_cluster(cluster: MiniCluster) -> ClusterSpec:
    """The RM's nodes, and the step the scheduler rounds requests to."""
    with ResourceManagerClient(cluster.rm_url) as rm:
        nodes = rm.nodes()
    spec = cluster.spec
    increment = spec.yarn_site.get(FAIR_INCREMENT_PROPERTY)
    step = normalisation_step(
        spec.scheduler, spec.min_allocation_mb, int(increment) if increment else None
    )
    return ClusterSpec.from_nodes(nodes, minimum_allocation=Resources(step, 1))


def nm_heartbeat_s(cluster: MiniCluster) -> float:
    """The cluster's yarn.resourcemanager.nodemanagers.heartbeat-interval-ms (YARN's
    default 1000 when unset)."""
    value = site_value(cluster, "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms")
    return int(value) / 1000 if value else 1.0
