"""Fixtures for the agent's tests on real cgroups (v1, root) and real processes.

Every test cgroup lives below a parent named ``yarn-adapt-test-<pid>-<n>`` in the
``cpu``, ``cpuacct`` and ``memory`` hierarchies, laid out like the NodeManager's
LinuxContainerExecutor hierarchy (one child per container id). The finalizer kills
any process still inside (they are all this test's children) and removes every
cgroup, deepest first. The CPU-share test gives its parent the largest
``cpu.shares`` so that, on a machine shared with other busy work, its pinned burner
is held back by its CFS quota and not by contention: it checks the cap, not the
neighbours.

Without root or without writable v1 hierarchies these tests fail under ``CI=true``
and are skipped elsewhere.

``serve`` starts local HTTP servers that replay recorded YARN answers by path (and
count every request, so a test can show that an address was never asked).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from preemption.cgroups import Cgroup, V1Backend
from preemption.errors import CgroupError

_COUNTER = itertools.count()
CONTROLLERS = ("cpu", "cpuacct", "memory")
LAST_CPU = max(os.sched_getaffinity(0))

BURNER = f"""
import os, sys
os.sched_setaffinity(0, {{{LAST_CPU}}})
print("ready", flush=True)
while True:
    pass
"""

HOLDER = """
import sys, time
sys.stdin.readline()
block = bytearray(int(sys.argv[1]) << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
print("ready", flush=True)
time.sleep(600)
"""


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def v1() -> V1Backend:
    if os.geteuid() != 0:
        unavailable("cgroup tests need root")
    try:
        backend = V1Backend.from_host()
    except CgroupError as error:
        unavailable(f"no cgroup v1 cpu/cpuacct/memory here: {error.one_line()}")
        raise
    probe = backend.mounts["cpu"] / f"yarn-adapt-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        unavailable(f"cgroup v1 is not writable: {exc}")
    return backend


@pytest.fixture
def hierarchy(v1: V1Backend) -> Iterator[str]:
    """A fresh LCE-like parent cgroup; removed with everything below it afterwards."""
    parent = f"yarn-adapt-test-{os.getpid()}-{next(_COUNTER)}"
    for controller in CONTROLLERS:
        (v1.mounts[controller] / parent).mkdir()
    try:
        yield parent
    finally:
        remove_tree(v1, parent)


def remove_tree(v1: V1Backend, parent: str) -> None:
    for controller in CONTROLLERS:
        root = v1.mounts[controller] / parent
        if not root.exists():
            continue
        directories = sorted(
            (p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
        )
        for directory in [*directories, root]:
            _kill_members(directory)
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _kill_members(directory: Path) -> None:
    procs = directory / "cgroup.procs"
    if not procs.exists():
        return
    for line in procs.read_text().split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line), signal.SIGKILL)


def container_id(n: int) -> str:
    return f"container_1700000000000_0042_01_{n:06d}"


@pytest.fixture
def processes() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start child processes; every one is killed afterwards."""
    started: list[subprocess.Popen[str]] = []

    def start(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # its own process group: its children die with it
        )  # fmt: skip
        started.append(child)
        return child

    yield start
    for child in started:
        with contextlib.suppress(ProcessLookupError):  # the whole group: a launcher's
            os.killpg(child.pid, signal.SIGKILL)  # burner child must not outlive the test
        child.wait(timeout=10)
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def place(v1: V1Backend, group: Cgroup, pid: int) -> None:
    """Create ``group`` in every controller (as the NodeManager would) and move ``pid`` in."""
    for controller in CONTROLLERS:
        directory = v1.mounts[controller] / group.relpath
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cgroup.procs").write_text(str(pid))


def cpu_share(v1: V1Backend, group: Cgroup, window_s: float) -> float:
    """Cores used by ``group`` over ``window_s`` (cpuacct.usage)."""
    start_ns, start = v1.usage(group).cpu_usage_ns, time.monotonic()
    time.sleep(window_s)
    return (v1.usage(group).cpu_usage_ns - start_ns) / 1e9 / (time.monotonic() - start)


@dataclass
class Replay:
    """Answers recorded bodies by path; anything else 404, as YARN's Jersey does."""

    routes: dict[str, str]
    asked: list[str] = field(default_factory=list)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                replay.asked.append(path)
                body = replay.routes.get(path)
                status = 200 if body is not None else 404
                data = (body or '{"RemoteException": {"message": "not found"}}').encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, str]], tuple[str, Replay]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(routes: dict[str, str]) -> tuple[str, Replay]:
        replay = Replay(routes)
        server = ThreadingHTTPServer(("127.0.0.1", 0), replay.handler())
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", replay

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
