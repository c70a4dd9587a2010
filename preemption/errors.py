"""The node agent's errors, as branches of the project's one error tree.

The agent imports only :mod:`yarn_adapt.errors` from the service's package (no
service code), so ``yarn-adapt agent`` maps these to one line and an exit code like
every other command. Library exceptions (``OSError`` from the cgroup file system,
``json`` and ``tomllib`` errors) are translated in one place per edge:
:mod:`preemption.cgroups.files` for cgroup files, :mod:`preemption.statefile` for the
state file, :mod:`preemption.requests` for the service's answers.

::

    YarnAdaptError
    ├── InputError                         exit 2
    │   ├── SettingsError                           the agent's TOML (file: key: problem)
    │   └── ReclaimRequestError (+ValueError)       a malformed answer from the service
    ├── AgentError                         exit 6   acting on this node failed
    │   ├── CgroupError                             a cgroup file could not be read/written
    │   │   ├── CgroupVanished (+FileNotFoundError) the cgroup went away (container exited)
    │   │   ├── CgroupPermissionDenied (+PermissionError)
    │   │   └── CgroupUnsupported                   no such controller / file on this host
    │   ├── NodeManagerUntrusted                    the named process is not the NodeManager
    │   ├── NodeStatError                           /proc/stat or /proc/meminfo unreadable
    │   ├── StatusUnavailable                       no status file (is the agent running?)
    │   ├── ServiceUnreachable (+ConnectionError)   the service did not answer
    │   └── KillFailed                              the RM refused or did not answer a kill
    └── ApplyError / RollbackFailed        exit 5
        └── RestoreIncomplete                       some limits could not be restored
            └── StateFileCorrupt                    the state file cannot be read: an
                                                    operator must restore by hand

Inside the agent's loop, ``CgroupVanished``, ``CgroupPermissionDenied``,
``NodeManagerUntrusted`` and ``ReclaimRequestError`` are data, not crashes: they are
logged, counted and the task, request or interval is set aside (see
:mod:`preemption.node`, :mod:`preemption.nodemanager`).
"""

from __future__ import annotations

from yarn_adapt.errors import InputError, RollbackFailed, YarnAdaptError


class AgentError(YarnAdaptError):
    """The node agent could not act on this node."""

    exit_code = 6


class CgroupError(AgentError):
    """A cgroup file could not be read or written."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class CgroupVanished(CgroupError, FileNotFoundError):
    """The cgroup directory or file is gone: its container exited."""

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


class CgroupPermissionDenied(CgroupError, PermissionError):
    """The agent may not write this cgroup file (not root, read-only mount, delegation)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


class CgroupUnsupported(CgroupError):
    """The controller or interface file does not exist on this host."""


class NodeManagerUntrusted(AgentError):
    """The process named as the NodeManager failed a check (one line: which)."""


class NodeStatError(AgentError):
    """``/proc/stat`` or ``/proc/meminfo`` lacks what the isolation loop needs."""


class StatusUnavailable(AgentError):
    """The agent's status file is missing or is not one (``agent status``)."""


class ServiceUnreachable(AgentError, ConnectionError):
    """The yarn-adapt service did not answer the agent's request."""


class KillFailed(AgentError):
    """The ResourceManager refused, or did not answer, a container kill."""


class ReclaimRequestError(InputError, ValueError):
    """The service answered with something that is not a reclaim request."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


class RestoreIncomplete(RollbackFailed):
    """Some limits the agent changed could not be put back; they stay in the state
    file, and the next start or ``yarn-adapt agent restore`` tries again."""


class StateFileCorrupt(RestoreIncomplete):
    """The state file cannot be parsed, so the agent cannot know what to restore."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem} (restore the listed cgroups by hand)")
        self.path = path
        self.problem = problem
