"""A handle on an application submitted through a client JVM."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Protocol

from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.processes import ManagedProcess
from yarn_adapt.minicluster.rest import poll

# YarnClientImpl logs this line (INFO) as soon as the RM accepted the submission.
SUBMITTED = re.compile(r"Submitted application (application_\d+_\d+)")


class AppControl(Protocol):
    """What an app's handle asks of its cluster (:class:`~yarn_adapt.minicluster.MiniCluster`)."""

    def wait_for_app(
        self, app_id: str, timeout_s: float = ..., states: Iterable[str] = ...
    ) -> dict[str, Any]: ...

    def kill_app(self, app_id: str) -> None: ...


class SubmittedApp:
    """Returned at once by a submit call; the client keeps running until the app ends."""

    def __init__(self, cluster: AppControl, client: ManagedProcess, kind: str) -> None:
        self.cluster = cluster
        self.client = client
        self.kind = kind
        self._app_id: str | None = None

    def __repr__(self) -> str:
        return f"SubmittedApp({self.kind}, {self._app_id or 'id not known yet'})"

    def application_id(self, timeout_s: float = 90.0) -> str:
        """The YARN application id, waiting for the client to submit if needed."""
        if self._app_id is None:
            self._app_id = poll(self._id_from_log, timeout_s, f"{self.client.name} to submit")
        return self._app_id

    @property
    def job_id(self) -> str:
        """The MapReduce job id (``job_<cluster ts>_<seq>``) of a MapReduce submission."""
        return self.application_id().replace("application_", "job_", 1)

    def wait(self, timeout_s: float = 300.0) -> dict[str, Any]:
        """Wait until the app is FINISHED, FAILED or KILLED; return its /apps entry."""
        return self.cluster.wait_for_app(self.application_id(), timeout_s)

    def wait_running(self, timeout_s: float = 120.0) -> dict[str, Any]:
        """Wait until the app's AM runs (or it already ended); return its /apps entry."""
        states = ("RUNNING", "FINISHED", "FAILED", "KILLED")
        return self.cluster.wait_for_app(self.application_id(), timeout_s, states)

    def kill(self) -> None:
        """Kill the application through the RM and stop its client."""
        if self._app_id is not None or self.client.alive():
            self.cluster.kill_app(self.application_id())
        self.client.kill_group()

    def client_exit_code(self, timeout_s: float = 60.0) -> int:
        return self.client.popen.wait(timeout=timeout_s)

    def _id_from_log(self) -> str | None:
        found = SUBMITTED.search(self.client.log_path.read_text(errors="replace"))
        if found:
            return found.group(1)
        if not self.client.alive():
            raise MiniClusterError(
                f"{self.client.name} client exited with code {self.client.popen.returncode} "
                f"before submitting (log: {self.client.log_path})"
            )
        return None
