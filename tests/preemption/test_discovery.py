"""Finding containers among real processes, container ids, classification."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from preemption.classify import AppFacts, ClassifySettings, classify
from preemption.discovery import containers_in_tree
from preemption.model import ContainerRef, TaskKind
from preemption.procfs import ProcFs, parse_stat
from preemption.yarnedge import attempt_of_container, attempt_progress, parse_nm_containers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "preemption"
JHS = Path(__file__).resolve().parents[1] / "fixtures" / "jhs"
CID_A = "container_e17_1700000000000_0042_01_000002"
CID_B = "container_1700000000000_0042_01_000003"

LAUNCHER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.fixture
def launched() -> Iterator[tuple[subprocess.Popen[str], subprocess.Popen[str], int]]:
    """Two "containers" under this test process: A names itself in its environment
    (as launch_container.sh does), B only in its command line (as the
    DefaultContainerExecutor's script path does); each has a child."""
    env_launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "CONTAINER_ID": CID_A, "NM_HOST": "worker-7", "NM_HTTP_PORT": "8042"},
    )  # fmt: skip
    argv_launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, f"/local/appcache/{CID_B}/default_container_executor.sh"],
        stdout=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "CONTAINER_ID"},
    )  # fmt: skip
    assert env_launcher.stdout is not None and argv_launcher.stdout is not None
    child_of_b = int(argv_launcher.stdout.readline())
    env_launcher.stdout.readline()
    yield env_launcher, argv_launcher, child_of_b
    for launcher in (env_launcher, argv_launcher):
        for pid in _children(launcher.pid):
            os.kill(pid, signal.SIGKILL)
        launcher.kill()
        launcher.wait()
        assert launcher.stdout is not None
        launcher.stdout.close()


def _children(pid: int) -> list[int]:
    table = ProcFs().processes()
    return [p for p, info in table.items() if info.ppid == pid]


def test_containers_are_found_in_the_process_tree_by_environment_or_command_line(
    launched: tuple[subprocess.Popen[str], subprocess.Popen[str], int],
) -> None:
    env_launcher, argv_launcher, child_of_b = launched
    found = {c.container_id: c for c in containers_in_tree([os.getpid()], ProcFs())}
    assert set(found) == {CID_A, CID_B}
    assert env_launcher.pid in found[CID_A].pids and len(found[CID_A].pids) == 2
    assert set(found[CID_B].pids) == {argv_launcher.pid, child_of_b}
    assert found[CID_A].nodemanager_url == "http://worker-7:8042"
    assert found[CID_B].nodemanager_url is None
    assert found[CID_A].running and found[CID_B].running
    assert abs(found[CID_A].started_at_s - time.time()) < 120


def test_a_container_whose_working_process_is_stopped_is_not_running(
    launched: tuple[subprocess.Popen[str], subprocess.Popen[str], int],
) -> None:
    _, _, child_of_b = launched
    os.kill(child_of_b, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while True:
            found = {c.container_id: c for c in containers_in_tree([os.getpid()], ProcFs())}
            if not found[CID_B].running or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not found[CID_B].running  # its launcher only waits: the leaf is stopped
        assert found[CID_A].running
    finally:
        os.kill(child_of_b, signal.SIGCONT)


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
