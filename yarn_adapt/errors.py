"""The one error tree of yarn-adapt.

Every error the project raises on purpose derives from :class:`YarnAdaptError`.
Library exceptions (requests, lxml, OSError, json) are translated into this tree in
exactly one place per edge (``yarn_adapt.yarn.http`` for the REST edge,
``yarn_adapt.yarn.confxml`` for scheduler XML, ``yarn_adapt.workload`` loaders for
traces), always with ``raise ... from exc`` so ``--debug`` shows the cause.

::

    YarnAdaptError                      exit 1
    ├── InputError                      exit 2   bad input given by the operator
    │   ├── ConfigFileError                      unreadable / malformed / wrong root XML
    │   ├── ConfigValidationError                a config YARN would refuse (issues listed)
    │   ├── TraceError                           a broken trace row (file:line)
    │   ├── SettingsError                        yarn-adapt's own settings file
    │   │   └── StateDamaged                     the service's database fails its
    │   │                                        integrity check (names the backup copy)
    │   ├── ProposalNotFound (+KeyError)         no stored proposal has that id
    │   └── ProposalStateError                   an action the proposal's state does not
    │                                            allow (approved twice, stale, ...)
    ├── YarnError                       exit 3   talking to the RM or JobHistory failed
    │   ├── YarnUnavailable (+ConnectionError)   no address answered
    │   ├── YarnTimeout (+TimeoutError)          an address answered too slowly
    │   ├── YarnStandby                          every RM address is a standby
    │   ├── YarnHTTPError                        4xx/5xx with the server's message
    │   │   └── YarnNotSupported                 this YARN lacks the endpoint (404/405)
    │   └── YarnMalformedResponse (+ValueError)  a body that is not the documented shape
    └── ApplyError                      exit 4   acting on the cluster did not complete
        ├── ApplyInProgress                      another apply holds the lock
        ├── ApplyRejected                        the RM refused; the old config is back
        ├── ApplyNotVerified                     the RM does not report the new settings
        │                                        (rolled back)
        └── RollbackFailed              exit 5   the old config could not be restored:
                                                 operator action needed

The CLI catches only ``YarnAdaptError``, prints ``yarn-adapt: <message>`` on one line and
exits with the class's ``exit_code``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class YarnAdaptError(Exception):
    """Root of every error yarn-adapt raises on purpose."""

    exit_code = 1

    def one_line(self) -> str:
        """The message on a single line, as the CLI prints it."""
        return " ".join(str(self).split())


# --------------------------------------------------------------------------- input


class InputError(YarnAdaptError):
    """Something the operator handed us is wrong; nothing was changed."""

    exit_code = 2


class ConfigFileError(InputError):
    """A scheduler configuration file cannot be read or has the wrong shape."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True)
class ValidationIssue:
    """One rule a configuration breaks, named by queue path and property."""

    queue: str
    prop: str
    message: str

    def __str__(self) -> str:
        where = ".".join(part for part in (self.queue, self.prop) if part) or "configuration"
        return f"{where}: {self.message}"


class ConfigValidationError(InputError):
    """The configuration breaks rules YARN itself enforces."""

    def __init__(self, issues: Sequence[ValidationIssue], source: str = "") -> None:
        self.issues = tuple(issues)
        self.source = source
        prefix = f"{source}: " if source else ""
        more = f" (and {len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
        first = str(self.issues[0]) if self.issues else "invalid configuration"
        super().__init__(f"{prefix}{first}{more}")


class TraceError(InputError):
    """A workload trace row cannot be parsed."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class SettingsError(InputError):
    """yarn-adapt's own settings (yarn-adapt.toml, CLI options) are wrong."""


class StateDamaged(SettingsError):
    """The service's own database is damaged; the message names the file and the
    backup copy the service keeps."""


class ProposalNotFound(InputError, KeyError):
    """The service has no proposal with that id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "no such proposal"


class VersionNotFound(ProposalNotFound):
    """The service has no configuration version with that id (a 404 like a proposal)."""


class ProposalStateError(InputError):
    """An operator action the proposal's current state does not allow; nothing was
    done (approving twice, applying a rejected proposal, a stale proposal)."""


class TaskTimeModelError(InputError):
    """A saved task-time model cannot be loaded (wrong file, incompatible version)."""


# --------------------------------------------------------------------------- yarn edge


class YarnError(YarnAdaptError):
    """Talking to the ResourceManager or the JobHistory Server failed."""

    exit_code = 3


class YarnUnavailable(YarnError, ConnectionError):
    """No configured address accepted a connection."""


class YarnTimeout(YarnError, TimeoutError):
    """The server did not answer within the timeout."""


class YarnStandby(YarnError):
    """Every configured ResourceManager is in standby."""


class YarnHTTPError(YarnError):
    """The server answered with an error status."""

    def __init__(self, method: str, url: str, status: int, message: str) -> None:
        super().__init__(f"{method} {url} -> HTTP {status}: {message}")
        self.method = method
        self.url = url
        self.status = status
        self.message = message


class YarnNotSupported(YarnHTTPError):
    """The server does not offer this endpoint (404/405): an older or differently
    configured YARN. Callers fall back instead of failing."""


class YarnMalformedResponse(YarnError, ValueError):
    """The body is not the shape the documented API promises."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(f"{url}: malformed response: {problem}")
        self.url = url
        self.problem = problem


# --------------------------------------------------------------------------- act


class ApplyError(YarnAdaptError):
    """Applying a change to the cluster did not complete."""

    exit_code = 4


class ApplyInProgress(ApplyError):
    """Another apply holds the lock; nothing was done."""


class ApplyRejected(ApplyError):
    """The RM refused the change; the previous configuration is active again."""


class ApplyNotVerified(ApplyError):
    """The RM does not report the new settings; the change was rolled back."""


class RollbackFailed(ApplyError):
    """Restoring the previous configuration failed: the operator must act."""

    exit_code = 5
