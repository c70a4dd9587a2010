"""Finding containers among real processes (only below the NodeManager, only the ones
it lists), container ids, classification."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from preemption.classify import AppFacts, ClassifySettings, classify
from preemption.discovery import containers_in_tree
from preemption.model import Amount, ContainerRef, TaskKind, is_container_id
from preemption.procfs import ProcFs, parse_stat
from preemption.yarnedge import attempt_of_container, attempt_progress, parse_nm_containers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "preemption"
JHS = Path(__file__).resolve().parents[1] / "fixtures" / "jhs"
CID_A = "container_e17_1700000000000_0042_01_000002"
CID_B = "container_1700000000000_0042_01_000003"
CID_C = "container_1700000000000_0042_01_000004"  # launched, but not listed by the NM
OTHER_APP = "container_1700000000000_0099_01_000002"  # another application's

LAUNCHER = """
import os, subprocess, sys, time
claim = os.environ.pop("CLAIM")
lying = {**os.environ, "CONTAINER_ID": claim, "NM_HOST": "203.0.113.9", "NM_HTTP_PORT": "9"}
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)", f"/tmp/{claim}/x.sh"], env=lying
)
print(child.pid, flush=True)
time.sleep(600)
"""


@dataclass
class Launched:
    """Launch processes under this test process (it stands for the NodeManager)."""

    by_cwd: subprocess.Popen[str]  # names CID_A by its working directory only
    by_argv: subprocess.Popen[str]  # names CID_B in its command line
    unlisted: subprocess.Popen[str]  # names CID_C, which the NM does not list
    children: dict[int, int]  # launcher pid -> its child's pid


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[Launched]:
    """Three "containers" started by this process, as the DefaultContainerExecutor
    starts them: each launch process names its container, in its working directory
    (``by_cwd``) or its command line (``by_argv``, ``unlisted``). Every launcher's
    child claims another application's container in its environment and command line
    and points NM_HOST elsewhere, as any tenant could."""
    work = tmp_path / CID_A
    work.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "CONTAINER_ID"}, "CLAIM": OTHER_APP}
    launchers = [
        subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE,
                         text=True, cwd=work, env=env),
        subprocess.Popen([sys.executable, "-c", LAUNCHER,
                          f"/local/appcache/{CID_B}/default_container_executor.sh"],
                         stdout=subprocess.PIPE, text=True, env=env),
        subprocess.Popen([sys.executable, "-c", LAUNCHER,
                          f"/local/appcache/{CID_C}/default_container_executor.sh"],
                         stdout=subprocess.PIPE, text=True, env=env),
    ]  # fmt: skip
    children = {}
    for launcher in launchers:
        assert launcher.stdout is not None
        children[launcher.pid] = int(launcher.stdout.readline())
    yield Launched(*launchers, children=children)
    for launcher in launchers:
        os.kill(children[launcher.pid], signal.SIGKILL)
        launcher.kill()
        launcher.wait()
        assert launcher.stdout is not None
        launcher.stdout.close()


def test_containers_are_found_below_the_nodemanager_by_their_launch_process_only(
    launched: Launched,
) -> None:
    listed = {CID_A, CID_B, OTHER_APP}
    found = {c.container_id: c for c in containers_in_tree(os.getpid(), ProcFs(), listed)}
    # The launch process names the container (cwd or command line); its child belongs
    # to it whatever its own environment and command line claim.
    assert set(found) == {CID_A, CID_B}
    for container, launcher in ((CID_A, launched.by_cwd), (CID_B, launched.by_argv)):
        assert set(found[container].pids) == {launcher.pid, launched.children[launcher.pid]}
    assert found[CID_A].running and found[CID_B].running
    assert abs(found[CID_A].started_at_s - time.time()) < 120
    # Not listed by the NodeManager: never found, though launched below it.
    assert all(launched.unlisted.pid not in c.pids for c in found.values())


def test_a_process_that_is_not_below_the_nodemanager_belongs_to_no_container(
    launched: Launched,
) -> None:
    # The launchers' children claim OTHER_APP; seen from their own parents (as if each
    # were the NodeManager) they are launch processes naming it, so the claim counts
    # only for a child of the NodeManager itself.
    listed = {OTHER_APP}
    assert containers_in_tree(os.getpid(), ProcFs(), listed) == []
    as_if = containers_in_tree(launched.by_argv.pid, ProcFs(), listed)
    assert [c.pids for c in as_if] == [(launched.children[launched.by_argv.pid],)]


def test_a_container_whose_working_process_is_stopped_is_not_running(
    launched: Launched,
) -> None:
    child_of_b = launched.children[launched.by_argv.pid]
    os.kill(child_of_b, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while True:
            listed = {CID_A, CID_B}
            found = {c.container_id: c for c in containers_in_tree(os.getpid(), ProcFs(), listed)}
            if not found[CID_B].running or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not found[CID_B].running  # its launcher only waits: the leaf is stopped
        assert not found[CID_B].exiting  # stopped is not ended: the agent judges it
        assert found[CID_A].running
    finally:
        os.kill(child_of_b, signal.SIGCONT)


def test_a_container_whose_working_process_exited_unreaped_is_exiting(
    launched: Launched,
) -> None:
    """Its work ended; until the launcher reaps the zombie it is not running, and not
    faltering either (CI r22: a container that finished its work was blacklisted)."""
    child_of_b = launched.children[launched.by_argv.pid]
    os.kill(child_of_b, signal.SIGKILL)  # the launcher sleeps: never reaps it
    deadline = time.monotonic() + 5
    while True:
        found = {
            c.container_id: c for c in containers_in_tree(os.getpid(), ProcFs(), {CID_A, CID_B})
        }
        if found[CID_B].exiting or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not found[CID_B].running and found[CID_B].exiting
    assert found[CID_A].running and not found[CID_A].exiting


def test_proc_stat_lines_with_spaces_and_parens_in_the_name_parse() -> None:
    info = parse_stat("4242 (java (nm) x) S 1 4242 4242 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 "
                      "30 0 123456 0 0")  # fmt: skip
    assert (info.pid, info.ppid, info.state, info.start_ticks, info.cpu_ticks) == (
        4242, 1, "S", 123456, 10,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("container_id", "application_id", "am"),
    [
        (CID_A, "application_1700000000000_0042", False),
        ("container_1700000000000_0001_01_000001", "application_1700000000000_0001", True),
        ("container_1700000000000_12345_02_000007", "application_1700000000000_12345", False),
    ],
)
def test_container_ids_name_their_application(
    container_id: str, application_id: str, am: bool
) -> None:
    ref = ContainerRef.parse(container_id)
    assert (ref.application_id, ref.is_application_master) == (application_id, am)
    with pytest.raises(ValueError, match="not a YARN container id"):
        ContainerRef.parse("container_nonsense")


BATCH_Q = ClassifySettings(batch_queues=frozenset({"batch"}),
                           latency_critical_tags=frozenset({"lra"}))  # fmt: skip


@pytest.mark.parametrize(
    ("container", "facts", "settings", "kind"),
    [
        (CID_A, AppFacts("root.batch", "YARN"), BATCH_Q, TaskKind.BATCH),
        (CID_A, AppFacts("batch", "YARN", ("lra",)), BATCH_Q, TaskKind.LATENCY_CRITICAL),
        (CID_A, AppFacts("root.web", "MAPREDUCE"), BATCH_Q, TaskKind.BATCH),
        (CID_A, AppFacts("root.web", "YARN"), BATCH_Q, TaskKind.LATENCY_CRITICAL),
        (CID_A, None, BATCH_Q, TaskKind.LATENCY_CRITICAL),
        (CID_A, None, ClassifySettings(unknown=TaskKind.BATCH), TaskKind.BATCH),
        ("container_1700000000000_0042_01_000001", AppFacts("root.batch", "MAPREDUCE"),
         BATCH_Q, TaskKind.APPLICATION_MASTER),
    ],
)  # fmt: skip
def test_classification(
    container: str, facts: AppFacts | None, settings: ClassifySettings, kind: TaskKind
) -> None:
    assert classify(ContainerRef.parse(container), facts, settings) is kind


def test_the_nodemanagers_container_list_parses_as_recorded_from_hadoop_3_4() -> None:
    recorded = json.loads((FIXTURES / "nm-containers.json").read_text())
    containers = parse_nm_containers(recorded, "nm")
    assert len(containers) == 3
    first = next(iter(containers.values()))
    assert first.allocation.cpu_millicores == 1000 and first.allocation.memory_mb == 256
    # A node advertising 4 vcores per CPU: a vcore is a quarter of a core.
    quarter = parse_nm_containers(recorded, "nm", millicores_per_vcore=250)
    assert next(iter(quarter.values())).allocation == Amount(250, 256)
    assert parse_nm_containers({"containers": None}, "nm") == {}
    with pytest.raises(ValueError, match="expected"):
        parse_nm_containers({"apps": []}, "nm")


def test_mapreduce_attempts_map_containers_and_report_progress_in_percent() -> None:
    # Recorded from Hadoop 3.4.3 (tests/fixtures/jhs); the AM's answers have this shape.
    recorded = json.loads((JHS / "attempts-map-0.json").read_text())
    [attempt] = recorded["taskAttempts"]["taskAttempt"]
    container = attempt["assignedContainerId"]
    assert attempt_of_container(recorded, container) == attempt["id"]
    assert attempt_of_container(recorded, CID_B) is None
    assert attempt_progress({"taskAttempt": attempt}) == pytest.approx(1.0)
    assert attempt_progress({"taskAttempt": {**attempt, "progress": 42.5}}) == pytest.approx(0.425)
    assert attempt_progress({"taskAttempt": {}}) is None
    assert attempt_progress("nonsense") is None


@pytest.mark.parametrize(
    "text",
    [
        f"{CID_B}\n",  # "$" would take it: a trailing newline
        f"{CID_B}\n\n",
        f" {CID_B}",
        f"{CID_B}x",
        "container_1700000000000_\u0660\u0660\u0664\u0662_01_000003",  # Arabic-Indic digits
        "container_e17__1700000000000_0042_01_000002",
    ],
)
def test_only_a_whole_container_id_is_one(text: str) -> None:
    assert not is_container_id(text)
    with pytest.raises(ValueError, match="not a YARN container id"):
        ContainerRef.parse(text)
