"""The one process the agent trusts on its node: the NodeManager, and what it runs.

The agent runs as root; every other process on the node may belong to a tenant. So
the agent takes nothing about YARN from a process's own word (its environment, its
command line, a port it listens on) and everything from the NodeManager, verified
every interval:

1. **Which process.** ``[discovery] nodemanager_pid`` if set, else the pid in
   ``nodemanager_pid_file`` (YARN's own, ``$HADOOP_PID_DIR/hadoop-<user>-nodemanager.pid``).
   The pid file must be a regular file owned by root or the NodeManager's user and
   writable by no one else (else anyone could name any process).
2. **Is it the NodeManager.** Every uid of the process (real, effective, saved,
   file system: ``/proc/<pid>/status``) is ``nodemanager_user``'s, and it is a
   ``java`` whose main class, the first argument after the JVM's own options, is
   exactly :data:`NODEMANAGER_CLASS` (never a substring of the command line: any
   process may put that text in its arguments). A process failing a check is not
   the NodeManager, whatever else it says.
3. **What it runs.** ``GET /ws/v1/node/containers`` at ``[yarn] nodemanager_url``
   (from the agent's configuration, never from a container). Only the containers it
   lists as ``RUNNING`` may be squeezed, given a cgroup or killed; their allocation
   is the baseline's fallback.

If a step fails, :meth:`NodeManagerWatch.observe` returns a view with the reason and
no containers, and the agent acts on nothing that interval. The reason is logged
once when it first appears (one line: what did not match), and once more when the
NodeManager is trusted again.
"""

from __future__ import annotations

import logging
import os
import pwd
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Protocol

from preemption.errors import NodeManagerUntrusted
from preemption.procfs import ProcFs
from yarn_adapt.errors import YarnError

if TYPE_CHECKING:
    from preemption.yarnedge import NmContainer

log = logging.getLogger(__name__)

NODEMANAGER_CLASS = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"
RUNNING = "RUNNING"
# java launcher options whose value is the next argument (java --help, JDK 11-21).
_JAVA_OPTIONS_WITH_VALUE = frozenset({
    "-cp", "-classpath", "--class-path", "-p", "--module-path", "--upgrade-module-path",
    "--add-modules", "--add-reads", "--add-exports", "--add-opens", "--limit-modules",
    "--patch-module", "--enable-native-access", "--source",
})  # fmt: skip
# After these the launcher runs a jar or a module, never a class named on its own.
_JAVA_NOT_A_CLASS = frozenset({"-jar", "-m", "--module", "-d", "--describe-module"})


@dataclass(frozen=True, kw_only=True)
class NodeManagerIdentity:
    """How the operator names the NodeManager (``[discovery]``)."""

    user: str
    pid_file: str
    pid: int = 0


@dataclass(frozen=True)
class VerifiedNodeManager:
    """The NodeManager process, as verified this interval."""

    pid: int
    uid: int
    start_ticks: int


@dataclass(frozen=True)
class NodeManagerView:
    """What the verified NodeManager vouches for now; ``problem`` says why nothing can
    be trusted this interval (then ``process`` is None and ``running`` empty)."""

    process: VerifiedNodeManager | None
    running: Mapping[str, NmContainer] = field(default_factory=dict)
    problem: str | None = None

    @property
    def trusted(self) -> bool:
        return self.problem is None and self.process is not None


class NodeManagerSource(Protocol):
    """The agent's view of its NodeManager, once per interval."""

    def observe(self) -> NodeManagerView: ...


class ContainerLister(Protocol):
    """The NodeManager's ``/ws/v1/node/containers`` (:class:`~preemption.yarnedge.
    NodeManagerClient`)."""

    url: str

    def containers(self) -> dict[str, NmContainer]: ...


# ----------------------------------------------------------------- pure checks


def java_main_class(argv: Sequence[str]) -> str | None:
    """The main class a ``java`` command line runs, or None (not java, a jar, a
    module, an argument file the launcher would expand)."""
    if not argv or PurePosixPath(argv[0]).name != "java":
        return None
    arguments = iter(argv[1:])
    for argument in arguments:
        if argument.startswith("@") or argument in _JAVA_NOT_A_CLASS:
            return None
        if argument.startswith("--module="):
            return None
        if argument in _JAVA_OPTIONS_WITH_VALUE:
            next(arguments, None)
            continue
        if not argument.startswith("-"):
            return argument
    return None


