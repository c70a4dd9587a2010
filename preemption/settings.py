"""The agent's settings: ``yarn-adapt-agent.toml`` into frozen dataclasses, one per table.

Every key has a default (``conf/yarn-adapt-agent.toml`` lists them all, commented), so
an empty file is a valid standalone configuration that reclaims nothing. An unknown
table or key, a value of the wrong type or out of range, or a file that is not TOML
raises :class:`~yarn_adapt.errors.SettingsError` naming the file and the key, on one
line; the agent never starts on half-read settings.

The service token (a per-node agent token the service issued for this node) is read
from ``YARN_ADAPT_AGENT_TOKEN``, else ``[service] token_file``, which must be mode
0600 (or stricter) and owned by the agent's user; it is never a plain setting and
never logged. A ``[service] url`` that is not on this host (loopback) must be
``https``: the token must not cross the network in clear.

Isolation (``[priority]``, ``[suppress]``, ``[memory]``, :mod:`preemption.isolation`):
on by default, whatever the guard asks: batch's CPU weight low, its CPU suppressed to
``capacity x target_utilisation`` minus what everything else uses, and its memory
capped under memory pressure. ``[priority] service_cpus`` (an exclusive cpuset for
the services, cgroup v2 only) is off unless set.

Kills: the agent never kills by default (``[yarn] kill = "never"``). Only with
``kill = "container"`` or ``"application"`` *and* ``[yarn] rm`` set, in either mode
(``standalone``, or ``service``: the guard's reclaim requests), does it ask the RM to
kill, and only a container the NodeManager lists as running: with a gradual strategy
after the demand has stayed unmet for ``[reclaim] grace_period_s`` with nothing left
to squeeze (one per ``kill_cooldown_s``); with ``strategy = "Kill"`` at once. The
memory eviction (after batch was capped under pressure for ``grace_period_s``)
follows the same switch.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from preemption.aliveness import AlivenessSettings
from preemption.cgroups.base import MemoryPolicy, relpath_problem
from preemption.classify import ClassifySettings
from preemption.isolation import (
    EvictionRules,
    MemorySettings,
    PrioritySettings,
    SuppressSettings,
    parse_cpu_list,
)
from preemption.isolator import IsolationSettings
from preemption.model import Amount, TaskKind
from preemption.nodemanager import NodeManagerIdentity
from preemption.reclaim import ReclaimSettings
from preemption.strategies import Strategy
from yarn_adapt.errors import SettingsError
from yarn_adapt.tomlsettings import read_sections, read_toml

TOKEN_ENV = "YARN_ADAPT_AGENT_TOKEN"
MODEL_KINDS = ("gbrt", "linear", "elasticnet")  # preemption.qos.MODEL_KINDS, without numpy


@dataclass(frozen=True, kw_only=True)
class AgentSection:
    node_id: str = ""  # as the RM and the service name the node; default: host name
    mode: str = "standalone"  # "service" or "standalone"
    dry_run: bool = False
    state_file: str = "/var/lib/yarn-adapt-agent/state.json"
    status_file: str = ""  # empty: status.json beside the state file
    interval_s: float = 1.0
    metrics_address: str = "127.0.0.1"
    metrics_port: int = 0  # 0: no metrics endpoint


@dataclass(frozen=True, kw_only=True)
class ServiceSection:
    url: str = ""
    token_file: str = ""
    poll_interval_s: float = 5.0
    ttl_s: float = 60.0
    timeout_s: float = 5.0


@dataclass(frozen=True, kw_only=True)
class StandaloneSection:
    reclaim_cpu_millicores: int = 0
    reclaim_memory_mb: int = 0
    qos_probe_url: str = ""


@dataclass(frozen=True, kw_only=True)
class YarnSection:
    rm: tuple[str, ...] = ()
    user: str = ""
    kerberos: bool = False
    timeout_s: float = 10.0
    retries: int = 2
    kill: str = "never"  # "never", "container" or "application" (needs rm)
    task_progress: bool = True
    jobhistory: str = ""  # JobHistory web address: finished attempts' final progress
    nodemanager_url: str = "http://127.0.0.1:8042"  # this node's NM web address
    millicores_per_vcore: int = 1000  # the CPU one YARN vcore stands for on this node


@dataclass(frozen=True, kw_only=True)
class DiscoverySection:
    source: str = "auto"  # "auto", "cgroup" or "process-tree"
    cgroup_version: str = "auto"  # "auto", "v1" or "v2"
    cgroup_root: str = "/sys/fs/cgroup"
    yarn_hierarchy: str = "hadoop-yarn"
    agent_hierarchy: str = "yarn-adapt"
    nodemanager_user: str = "yarn"
    nodemanager_pid_file: str = "/var/run/hadoop-yarn/hadoop-yarn-nodemanager.pid"
    nodemanager_pid: int = 0  # 0: read nodemanager_pid_file
    node_cpu_millicores: int = 0  # 0: this host's CPUs


@dataclass(frozen=True, kw_only=True)
class ClassifySection:
    batch_queues: tuple[str, ...] = ()
    latency_critical_queues: tuple[str, ...] = ()
    batch_tags: tuple[str, ...] = ()
    latency_critical_tags: tuple[str, ...] = ()
    batch_types: tuple[str, ...] = ("MAPREDUCE", "SPARK", "TEZ")
    latency_critical_types: tuple[str, ...] = ()
    unknown: str = "latency-critical"  # or "batch"
    squeeze_application_masters: bool = False


@dataclass(frozen=True, kw_only=True)
class ReclaimSection:
    strategy: str = "NTF"
    per_task_cpu_millicores: int = 1000
    per_task_memory_mb: int = 512
    step_cpu_millicores: int = 250
    step_memory_mb: int = 128
    floor_cpu_millicores: int = 100
    floor_memory_mb: int = 256
    grace_period_s: float = 60.0
    kill_cooldown_s: float = 30.0
    settle_s: float = 5.0
    seed: int = 0
    cpu_progress_ratio: float = 0.2
    min_busy_millicores: int = 50
    progress_stall_s: float = 120.0
    memory_hard_limit: bool = True
    memory_hard_headroom_mb: int = 128
    retry_after_s: float = 60.0


@dataclass(frozen=True, kw_only=True)
class PrioritySection:
    enabled: bool = True
    weight_fraction: float = 0.002  # YARN's 1024 per vcore -> 2 (its opportunistic weight)
    service_cpus: str = ""  # e.g. "0-1": batch's cpuset excludes them (cgroup v2)


@dataclass(frozen=True, kw_only=True)
class SuppressSection:
    enabled: bool = True
    target_utilisation: float = 0.65
    reserve_millicores: int = 0
    floor_millicores: int = 200
    max_increase_fraction: float = 0.10
    dead_band_fraction: float = 0.01
    cpus: str = ""  # the node's CPUs in /proc/stat (e.g. "0-3"); empty: all


@dataclass(frozen=True, kw_only=True)
class MemorySection:
    enabled: bool = True
    pressure_available_fraction: float = 0.10
    release_margin_fraction: float = 0.02
    service_cgroups: tuple[str, ...] = ()  # v2, relative to cgroup_root


@dataclass(frozen=True, kw_only=True)
class QosSection:
    model: str = "off"  # "off", "gbrt", "linear" or "elasticnet"
    samples_file: str = ""
    min_samples: int = 200
    retrain_every: int = 300
    epsilon: float = 0.05


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    agent: AgentSection = field(default_factory=AgentSection)
    service: ServiceSection = field(default_factory=ServiceSection)
    standalone: StandaloneSection = field(default_factory=StandaloneSection)
    yarn: YarnSection = field(default_factory=YarnSection)
    discovery: DiscoverySection = field(default_factory=DiscoverySection)
    classify: ClassifySection = field(default_factory=ClassifySection)
    reclaim: ReclaimSection = field(default_factory=ReclaimSection)
    priority: PrioritySection = field(default_factory=PrioritySection)
    suppress: SuppressSection = field(default_factory=SuppressSection)
    memory: MemorySection = field(default_factory=MemorySection)
    qos: QosSection = field(default_factory=QosSection)
    source: str = "<defaults>"

    @property
    def node_id(self) -> str:
        return self.agent.node_id or socket.getfqdn()

    def status_path(self) -> Path:
        """Where the running agent says what it does (``agent status`` reads it)."""
        if self.agent.status_file:
            return Path(self.agent.status_file)
        return Path(self.agent.state_file).with_name("status.json")

    def reclaim_settings(self) -> ReclaimSettings:
        r = self.reclaim
        return ReclaimSettings(
            strategy=Strategy.parse(r.strategy),
            per_task=Amount(r.per_task_cpu_millicores, r.per_task_memory_mb),
            mini_step=Amount(r.step_cpu_millicores, r.step_memory_mb),
            floor=Amount(r.floor_cpu_millicores, r.floor_memory_mb),
            grace_period_s=r.grace_period_s,
            kill_cooldown_s=r.kill_cooldown_s,
            kill_enabled=self.yarn.kill != "never",
            settle_s=r.settle_s,
            seed=r.seed,
            aliveness=AlivenessSettings(
                cpu_progress_ratio=r.cpu_progress_ratio,
                min_busy_millicores=r.min_busy_millicores,
                progress_stall_s=r.progress_stall_s,
            ),
        )

    def classify_settings(self) -> ClassifySettings:
        c = self.classify
        return ClassifySettings(
            batch_queues=frozenset(c.batch_queues),
            latency_critical_queues=frozenset(c.latency_critical_queues),
            batch_tags=frozenset(t.lower() for t in c.batch_tags),
            latency_critical_tags=frozenset(t.lower() for t in c.latency_critical_tags),
            batch_types=frozenset(t.lower() for t in c.batch_types),
            latency_critical_types=frozenset(t.lower() for t in c.latency_critical_types),
            unknown=TaskKind(c.unknown),
            squeeze_application_masters=c.squeeze_application_masters,
        )

    def nodemanager_identity(self) -> NodeManagerIdentity:
        d = self.discovery
        return NodeManagerIdentity(
            user=d.nodemanager_user, pid_file=d.nodemanager_pid_file, pid=d.nodemanager_pid
        )

    def isolation_settings(self) -> IsolationSettings:
        """``ValueError`` (one line) for a CPU list that does not parse."""
        p, s, m = self.priority, self.suppress, self.memory
        lce = self.discovery.source == "cgroup"
        return IsolationSettings(
            priority=PrioritySettings(
                enabled=p.enabled, weight_fraction=p.weight_fraction,
                service_cpus=parse_cpu_list(p.service_cpus),
            ),
            suppress=SuppressSettings(
                enabled=s.enabled, target_utilisation=s.target_utilisation,
                reserve_millicores=s.reserve_millicores, floor_millicores=s.floor_millicores,
                max_increase_fraction=s.max_increase_fraction,
                dead_band_fraction=s.dead_band_fraction, cpus=parse_cpu_list(s.cpus),
            ),
            memory=MemorySettings(
                enabled=m.enabled, pressure_available_fraction=m.pressure_available_fraction,
                release_margin_fraction=m.release_margin_fraction,
                service_cgroups=tuple(g.strip("/") for g in m.service_cgroups),
            ),
            eviction=EvictionRules(
                enabled=self.yarn.kill != "never", grace_period_s=self.reclaim.grace_period_s,
                cooldown_s=self.reclaim.kill_cooldown_s,
            ),
            agent_hierarchy=self.discovery.agent_hierarchy.strip("/"),
            per_container_only=lce,
            yarn_hierarchy=self.discovery.yarn_hierarchy.strip("/") if lce else "",
            memory_policy=self.memory_policy(),
        )  # fmt: skip

    def without_isolation(self) -> AgentSettings:
        """These settings with the isolation loop off (``agent restore`` isolates
        nothing, so nothing of it may stop a restore)."""
        return replace(
            self,
            priority=PrioritySection(enabled=False),
            suppress=SuppressSection(enabled=False),
            memory=MemorySection(enabled=False),
        )

    def memory_policy(self) -> MemoryPolicy:
        return MemoryPolicy(
            hard_limit=self.reclaim.memory_hard_limit,
            hard_headroom_mb=self.reclaim.memory_hard_headroom_mb,
        )

    def token(self) -> str:
        """The service token: ``$YARN_ADAPT_AGENT_TOKEN``, else ``[service] token_file``
        (which only the agent's user may read or write)."""
        token = os.environ.get(TOKEN_ENV, "")
        if not token and self.service.token_file:
            token = read_token_file(self.service.token_file, self.source)
        if not token:
            where = f"{TOKEN_ENV} or [service] token_file"
            raise SettingsError(f"{self.source}: mode = 'service' needs a token ({where})")
        return token


def read_token_file(path: str, source: str) -> str:
    """The token in ``path``; ``SettingsError`` (one line, with the fix) unless the file
    is owned by the agent's user and readable by no one else."""
    where = f"{source}: [service] token_file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise SettingsError(f"{where}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(f"{where}: not a regular file")
        if info.st_uid != os.geteuid():
            raise SettingsError(
                f"{where}: owned by uid {info.st_uid}, not the agent's user (uid "
                f"{os.geteuid()}); fix: chown {os.geteuid()} {path} && chmod 600 {path}"
            )
        if info.st_mode & 0o077:
            raise SettingsError(
                f"{where}: mode {info.st_mode & 0o777:o} lets others read or change the "
                f"token; fix: chmod 600 {path}"
            )
        return stream.read().decode(errors="replace").strip()


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_problem(url: str, key: str, *, https_off_host: bool) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{key} must be an http(s)://host[:port] address, got {url!r}"
    if https_off_host and parts.scheme != "https" and not is_loopback(parts.hostname):
        return (
            f"{key} {url!r} must use https: the agent's token would cross the network in "
            "clear (http is allowed for a loopback address only)"
        )
    return None


SECTIONS: dict[str, type] = {
    "agent": AgentSection,
    "service": ServiceSection,
    "standalone": StandaloneSection,
    "yarn": YarnSection,
    "discovery": DiscoverySection,
    "classify": ClassifySection,
    "reclaim": ReclaimSection,
    "priority": PrioritySection,
    "suppress": SuppressSection,
    "memory": MemorySection,
    "qos": QosSection,
}


def load_agent_settings(path: str | os.PathLike[str]) -> AgentSettings:
    toml = read_toml(path)
    return agent_settings_from_mapping(toml.raw, toml.source)


def agent_settings_from_mapping(
    raw: Mapping[str, Any], source: str = "<settings>"
) -> AgentSettings:
    sections = read_sections(raw, SECTIONS, source)
    settings = AgentSettings(**sections, source=source)  # type: ignore[arg-type]
    problems = list(_problems(settings))
    if problems:
        raise SettingsError(f"{source}: {problems[0]}")
    return settings


def _problems(settings: AgentSettings) -> Iterator[str]:
    a, d, r = settings.agent, settings.discovery, settings.reclaim
    y, q, c = settings.yarn, settings.qos, settings.classify
    if a.mode not in ("service", "standalone"):
        yield f"[agent] mode must be 'service' or 'standalone', got {a.mode!r}"
    if a.mode == "service" and not settings.service.url:
        yield "[service] url is required with mode = 'service'"
    if settings.service.url:
        problem = _url_problem(settings.service.url, "[service] url", https_off_host=True)
        if problem:
            yield problem
    if problem := _url_problem(y.nodemanager_url, "[yarn] nodemanager_url", https_off_host=False):
        yield problem
    if not d.nodemanager_user:
        yield "[discovery] nodemanager_user must name the user the NodeManager runs as"
    if d.nodemanager_pid < 0:
        yield f"[discovery] nodemanager_pid must be > 0 (0: the pid file), got {d.nodemanager_pid}"
    if not d.nodemanager_pid and not d.nodemanager_pid_file.startswith("/"):
        yield (
            "[discovery] nodemanager_pid_file must be an absolute path, got "
            f"{d.nodemanager_pid_file!r}"
        )
    if a.interval_s <= 0 or not 0 <= a.metrics_port <= 65535:
        yield "[agent] interval_s must be > 0 and metrics_port in 0..65535"
    if d.source not in ("auto", "cgroup", "process-tree"):
        yield f"[discovery] source must be auto, cgroup or process-tree, got {d.source!r}"
    if d.cgroup_version not in ("auto", "v1", "v2"):
        yield f"[discovery] cgroup_version must be auto, v1 or v2, got {d.cgroup_version!r}"
    if not d.agent_hierarchy.strip("/") or d.agent_hierarchy.strip("/") == d.yarn_hierarchy.strip(
        "/"
    ):
        yield "[discovery] agent_hierarchy must be set and differ from yarn_hierarchy"
    if y.millicores_per_vcore <= 0:
        yield f"[yarn] millicores_per_vcore must be > 0, got {y.millicores_per_vcore}"
    if y.kill not in ("container", "application", "never"):
        yield f"[yarn] kill must be container, application or never, got {y.kill!r}"
    if c.unknown not in ("batch", "latency-critical"):
        yield f"[classify] unknown must be 'batch' or 'latency-critical', got {c.unknown!r}"
    if q.model != "off" and q.model not in MODEL_KINDS:
        yield f"[qos] model must be off or one of {', '.join(MODEL_KINDS)}, got {q.model!r}"
    if q.model != "off" and not q.samples_file:
        yield "[qos] samples_file is required when a model is configured"
    if r.step_cpu_millicores > r.per_task_cpu_millicores or r.step_memory_mb > r.per_task_memory_mb:
        yield "[reclaim] a mini-step must not exceed the per-task amount"
    try:
        settings.reclaim_settings()
    except ValueError as error:
        yield f"[reclaim] {error}"
    yield from _isolation_problems(settings)


def _isolation_problems(settings: AgentSettings) -> Iterator[str]:
    cpu_lists = {}
    for key, text in (("[priority] service_cpus", settings.priority.service_cpus),
                      ("[suppress] cpus", settings.suppress.cpus)):  # fmt: skip
        try:
            cpu_lists[key] = parse_cpu_list(text)
        except ValueError as error:
            yield f"{key}: {error}"
    if len(cpu_lists) < 2:
        return
    isolation = settings.isolation_settings()
    for table, section in (("priority", isolation.priority), ("suppress", isolation.suppress),
                           ("memory", isolation.memory)):  # fmt: skip
        for problem in section.problems():
            yield f"[{table}] {problem}"
    services, node = isolation.priority.service_cpus, isolation.suppress.cpus
    if services and node and not services < node:
        yield "[priority] service_cpus must be some, not all, of [suppress] cpus"
    for relpath in settings.memory.service_cgroups:
        outside = relpath_problem(relpath.strip("/"))
        if outside:
            yield f"[memory] service_cgroups {relpath!r}: {outside}"
