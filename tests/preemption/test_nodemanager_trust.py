"""The agent trusts only the NodeManager: real processes, real cgroup v1 (root).

An unprivileged process (run as ``nobody``) that calls itself the NodeManager, with a
child claiming another application's container and pointing NM_HOST elsewhere, must
change nothing: no cgroup made, nothing moved, no kill asked, no request sent. So
must a root process that merely has the NodeManager's class somewhere in its command
line. And below the real NodeManager, a container it does not list is never moved
or killed. (The real NodeManager is verified in test_agent_yarn.py, on the live mini
YARN.)
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from preemption.agent import Agent, AgentParts, ListedOnly, target_source
from preemption.cgroups import Cgroup, V1Backend
from preemption.cgroups.procfile import cgroup_membership
from preemption.errors import KillFailed
from preemption.metrics import AgentMetrics
from preemption.nodemanager import NODEMANAGER_CLASS, NodeManagerView, java_main_class
from preemption.settings import AgentSettings, agent_settings_from_mapping
from preemption.statefile import StateJournal
from preemption.yarnedge import YarnEdge
from yarn_adapt.yarn.http import HttpSettings

from .conftest import BURNER, Replay, container_id, place, unavailable
from .factories import ListedBy, nm_answer
from .test_cgroup_v1 import LAUNCHER, launch_script, started

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
OTHER_APP = "container_1700000000000_0099_01_000002"  # another tenant's container
NOBODY = 65534
SYSTEM_PYTHON = Path("/usr/bin/python3")  # one that nobody may run (the venv is root's)
CONTROLLERS = ("cpu", "cpuacct", "memory")

# The impostor: it names the NodeManager's class, and its child claims OTHER_APP (in
# its environment and command line) and points NM_HOST/NM_HTTP_PORT at a trap.
IMPOSTOR = """
import subprocess, sys, time
claimed, trap_port = sys.argv[1], sys.argv[2]
env = {"CONTAINER_ID": claimed, "NM_HOST": "127.0.0.1", "NM_HTTP_PORT": trap_port}
child = subprocess.Popen(
    [sys.executable, "-I", "-S", "-c", "import time; time.sleep(600)",
     f"/nm-local/usercache/x/appcache/a/{claimed}/default_container_executor.sh"],
    env=env,
)
print(child.pid, flush=True)
time.sleep(600)
"""


@dataclass
class RecordingKiller:
    asked: list[str] = field(default_factory=list)

    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        self.asked.append(container_id)


@dataclass
class Impostor:
    process: subprocess.Popen[str]
    child: int


@pytest.fixture
def impostor_as(
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
) -> Iterator[Callable[[list[str]], tuple[Impostor, Replay]]]:
    """Start the impostor under a command prefix (``setpriv`` to run it as nobody);
    its child's NM_HOST points at a trap server that counts requests."""
    started_here: list[Impostor] = []

    def start(prefix: list[str]) -> tuple[Impostor, Replay]:
        trap_url, trap = serve({})
        command = [*prefix, "-I", "-S", "-c", IMPOSTOR, OTHER_APP, trap_url.rsplit(":", 1)[1],
                   "-Dproc_nodemanager", NODEMANAGER_CLASS]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        impostor = Impostor(process, int(process.stdout.readline()))
        started_here.append(impostor)
        return impostor, trap

    yield start
    for impostor in started_here:
        os.kill(impostor.child, signal.SIGKILL)
        impostor.process.kill()
        impostor.process.wait()
        assert impostor.process.stdout is not None
        impostor.process.stdout.close()


def as_nobody() -> list[str]:
    if not SYSTEM_PYTHON.exists() or shutil.which("setpriv") is None or os.geteuid() != 0:
        unavailable("needs root, setpriv and /usr/bin/python3 to run a process as nobody")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", str(SYSTEM_PYTHON)]


