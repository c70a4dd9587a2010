"""What the agent asks YARN: application facts, container allocations, MapReduce task
progress, and the last-resort kill.

Everything goes through the project's one HTTP seam (:mod:`yarn_adapt.yarn.http`:
timeouts, retries of what is safe to retry, RM HA, simple or SPNEGO auth) and the
typed RM client; the agent does not import the service.

* Application facts (queue, type, tags): ``GET /ws/v1/cluster/apps/{id}``, cached
  for ``cache_s`` (an application can be moved to another queue).
* The NodeManager's containers (:class:`NodeManagerClient`): its own ``GET
  /ws/v1/node/containers`` at ``[yarn] nodemanager_url`` (the agent's configuration,
  never a container's environment): each container's state and allocation
  (``totalVCoresNeeded``, ``totalMemoryNeededMB``). :mod:`preemption.nodemanager`
  reads it every interval: only what it lists as running is acted on.
* MapReduce progress: the AM through the RM's web proxy,
  ``/proxy/{app}/ws/v1/mapreduce/jobs/{job}/tasks/{task}/attempts/{attempt}``; the
  container → attempt mapping (``assignedContainerId``) is looked up once per job.
  Not every application is MapReduce and an AM can be gone: progress is then
  ``None`` ("where available").
* JobHistory, when ``jobhistory`` names its web address: where the AM gives no
  running attempt for the container (the AM is gone, or the attempt already ended),
  ``/ws/v1/history/mapreduce/jobs/{job}/tasks`` and ``.../tasks/{task}/attempts``
  give the finished attempt's final progress (JobHistory holds finished jobs only;
  a job still running is not there yet and the answer stays ``None``). A finished
  attempt's progress never changes: it is remembered.
* Kill, YARN's way: ``POST /ws/v1/cluster/containers/{id}/signal/FORCEFUL_SHUTDOWN``
  (Hadoop ≥ 3.0: the RM asks the NM, which SIGKILLs the container; the AM sees it
  exit with 137 and, for MapReduce, reruns the task attempt), or with
  ``kill = "application"`` the whole application (``PUT /apps/{id}/state``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote

from preemption.classify import AppFacts
from preemption.errors import KillFailed
from preemption.model import Amount, Locality
from yarn_adapt.errors import YarnError, YarnHTTPError
from yarn_adapt.yarn.http import Body, HttpSettings, Transport
from yarn_adapt.yarn.rm import ResourceManagerClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NmContainer:
    container_id: str
    state: str
    allocation: Amount


def parse_nm_containers(
    document: object, url: str, *, millicores_per_vcore: int = 1000
) -> dict[str, NmContainer]:
    """The NM's ``/ws/v1/node/containers`` answer (Jersey gives ``null`` for none); a
    vcore is ``millicores_per_vcore`` of CPU (a node advertising more vcores than it
    has CPUs gives each less than a core)."""
    if not isinstance(document, dict) or "containers" not in document:
        raise ValueError(f"{url}: expected {{'containers': ...}}")
    listed = document["containers"] or {}
    items = listed.get("container", []) if isinstance(listed, dict) else []
    if isinstance(items, dict):
        items = [items]
    found = {}
    for item in items:
        cid = str(item["id"])
        allocation = Amount(
            round(float(item.get("totalVCoresNeeded", 0)) * millicores_per_vcore),
            int(item.get("totalMemoryNeededMB", 0)),
        )
        found[cid] = NmContainer(cid, str(item.get("state", "")), allocation)
    return found


def attempt_of_container(document: object, container_id: str) -> str | None:
    """The attempt id whose ``assignedContainerId`` is ``container_id`` in a
    ``/tasks/{task}/attempts`` answer."""
    attempts = _listed(document, "taskAttempts", "taskAttempt")
    for attempt in attempts:
        if attempt.get("assignedContainerId") == container_id:
            return str(attempt["id"])
    return None


def attempt_progress(document: object) -> float | None:
    """Progress in [0, 1] from a ``/attempts/{attempt}`` answer (MR reports percent)."""
    if not isinstance(document, dict) or not isinstance(document.get("taskAttempt"), dict):
        return None
    value = document["taskAttempt"].get("progress")
    return None if value is None else max(0.0, min(1.0, float(value) / 100.0))


def _listed(document: object, outer: str, inner: str) -> list[dict[str, object]]:
    if not isinstance(document, dict) or not isinstance(document.get(outer), dict):
        return []
    items = document[outer].get(inner, [])
    return [items] if isinstance(items, dict) else [i for i in items if isinstance(i, dict)]


class NodeManagerClient:
    """The NodeManager's container list, at the address the agent is configured with."""

    def __init__(
        self, base_url: str, http: HttpSettings, *, millicores_per_vcore: int = 1000
    ) -> None:
        self.url = f"{base_url.rstrip('/')}/ws/v1/node/containers"
        self.transport = Transport(http)
        self.millicores_per_vcore = millicores_per_vcore

    def containers(self) -> dict[str, NmContainer]:
        """Every container the NM knows, by id; ``YarnError`` if it cannot say."""
        reply = self.transport.request("GET", self.url, retries=0)
        try:
            return parse_nm_containers(
                reply.json(), self.url, millicores_per_vcore=self.millicores_per_vcore
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise YarnError(f"{self.url}: unexpected answer: {exc}") from exc

    def close(self) -> None:
        self.transport.close()


@dataclass
class _Cached:
    facts: AppFacts | None
    at_s: float


@dataclass
class YarnEdge:
    """The agent's YARN calls; ``kill_mode`` is ``container``, ``application`` or
    ``never``."""

    rm_addresses: Sequence[str]
    http: HttpSettings = field(default_factory=HttpSettings)
    kill_mode: str = "never"
    millicores_per_vcore: int = 1000
    cache_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    jobhistory: str = ""

    def __post_init__(self) -> None:
        self.transport = Transport(self.http)
        self.rm = ResourceManagerClient(list(self.rm_addresses), transport=self.transport)
        self._apps: dict[str, _Cached] = {}
        self._attempts: dict[str, tuple[str, str, str]] = {}
        self._finished: dict[str, float | None] = {}

    def close(self) -> None:
        self.transport.close()

    # ----------------------------------------------------------------- facts

    def app_facts(self, application_id: str) -> AppFacts | None:
        """Queue, type and tags; None when the RM does not know the application.
        ``YarnError`` when the RM cannot be asked (the caller treats the container as
        unknown for this interval)."""
        cached = self._apps.get(application_id)
        if cached is not None and self.clock() - cached.at_s < self.cache_s:
            return cached.facts
        try:
            app = self.rm.app(application_id)
            facts: AppFacts | None = AppFacts(app.queue, app.application_type, app.tags)
        except YarnHTTPError as error:
            if error.status != 404:
                raise
            facts = None
        self._apps[application_id] = _Cached(facts, self.clock())
        return facts

    # ----------------------------------------------------------------- progress

    def task_progress(self, application_id: str, container_id: str) -> float | None:
        """The MapReduce attempt's progress, or None where not available: from the AM
        while the attempt runs, else the finished attempt's from JobHistory."""
        cached = self._apps.get(application_id)
        known = cached.facts if cached is not None else None
        if known is not None and known.application_type.upper() != "MAPREDUCE":
            return None
        if container_id in self._finished:
            return self._finished[container_id]
        try:
            progress = self._am_progress(application_id, container_id)
        except YarnError as error:
            log.debug("no progress from the AM for %s: %s", container_id, error.one_line())
            progress = None
        if progress is None and self.jobhistory:
            return self._history_progress(application_id, container_id)
        return progress

    def _am_progress(self, application_id: str, container_id: str) -> float | None:
        where = self._attempts.get(container_id) or self._find_attempt(application_id, container_id)
        if where is None:
            return None
        job, task, attempt = where
        path = f"/jobs/{job}/tasks/{task}/attempts/{attempt}"
        return attempt_progress(self._am_get(application_id, path))

    def _history_progress(self, application_id: str, container_id: str) -> float | None:
        """A finished attempt's final progress from JobHistory (None if it has none)."""
        job = "job_" + application_id.removeprefix("application_")
        base = f"{self.jobhistory.rstrip('/')}/ws/v1/history/mapreduce/jobs/{quote(job)}"
        try:
            for task in _listed(self._get(base + "/tasks"), "tasks", "task"):
                task_id = str(task["id"])
                answer = self._get(f"{base}/tasks/{quote(task_id)}/attempts")
                for attempt in _listed(answer, "taskAttempts", "taskAttempt"):
                    if attempt.get("assignedContainerId") == container_id:
                        self._attempts[container_id] = (job, task_id, str(attempt["id"]))
                        final = attempt_progress({"taskAttempt": attempt})
                        self._finished[container_id] = final
                        return final
        except YarnError as error:
            log.debug("no progress from JobHistory for %s: %s", container_id, error.one_line())
        return None

    def _get(self, url: str) -> object:
        return self.transport.request("GET", url, retries=0).json()

    def _find_attempt(self, application_id: str, container_id: str) -> tuple[str, str, str] | None:
        for job in _listed(self._am_get(application_id, "/jobs"), "jobs", "job"):
            job_id = str(job["id"])
            for task in _listed(
                self._am_get(application_id, f"/jobs/{job_id}/tasks"), "tasks", "task"
            ):
                if task.get("state") != "RUNNING":
                    continue
                task_id = str(task["id"])
                answer = self._am_get(application_id, f"/jobs/{job_id}/tasks/{task_id}/attempts")
                attempt = attempt_of_container(answer, container_id)
                if attempt is not None:
                    self._attempts[container_id] = (job_id, task_id, attempt)
                    return self._attempts[container_id]
        return None

    def _am_get(self, application_id: str, path: str) -> object:
        proxied = f"/proxy/{quote(application_id)}/ws/v1/mapreduce{path}"
        base = self.rm.endpoints.active or self.rm.endpoints.find_active()
        return self._get(base + proxied)

    def locality(self, container_id: str) -> Locality:
        """A MapReduce reduce reads its input from every node: non-local. Anything
        else is unknown (YARN's REST does not say where a running map's split is)."""
        where = self._attempts.get(container_id)
        if where is not None and "_r_" in where[1]:
            return Locality.NON_LOCAL
        return Locality.UNKNOWN

    # ----------------------------------------------------------------- kill

    def kill(self, container_id: str, application_id: str, reason: str) -> None:
        """Kill through the RM; ``KillFailed`` with the RM's answer if it refused."""
        if self.kill_mode == "never":
            raise KillFailed(f"{container_id}: kills are disabled (kill = 'never')")
        try:
            if self.kill_mode == "application":
                body = Body.json({"state": "KILLED"})
                path = f"/ws/v1/cluster/apps/{quote(application_id)}/state"
                self.rm.endpoints.request("PUT", path, body=body)
            else:
                path = f"/ws/v1/cluster/containers/{quote(container_id)}/signal/FORCEFUL_SHUTDOWN"
                self.rm.endpoints.request("POST", path)
        except YarnError as error:
            raise KillFailed(
                f"{container_id}: the RM did not kill it: {error.one_line()}"
            ) from error
        log.warning("killed %s through the RM (%s): %s", container_id, self.kill_mode, reason)
