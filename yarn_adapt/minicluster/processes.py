"""Launch the cluster's JVMs and make sure none outlives the cluster.

Every process the harness starts gets its own process group (``start_new_session``)
and the environment marker ``YARN_ADAPT_MINICLUSTER=<cluster root>``. Containers
started by a NodeManager run in sessions of their own, so killing process groups is
not enough: :func:`kill_marked_processes` also kills whatever carries the marker, runs
in the cluster directory, or names it on its command line. A small reaper process
does the same when the owning Python process dies without calling stop() (SIGKILL,
OOM), so an interrupted test run leaves no JVM behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MARKER_ENV = "YARN_ADAPT_MINICLUSTER"
PROC = Path("/proc")


@dataclass
class ManagedProcess:
    """One process the harness started, with the file holding its output."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill_group(self) -> None:
        """SIGKILL the whole process group; harmless if it is already gone."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)


def launch(
    name: str, command: Sequence[str], log_path: Path, env: Mapping[str, str], cwd: Path
) -> ManagedProcess:
    """Start ``command`` in a new session with stdout and stderr in ``log_path``."""
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            list(command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=dict(env), cwd=cwd, start_new_session=True,
        )  # fmt: skip
    return ManagedProcess(name=name, popen=popen, log_path=log_path)


def marked_env(root: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The harness's environment for a child: ours, minus JVM option hooks, plus the marker."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "CLASSPATH")}
    env.update(extra)
    env[MARKER_ENV] = str(root)
    return env


# --------------------------------------------------------------------------- sweeping


def kill_marked_processes(root: Path) -> int:
    """SIGKILL every process tied to the cluster at ``root``; returns how many were hit."""
    killed = 0
    for _ in range(3):  # a dying NodeManager may still fork a container once
        pids = list(_marked_pids(root))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += len(pids)
        if not pids:
            break
        time.sleep(0.1)
    return killed


def _marked_pids(root: Path) -> Iterator[int]:
    marker = f"{MARKER_ENV}={root}".encode()
    root_bytes = str(root).encode()
    me = os.getpid()
    for entry in PROC.iterdir():
        if entry.name.isdigit() and int(entry.name) != me and _is_tied(entry, marker, root_bytes):
            yield int(entry.name)


def _is_tied(proc: Path, marker: bytes, root: bytes) -> bool:
    try:
        environ = (proc / "environ").read_bytes()
        cmdline = (proc / "cmdline").read_bytes()
        cwd = bytes((proc / "cwd").readlink())
    except OSError:  # gone, a zombie, or not ours to read
        return False
    in_root = cwd == root or cwd.startswith(root + b"/")
    return marker in environ.split(b"\0") or in_root or root + b"/" in cmdline


# --------------------------------------------------------------------------- reaper


def process_start_ticks(pid: int) -> int:
    """The start time of ``pid`` in clock ticks, which tells a reused pid apart."""
    stat = (PROC / str(pid) / "stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


def start_reaper(root: Path, log_path: Path) -> ManagedProcess:
    """A watchdog that kills the cluster's processes once this Python process is gone."""
    owner = os.getpid()
    command = [
        sys.executable, "-m", "yarn_adapt.minicluster.reaper",
        str(owner), str(process_start_ticks(owner)), str(root),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
    # The reaper imports this very package, installed or not (it runs from /).
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    return launch("reaper", command, log_path, env, cwd=Path("/"))
