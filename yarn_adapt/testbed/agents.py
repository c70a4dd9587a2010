"""The testbed's node agents: one ``yarn-adapt agent run`` per "node", reading the
guard's reclaim requests from the testbed's ``yarn-adapt serve``.

* :class:`NodeAgent` is the agent process of one NodeManager, as an operator runs it:
  ``yarn-adapt agent run --config agent.toml`` (the plan's settings file,
  ``conf/testbed/yarn-adapt-agent.toml``, with what differs per node set), its node's
  agent token (``yarn-adapt agent-token issue``) in ``YARN_ADAPT_AGENT_TOKEN``, its own
  state file, its Prometheus endpoint. It is given its NodeManager's pid and web
  address (it verifies the process and reads the containers it lists), finds those
  containers below it in the process tree (DefaultContainerExecutor), gives each
  batch container a cgroup of its own and squeezes it by Algorithm 2 when the
  service's guard asks (what batch uses on the node above what it may now see).
* :func:`stop_agents` sends SIGTERM and checks that every limit is back: the agent
  exited cleanly, its state file is gone, no container cgroup of the agents is left,
  and every process the agents had moved (per the state file read just before the
  stop) is back in the cgroups it came from.

The agents' cgroups are created directly in the testbed's ``cpu`` weight group (and
under the same name in ``cpuacct`` and ``memory``): a container alone in a cgroup of
default ``cpu.shares`` (1024) weighs what its one busy process weighed before, so
adopting a container changes nothing until the agent squeezes it. (A parent group
per node would weigh all its containers together as one process.)
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from preemption.cgroups.procfile import parse_membership
from yarn_adapt.minicluster.processes import ManagedProcess, launch, marked_env
from yarn_adapt.minicluster.redis_server import free_port
from yarn_adapt.testbed.product import load_example, settings_file, yarn_adapt_command
from yarn_adapt.testbed.yarncgroups import hierarchy_of

log = logging.getLogger(__name__)

CONTROLLERS = ("cpu", "cpuacct", "memory")
TOKEN_ENV = "YARN_ADAPT_AGENT_TOKEN"  # preemption.settings.TOKEN_ENV


# --------------------------------------------------------------------------- agents


@dataclass(frozen=True, kw_only=True)
class AgentPlan:
    """How the testbed runs its agents: the settings file it starts from (everything
    but what differs per node) and where their cgroups go."""

    example: Path  # conf/testbed/yarn-adapt-agent.toml, or an operator's own
    hierarchy: str  # the agents' cgroups, relative to each controller's mount
    # YARN's container cgroups (relative to the cpu mount), as the LCE would make them
    # (the testbed's YARN weights); None: containers found in the process tree
    yarn_hierarchy: str | None = None  # the parent of each node's hadoop-yarn-<index>

    @functools.cached_property
    def settle_s(self) -> float:
        """The agents' ``[reclaim] settle_s`` (how long a squeeze step settles)."""
        return float(load_example(self.example).get("reclaim", {}).get("settle_s", 5.0))


@dataclass(frozen=True)
class AgentCounts:
    """What an agent reports on its metrics endpoint."""

    reclaimed_millicores: float = 0.0
    desired_millicores: float = 0.0
    steps: float = 0.0
    released: float = 0.0
    tasks_squeezed: float = 0.0
    blacklisted: float = 0.0
    killed: float = 0.0
    request_errors: float = 0.0

    def plus(self, other: AgentCounts) -> AgentCounts:
        return AgentCounts(
            0.0,
            0.0,
            self.steps + other.steps,
            self.released + other.released,
            self.tasks_squeezed + other.tasks_squeezed,
            self.blacklisted + other.blacklisted,
            self.killed + other.killed,
            self.request_errors + other.request_errors,
        )


METRICS = {
    "yarn_adapt_agent_reclaimed_cpu_millicores": ("reclaimed_millicores", None),
    "yarn_adapt_agent_desired_cpu_millicores": ("desired_millicores", None),
    "yarn_adapt_agent_tasks_squeezed_total": ("tasks_squeezed", None),
    "yarn_adapt_agent_events_total": ("events", "kind"),
    "yarn_adapt_agent_request_errors_total": ("request_errors", None),
}