def user_uid(user: str) -> int:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise NodeManagerUntrusted(
            f"no such user {user!r} ([discovery] nodemanager_user)"
        ) from None


def read_pid_file(path: str, allowed_owners: frozenset[int]) -> int:
    """The pid in ``path``, if the file is one only root or the NM user could write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise NodeManagerUntrusted(
            f"pid file {path} ([discovery] nodemanager_pid_file): {exc.strerror or exc}"
        ) from None
    try:
        info = os.fstat(fd)
        text = os.read(fd, 64).decode(errors="replace") if stat.S_ISREG(info.st_mode) else ""
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        raise NodeManagerUntrusted(f"pid file {path}: not a regular file")
    if info.st_uid not in allowed_owners:
        raise NodeManagerUntrusted(
            f"pid file {path}: owned by uid {info.st_uid}, not root or the NodeManager user"
        )
    if info.st_mode & 0o022:
        raise NodeManagerUntrusted(
            f"pid file {path}: writable by group or others (mode {info.st_mode & 0o777:o})"
        )
    pid = text.strip()
    if not pid.isascii() or not pid.isdigit() or int(pid) <= 0:
        raise NodeManagerUntrusted(f"pid file {path}: {text.strip()[:20]!r} is not a pid")
    return int(pid)


def verify_nodemanager(identity: NodeManagerIdentity, procfs: ProcFs) -> VerifiedNodeManager:
    """The NodeManager process, or ``NodeManagerUntrusted`` saying what did not match."""
    uid = user_uid(identity.user)
    pid = identity.pid or read_pid_file(identity.pid_file, frozenset({0, uid}))
    info = procfs.process(pid)
    if info is None:
        raise NodeManagerUntrusted(f"pid {pid}: no such process")
    _check_owner(pid, procfs.uids(pid) or (), uid, identity.user)
    _check_main_class(pid, procfs.cmdline(pid))
    again = procfs.process(pid)  # the same process throughout the checks
    if again is None or again.start_ticks != info.start_ticks:
        raise NodeManagerUntrusted(f"pid {pid}: exited while being checked")
    return VerifiedNodeManager(pid, uid, info.start_ticks)


def _check_owner(pid: int, uids: Sequence[int], uid: int, user: str) -> None:
    if not uids or any(owner != uid for owner in uids):
        shown = "/".join(map(str, uids)) or "unknown"
        raise NodeManagerUntrusted(f"pid {pid} runs as uid {shown}, not {user} (uid {uid})")


def _check_main_class(pid: int, argv: Sequence[str]) -> None:
    main_class = java_main_class(argv)
    if main_class != NODEMANAGER_CLASS:
        what = f"main class {main_class!r}" if main_class else f"{argv[:1]!r}, no java main class"
        raise NodeManagerUntrusted(f"pid {pid} runs {what}, not {NODEMANAGER_CLASS}")


# ----------------------------------------------------------------- the watch


class NodeManagerWatch:
    """Verifies the NodeManager and reads its container list, every interval."""

    def __init__(self, identity: NodeManagerIdentity, lister: ContainerLister,
                 procfs: ProcFs) -> None:  # fmt: skip
        self.identity = identity
        self.lister = lister
        self.procfs = procfs
        self._said: str | None = None

    def observe(self) -> NodeManagerView:
        try:
            process = verify_nodemanager(self.identity, self.procfs)
        except NodeManagerUntrusted as refused:
            return self._refuse(f"not trusting the NodeManager: {refused.one_line()}")
        try:
            listed = self.lister.containers()
        except YarnError as error:
            return self._refuse(f"NodeManager container list unreadable: {error.one_line()}")
        self._say(
            f"trusted {process.pid}",
            f"NodeManager trusted: pid {process.pid} ({self.identity.user}), containers "
            f"from {self.lister.url}",
        )
        running = {cid: c for cid, c in listed.items() if c.state == RUNNING}
        return NodeManagerView(process, running)

    def _refuse(self, reason: str) -> NodeManagerView:
        self._say(reason, f"{reason}; acting on nothing until it is", problem=True)
        return NodeManagerView(None, problem=reason)

    def _say(self, state: str, line: str, *, problem: bool = False) -> None:
        """Log a change of trust once, not every interval."""
        if state != self._said:
            self._said = state
            log.log(logging.WARNING if problem else logging.INFO, "%s", line)