def settings_naming(
    hierarchy: str, state: Path, nm_url: str | None = None, **discovery: object
) -> AgentSettings:
    """Process-tree discovery, kills on at once, everything found is batch: if the
    impostor were believed, its child would be adopted, squeezed and killed."""
    yarn: dict[str, object] = {"kill": "container"}
    if nm_url is not None:
        yarn["nodemanager_url"] = nm_url
    return agent_settings_from_mapping(
        {
            "agent": {"state_file": str(state), "interval_s": 0.1},
            "standalone": {"reclaim_cpu_millicores": 4000},
            "yarn": yarn,
            "discovery": {
                "source": "process-tree",
                "yarn_hierarchy": hierarchy,
                "agent_hierarchy": f"{hierarchy}/agent-owned",
                "node_cpu_millicores": 4000,
                **discovery,
            },
            "classify": {"unknown": "batch"},
            "reclaim": {
                "per_task_cpu_millicores": 1000,
                "step_cpu_millicores": 1000,
                "floor_cpu_millicores": 100,
                "grace_period_s": 0.0,
                "kill_cooldown_s": 0.0,
                "settle_s": 0.0,
            },
        },
        "test",
    )


def run_real_agent(settings: AgentSettings, v1: V1Backend, ticks: int) -> tuple[Agent, list[str]]:
    """The agent with its real NodeManager check; the kills it asks for."""
    killer = RecordingKiller()
    backend = V1Backend(v1.mounts, memory=settings.memory_policy())
    parts = AgentParts(
        backend=backend,
        journal=StateJournal.open(Path(settings.agent.state_file), backend.describe()),
        target=target_source(settings),
        killer=killer,
        metrics=AgentMetrics(),
    )
    agent = Agent(settings, parts)
    for _ in range(ticks):
        agent.tick()
        time.sleep(0.1)
    return agent, killer.asked


def default_refusal() -> str:
    """What the defaults meet on this host: no user yarn, or no pid file of its NM."""
    try:
        pwd.getpwnam("yarn")
    except KeyError:
        return "no such user 'yarn'"
    return "/var/run/hadoop-yarn/hadoop-yarn-nodemanager.pid"