def parse_counts(text: str) -> AgentCounts:
    """The agent's Prometheus exposition -> :class:`AgentCounts`."""
    values: dict[str, float] = {"request_errors": 0.0}
    events: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, number = line.rpartition(" ")
        name, _, labels = name_part.partition("{")
        if name == "yarn_adapt_agent_events_total":
            kind = labels.split('kind="', 1)[1].split('"', 1)[0] if 'kind="' in labels else ""
            events[kind] = float(number)
        elif name == "yarn_adapt_agent_request_errors_total":
            values["request_errors"] += float(number)
        elif name in METRICS:
            values[METRICS[name][0]] = float(number)
    return AgentCounts(
        reclaimed_millicores=values.get("reclaimed_millicores", 0.0),
        desired_millicores=values.get("desired_millicores", 0.0),
        steps=events.get("step", 0.0),
        released=events.get("released", 0.0),
        tasks_squeezed=values.get("tasks_squeezed", 0.0),
        blacklisted=events.get("blacklisted", 0.0),
        killed=events.get("killed", 0.0),
        request_errors=values["request_errors"],
    )


class NodeAgent:
    """The agent process of one testbed node."""

    def __init__(
        self,
        *,
        index: int,
        node_id: str,
        nodemanager_pid: int,
        nodemanager_url: str,
        rm_url: str,
        service_url: str,
        token: str,
        plan: AgentPlan,
        work_dir: Path,
        cluster_root: Path,
        package_parent: str,
    ) -> None:
        self.index = index
        self.node_id = node_id
        self.plan = plan
        self.directory = work_dir / f"agent-{index}"
        self.state_file = self.directory / "state.json"
        self.config = self.directory / "agent.toml"
        self.metrics_port = 0
        self._nodemanager_pid = nodemanager_pid
        self._nodemanager_url = nodemanager_url
        self._rm_url = rm_url
        self._service_url = service_url
        self._token = token
        self._cluster_root = cluster_root
        self._package_parent = package_parent
        self.process: ManagedProcess | None = None
        self.last_counts = AgentCounts()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.metrics_port = free_port()
        settings_file(self.plan.example, self.overrides(), self.config)
        command = yarn_adapt_command("agent", "run", "--config", str(self.config))
        env = marked_env(
            self._cluster_root, {"PYTHONPATH": self._package_parent, TOKEN_ENV: self._token}
        )
        self.process = launch(f"agent-{self.index}", command, self.directory / "agent.log",
                              env, cwd=self.directory)  # fmt: skip

    def overrides(self) -> dict[str, dict[str, Any]]:
        """What differs per node from the plan's settings file."""
        return {
            "agent": {"node_id": self.node_id, "state_file": str(self.state_file),
                      "metrics_port": self.metrics_port},
            "service": {"url": self._service_url},
            "yarn": {"rm": [self._rm_url], "nodemanager_url": self._nodemanager_url},
            "discovery": {"nodemanager_pid": self._nodemanager_pid,
                          "nodemanager_user": pwd.getpwuid(os.geteuid()).pw_name,
                          "agent_hierarchy": self.plan.hierarchy, **self._source()},
        }  # fmt: skip

    def _source(self) -> dict[str, str]:
        if self.plan.yarn_hierarchy is None:
            return {"source": "process-tree"}
        yarn = f"{self.plan.yarn_hierarchy}/{hierarchy_of(self.index)}"
        return {"source": "cgroup", "yarn_hierarchy": yarn}

    def ready(self) -> bool:
        """Its metrics endpoint answers (it has built itself and ticks)."""
        return self.counts() is not None

    def counts(self) -> AgentCounts | None:
        if not self.running:
            return None
        try:
            reply = requests.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2)
        except requests.RequestException:
            return None
        if reply.status_code != 200:
            return None
        self.last_counts = parse_counts(reply.text)
        return self.last_counts

    def problems(self, lines: int = 5) -> list[str]:
        """The last warnings and errors in its log (why a stop failed)."""
        try:
            text = (self.directory / "agent.log").read_text(errors="replace")
        except OSError as error:
            return [f"agent-{self.index}: log unreadable: {error}"]
        said = [line for line in text.splitlines() if _is_problem(line)]
        return [f"agent-{self.index}: {line}" for line in said[-lines:]]

    def moved(self) -> dict[int, dict[str, str]]:
        """pid -> the cgroups it came from, per the agent's state file now."""
        try:
            content = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return {int(m["pid"]): dict(m["from"]) for m in content.get("moved", [])}

    def changed_limits(self, mounts: Mapping[str, Path]) -> dict[Path, str]:
        """cgroup file -> its original value, for each the agent has changed and that
        differs now (per its state file)."""
        try:
            content = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        changed = {}
        for entry in content.get("originals", []):
            controller = str(entry["key"]).split(".", 1)[0]
            if controller not in mounts:
                continue
            path = mounts[controller] / str(entry["group"]) / str(entry["key"])
            try:
                now = path.read_text().strip()
            except OSError:
                continue
            if now != str(entry["value"]).strip():
                changed[path] = str(entry["value"]).strip()
        return changed

    def terminate(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (the agent restores everything, then exits); its exit code."""
        if self.process is None:
            return None
        process, self.process = self.process, None
        with contextlib.suppress(ProcessLookupError):
            process.popen.send_signal(signal.SIGTERM)
        try:
            return process.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("agent-%d did not stop within %.0f s: killed", self.index, timeout_s)
            process.kill_group()
            return None


# --------------------------------------------------------------------------- stop, verify


@dataclass
class RestoreCheck:
    """What a stop of the agents left behind (everything zero or equal: all restored)."""

    exit_codes: list[int | None] = field(default_factory=list)
    state_files_left: list[str] = field(default_factory=list)
    groups_left: list[str] = field(default_factory=list)
    pids_moved: int = 0  # in the state files just before the stop
    pids_checked: int = 0  # of those, still running after it
    pids_back: int = 0
    misplaced: list[str] = field(default_factory=list)
    # cgroup files the agents had changed (YARN's container cgroups: the LCE's, or the
    # testbed's YARN weights) just before the stop, of those still there after it, and
    # of those back at the value they had
    limits_changed: int = 0
    limits_checked: int = 0
    limits_back: int = 0
    agent_errors: list[str] = field(default_factory=list)  # what a failing agent said

    @property
    def complete(self) -> bool:
        return (
            all(code == 0 for code in self.exit_codes)
            and not self.state_files_left
            and not self.groups_left
            and self.pids_back == self.pids_checked
            and self.limits_back == self.limits_checked
        )

    @property
    def caught_squeezed(self) -> bool:
        """The stop found squeezed batch still running: a moved process or a changed
        limit that was still there to be put back."""
        return (self.pids_moved > 0 and self.pids_checked > 0) or self.limits_checked > 0

    def to_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "exit_codes": self.exit_codes,
            "state_files_left": len(self.state_files_left),
            "groups_left": len(self.groups_left),
            "pids_moved": self.pids_moved,
            "pids_checked": self.pids_checked,
            "pids_back": self.pids_back,
            "limits_changed": self.limits_changed,
            "limits_checked": self.limits_checked,
            "limits_back": self.limits_back,
            "agent_errors": self.agent_errors,
        }


def stop_agents(agents: Sequence[NodeAgent], mounts: Mapping[str, Path]) -> RestoreCheck:
    """SIGTERM every running agent and check that all it changed is back."""
    check = RestoreCheck()
    running = [agent for agent in agents if agent.running]
    for agent in running:
        agent.counts()  # the last figures before it goes
    for agent in running:
        limits = agent.changed_limits(mounts)  # per the state file just before the stop
        moved = agent.moved()
        # The agent's processes, named by pid and start time (a container's process that
        # ended may have left its pid to another): those in one of its groups now, and
        # those it already moved back (at their origin now).
        held = {
            pid: _start_ticks(pid)
            for pid, origin in moved.items()
            if _in_agent_group(pid, agent) or _at(pid, origin)
        }
        check.pids_moved += len(moved)
        check.limits_changed += len(limits)
        check.exit_codes.append(agent.terminate())
        _check_limits(check, limits)
        for pid, origin in sorted(moved.items()):  # checked at once: containers are short
            now = _membership(pid)
            if now is None or pid not in held or _start_ticks(pid) != held[pid]:
                continue  # ended before or meanwhile (its pid may be another's now)
            check.pids_checked += 1
            if all(now.get(c, "") == origin.get(c, "") for c in CONTROLLERS if c in origin):
                check.pids_back += 1
            else:
                check.misplaced.append(f"{pid}: {now} (came from {origin})")
    for agent, code in zip(running, check.exit_codes, strict=True):
        if code != 0:
            check.agent_errors += agent.problems()
    for agent in running:
        if agent.state_file.exists():
            check.state_files_left.append(str(agent.state_file))
    if running:
        check.groups_left = agent_groups(mounts, running[0].plan.hierarchy)
    if not check.complete:
        log.warning("agents' restore incomplete: %s %s", check.to_json(), check.misplaced[:3])
    return check


def _check_limits(check: RestoreCheck, limits: Mapping[Path, str]) -> None:
    """Every changed cgroup file still there is back at its original value."""
    for path, original in sorted(limits.items()):
        try:
            now = path.read_text().strip()
        except OSError:
            continue  # the container ended and its cgroup went
        check.limits_checked += 1
        if now == original:
            check.limits_back += 1
        else:
            check.misplaced.append(f"{path}: {now} (was {original})")


def _is_problem(line: str) -> bool:
    return " WARNING " in line or " ERROR " in line or line.startswith("yarn-adapt agent:")


def agent_groups(mounts: Mapping[str, Path], hierarchy: str) -> list[str]:
    """The container cgroups below the agents' hierarchy, in every controller."""
    found = []
    for controller in CONTROLLERS:
        parent = mounts[controller] / hierarchy
        if parent.is_dir():
            found += [str(p) for p in parent.iterdir() if p.name.startswith("container_")]
    return found


def _at(pid: int, origin: Mapping[str, str]) -> bool:
    membership = _membership(pid)
    return membership is not None and all(
        membership.get(c, "") == origin.get(c, "") for c in CONTROLLERS if c in origin
    )


def squeezed_now(agent: NodeAgent, mounts: Mapping[str, Path]) -> int:
    """How many processes the agent moved are in one of its cgroups now, and how many
    container cgroup files it has changed."""
    moved = sum(1 for pid in agent.moved() if _in_agent_group(pid, agent))
    return moved + len(agent.changed_limits(mounts))


def _in_agent_group(pid: int, agent: NodeAgent) -> bool:
    membership = _membership(pid) or {}
    prefix = agent.plan.hierarchy.strip("/") + "/"
    return any(path.strip("/").startswith(prefix) for path in membership.values())


def _start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22):
    with the pid, it names one process even when pids are reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after the command, which may hold spaces
    return int(fields[19])  # field 22 overall; the state is field 3, fields[0] here


def _membership(pid: int) -> dict[str, str] | None:
    try:
        return parse_membership(Path(f"/proc/{pid}/cgroup").read_text(), CONTROLLERS)
    except OSError:
        return None


def remove_hierarchy(mounts: Mapping[str, Path], hierarchy: str, keep: Path | None) -> None:
    """The agents' parent directories the agents created (not ``keep``, the weight
    group, which the cluster removes); only when empty."""
    for controller in CONTROLLERS:
        parent = mounts[controller] / hierarchy
        if keep is not None and parent == keep:
            continue
        with contextlib.suppress(OSError):
            parent.rmdir()


def wait_until(predicate: Any, timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())


class Steady:
    """Whether what is watched (the nodes' totals) has not changed for ``still_s``."""

    def __init__(self, still_s: float) -> None:
        self.still_s = still_s
        self._last: object = None
        self._since = time.monotonic()

    def done(self, seen: object) -> bool:
        now = time.monotonic()
        if seen != self._last:
            self._last, self._since = seen, now
        return now - self._since >= self.still_s


class SqueezeProgress:
    """Whether an agent's squeeze has run its course: it reclaimed something, and
    either reached what its target asks or reclaimed no more for ``still_s``."""

    def __init__(self, still_s: float) -> None:
        self.still_s = still_s
        self._last = -1.0
        self._since = time.monotonic()

    def done(self, counts: AgentCounts | None) -> bool:
        if counts is None or counts.reclaimed_millicores <= 0:
            return False
        now = time.monotonic()
        if counts.reclaimed_millicores != self._last:
            self._last, self._since = counts.reclaimed_millicores, now
        if counts.reclaimed_millicores >= counts.desired_millicores:
            return True
        return now - self._since >= self.still_s