def pid_file(tmp_path: Path, pid: int, *, owner: int, mode: int) -> Path:
    path = tmp_path / "hadoop-yarn-nodemanager.pid"
    path.write_text(f"{pid}\n")
    os.chown(path, owner, owner)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("naming", "refusal"),
    [
        ("pid", f"runs as uid {NOBODY}/{NOBODY}/{NOBODY}/{NOBODY}, not root (uid 0)"),
        ("pid file", f"owned by uid {NOBODY}, not root or the NodeManager user"),
        ("defaults", default_refusal()),
    ],
)  # fmt: skip
def test_an_unprivileged_impostor_of_the_nodemanager_changes_nothing(
    naming: str,
    refusal: str,
    v1: V1Backend,
    hierarchy: str,
    impostor_as: Callable[[list[str]], tuple[Impostor, Replay]],
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    impostor, trap = impostor_as(as_nobody())
    # Even the NodeManager's own address lists the claimed container as running.
    nm_url, nm = serve({"/ws/v1/node/containers": json.dumps(nm_answer([OTHER_APP]))})
    named: dict[str, object] = {
        "pid": {"nodemanager_pid": impostor.process.pid, "nodemanager_user": "root"},
        "pid file": {
            "nodemanager_user": "root",
            "nodemanager_pid_file": str(
                pid_file(tmp_path, impostor.process.pid, owner=NOBODY, mode=0o644)
            ),
        },
        "defaults": {},
    }[naming]
    before = cgroup_membership(Path("/proc"), impostor.child, CONTROLLERS)
    caplog.set_level(logging.INFO, logger="preemption")
    settings = settings_naming(hierarchy, tmp_path / "state.json", nm_url, **named)
    agent, killed = run_real_agent(settings, v1, ticks=6)
    agent.shutdown()

    assert killed == []
    assert cgroup_membership(Path("/proc"), impostor.child, CONTROLLERS) == before
    assert not (v1.mounts["cpu"] / hierarchy / "agent-owned").exists()  # no cgroup made
    assert not (tmp_path / "state.json").exists()
    assert trap.asked == [] and nm.asked == []  # NM_HOST never used; the NM not even asked
    assert agent.metrics.value("yarn_adapt_agent_untrusted_intervals_total") == 6
    said = [r.getMessage() for r in caplog.records if "not trusting" in r.getMessage()]
    assert len(said) == 1, said  # once, not every interval
    assert refusal in said[0] and "\n" not in said[0]


def test_a_root_process_with_the_nodemanagers_class_in_its_arguments_is_not_it(
    v1: V1Backend,
    hierarchy: str,
    impostor_as: Callable[[list[str]], tuple[Impostor, Replay]],
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Root's own process, even called "java": its main class is not the NodeManager's
    # (the class only appears among its arguments).
    impostor, _ = impostor_as(["bash", "-c", 'exec -a java "$0" "$@"', str(SYSTEM_PYTHON)])
    nm_url, nm = serve({"/ws/v1/node/containers": json.dumps(nm_answer([OTHER_APP]))})
    own_pid_file = pid_file(tmp_path, impostor.process.pid, owner=0, mode=0o644)
    settings = settings_naming(
        hierarchy, tmp_path / "state.json", nm_url,
        nodemanager_user="root", nodemanager_pid_file=str(own_pid_file),
    )  # fmt: skip
    caplog.set_level(logging.INFO, logger="preemption")
    agent, killed = run_real_agent(settings, v1, ticks=3)
    agent.shutdown()
    assert killed == [] and nm.asked == []
    assert not (v1.mounts["cpu"] / hierarchy / "agent-owned").exists()
    [said] = [r.getMessage() for r in caplog.records if "not trusting" in r.getMessage()]
    assert f"not {NODEMANAGER_CLASS}" in said and "main class" in said


@pytest.mark.parametrize(
    ("argv", "main_class"),
    [
        # The mini cluster's NodeManager (yarn_adapt.minicluster.javacmd), abridged.
        (["/usr/lib/jvm/java-17/bin/java", "-Xmx384m", "-XX:+UseSerialGC",
          "--add-opens=java.base/java.lang=ALL-UNNAMED", "-Dproc_nodemanager",
          "-Dyarn.adapt.nm.dir=/tmp/nm0", "-cp", "/conf:/jars/*", NODEMANAGER_CLASS],
         NODEMANAGER_CLASS),
        (["java", "--add-opens", "java.base/java.lang=ALL-UNNAMED", "-classpath",
          NODEMANAGER_CLASS, "org.example.Other", NODEMANAGER_CLASS], "org.example.Other"),
        (["java", f"-Dx={NODEMANAGER_CLASS}", "Main"], "Main"),
        (["java", "-jar", "tool.jar", NODEMANAGER_CLASS], None),
        (["java", "-m", f"mod/{NODEMANAGER_CLASS}"], None),
        (["java", "@/tmp/args", NODEMANAGER_CLASS], None),
        (["python3", "-c", "pass", NODEMANAGER_CLASS], None),
        ([], None),
    ],
)  # fmt: skip
def test_the_main_class_is_the_java_launchers_own_argument(
    argv: list[str], main_class: str | None
) -> None:
    assert java_main_class(argv) == main_class


@pytest.mark.parametrize(
    ("owner", "mode", "problem"),
    [
        (NOBODY, 0o644, f"owned by uid {NOBODY}"),
        (0, 0o664, "writable by group or others (mode 664)"),
        (0, 0o646, "writable by group or others (mode 646)"),
    ],
)
def test_a_pid_file_anyone_else_could_write_names_no_nodemanager(
    owner: int, mode: int, problem: str, tmp_path: Path, v1: V1Backend, hierarchy: str
) -> None:
    path = pid_file(tmp_path, os.getpid(), owner=owner, mode=mode)
    settings = settings_naming(
        hierarchy, tmp_path / "state.json", "http://127.0.0.1:9",
        nodemanager_user="root", nodemanager_pid_file=str(path),
    )  # fmt: skip
    agent, _ = run_real_agent(settings, v1, ticks=0)
    view = agent.observe()
    assert view.containers == () and view.problem is not None
    assert problem in view.problem


# ----------------------------------------------------------------- below the real NM


def test_a_container_the_nodemanager_does_not_list_is_never_moved_or_killed(
    v1: V1Backend,
    hierarchy: str,
    processes: Callable[..., subprocess.Popen[str]],
    serve: Callable[[dict[str, str]], tuple[str, Replay]],
    tmp_path: Path,
) -> None:
    # Two containers launched below the NodeManager (this test process stands for it;
    # what it lists is the recorded answer); it lists only the first. Both launchers'
    # environments point NM_HOST/NM_HTTP_PORT at a trap; the RM (recorded) is asked
    # about the applications, and kills are on.
    trap_url, trap = serve({})
    rm_url, _ = serve({"/ws/v1/cluster/info": (FIXTURES / "rm" / "capacity-info.json").read_text()})
    lying = {"NM_HOST": "127.0.0.1", "NM_HTTP_PORT": trap_url.rsplit(":", 1)[1]}
    listed, unlisted = container_id(31), container_id(32)
    started(processes(LAUNCHER, launch_script(listed), env=lying))
    hidden = started(processes(LAUNCHER, launch_script(unlisted), env=lying))
    hidden_pids = [hidden.pid, *children_of(hidden.pid)]
    before = {pid: cgroup_membership(Path("/proc"), pid, CONTROLLERS) for pid in hidden_pids}
    settings = settings_naming(hierarchy, tmp_path / "state.json")
    killer = RecordingKiller()
    backend = V1Backend(v1.mounts)
    yarn = YarnEdge([rm_url], HttpSettings(connect_timeout_s=2.0, read_timeout_s=5.0, retries=0))
    parts = AgentParts(
        backend=backend,
        journal=StateJournal.open(tmp_path / "state.json", backend.describe()),
        target=target_source(settings), yarn=yarn, killer=killer, metrics=AgentMetrics(),
        nodemanager=ListedBy(os.getpid(), [listed]),
    )  # fmt: skip
    agent = Agent(settings, parts)
    try:
        for _ in range(8):
            agent.tick()
            time.sleep(0.2)
        assert v1.exists(agent.adopter.group_for(listed))  # the listed one: adopted, ...
        assert killer.asked == [listed]  # ... squeezed, and (kills on) killed
        assert not v1.exists(agent.adopter.group_for(unlisted))
        after = {pid: cgroup_membership(Path("/proc"), pid, CONTROLLERS) for pid in hidden_pids}
        assert after == before
        assert trap.asked == []  # no request went where a container's environment said
    finally:
        agent.shutdown()
        yarn.close()


def children_of(pid: int) -> list[int]:
    from preemption.procfs import ProcFs

    return [child for child, info in ProcFs().processes().items() if info.ppid == pid]


def test_a_kill_of_a_container_the_nodemanager_does_not_list_is_refused() -> None:
    killer = RecordingKiller()
    guard = ListedOnly(killer)
    guard.listed = frozenset({container_id(1)})
    guard.kill(container_id(1), "application_1700000000000_0042", "test")
    with pytest.raises(KillFailed, match="does not list it as running"):
        guard.kill(container_id(2), "application_1700000000000_0042", "test")
    assert killer.asked == [container_id(1)]


def test_while_the_nodemanager_cannot_be_verified_nothing_is_written_or_restored(
    v1: V1Backend,
    hierarchy: str,
    processes: Callable[..., subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    burner = started(processes(BURNER))
    group = Cgroup(f"{hierarchy}/{container_id(33)}")
    place(v1, group, burner.pid)
    settings = agent_settings_from_mapping(
        {"agent": {"state_file": str(tmp_path / "state.json")},
         "standalone": {"reclaim_cpu_millicores": 400},
         "discovery": {"source": "cgroup", "yarn_hierarchy": hierarchy,
                       "node_cpu_millicores": 2000},
         "classify": {"unknown": "batch"},
         "reclaim": {"step_cpu_millicores": 200, "settle_s": 0.0}},
        "test",
    )  # fmt: skip
    nodemanager = ListedBy(os.getpid(), [container_id(33)])
    backend = V1Backend(v1.mounts)
    parts = AgentParts(
        backend=backend,
        journal=StateJournal.open(tmp_path / "state.json", backend.describe()),
        target=target_source(settings), nodemanager=nodemanager, metrics=AgentMetrics(),
    )  # fmt: skip
    agent = Agent(settings, parts)
    agent.tick()
    agent.tick()
    squeezed = v1.read(group, "cpu.cfs_quota_us")
    assert squeezed != "-1"
    agent.nodemanager = UnverifiedNodeManager()
    report = agent.tick()
    assert report.decision.status.mode == "untrusted" and report.decision.actions == ()
    assert v1.read(group, "cpu.cfs_quota_us") == squeezed  # held: neither squeezed nor freed
    agent.nodemanager = nodemanager
    agent.tick()
    agent.shutdown()
    assert v1.read(group, "cpu.cfs_quota_us") == "-1"


class UnverifiedNodeManager:
    """The NodeManager's check failing (it restarted, its pid file is gone...)."""

    def observe(self) -> NodeManagerView:
        return NodeManagerView(None, problem="not trusting the NodeManager: test")
