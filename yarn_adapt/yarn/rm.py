"""ResourceManager REST client (``/ws/v1/cluster``), typed: every method returns model
objects parsed by :mod:`yarn_adapt.yarn.parse`.

Reads need no authentication on an unsecured cluster. Writes
(``scheduler-conf``, ``nodes/{id}/resource``) need a user: set
``HttpSettings(user=...)`` (sent as ``user.name``) or Kerberos; with
``yarn.acl.enable=true`` that user must be a YARN admin (RMWebServices
``initForWritableEndpoints``).

Example::

    with ResourceManagerClient(["http://rm1:8088", "http://rm2:8088"]) as rm:
        for queue in rm.scheduler().queues():
            print(queue.path, queue.used_capacity)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar
from urllib.parse import quote

from yarn_adapt.errors import YarnHTTPError, YarnNotSupported
from yarn_adapt.model import (
    AppAttempt,
    Application,
    AppState,
    ClusterInfo,
    ClusterMetrics,
    Node,
    NodeState,
    Resources,
    SchedulerStatus,
)
from yarn_adapt.yarn import parse
from yarn_adapt.yarn.http import (
    DEFAULT_HTTP_SETTINGS,
    Body,
    HttpReply,
    HttpSettings,
    Params,
    ResourceManagerEndpoints,
    Transport,
)

T = TypeVar("T")
Parser = Callable[[object, str], T]
ConfProperties = tuple[tuple[str, str], ...]

CLUSTER = "/ws/v1/cluster"


def _segment(value: str) -> str:
    """One path segment; node ids keep their ``host:port`` colon."""
    return quote(value, safe=":")


def _joined(values: Iterable[str]) -> str:
    return ",".join(str(value) for value in values)


class ResourceManagerClient:
    """Typed access to one (possibly HA) ResourceManager."""

    def __init__(
        self,
        addresses: str | Sequence[str],
        settings: HttpSettings = DEFAULT_HTTP_SETTINGS,
        *,
        transport: Transport | None = None,
    ) -> None:
        self._owns_transport = transport is None
        self._transport = transport or Transport(settings)
        self.endpoints = ResourceManagerEndpoints(addresses, self._transport)

    def close(self) -> None:
        if self._owns_transport:
            self._transport.close()

    def __enter__(self) -> ResourceManagerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ----------------------------------------------------------------- plumbing

    def _reply(
        self, method: str, path: str, params: Params | None = None, body: Body | None = None
    ) -> HttpReply:
        return self.endpoints.request(method, CLUSTER + path, params=params, body=body)

    def _get(self, path: str, parser: Parser[T], params: Params | None = None) -> T:
        reply = self._reply("GET", path, params)
        return parser(reply.json(), reply.url)

    # ----------------------------------------------------------------- cluster

    def cluster_info(self) -> ClusterInfo:
        """``/info``: cluster id, versions, and this RM's HA state."""
        return self._get("/info", parse.parse_cluster_info)

    def cluster_metrics(self) -> ClusterMetrics:
        """``/metrics``: cluster totals, app and node counts."""
        return self._get("/metrics", parse.parse_cluster_metrics)

    def scheduler(self) -> SchedulerStatus:
        """``/scheduler``: the running queue tree (Capacity or Fair) with usage."""
        return self._get("/scheduler", parse.parse_scheduler)

    # ----------------------------------------------------------------- apps

    def apps(
        self,
        *,
        states: Iterable[AppState | str] = (),
        queue: str | None = None,
        user: str | None = None,
        limit: int | None = None,
        started_after_ms: int | None = None,
        finished_after_ms: int | None = None,
        application_types: Iterable[str] = (),
    ) -> tuple[Application, ...]:
        """``/apps`` filtered on the server. YARN's ``queue`` filter only matches
        unfinished apps (ResourceManagerRest.md)."""
        params = _without_none(
            states=_joined(states) or None,
            queue=queue,
            user=user,
            limit=limit,
            startedTimeBegin=started_after_ms,
            finishedTimeBegin=finished_after_ms,
            applicationTypes=_joined(application_types) or None,
            deSelects="resourceRequests",
        )
        return self._get("/apps", parse.parse_apps, params)

    def app(self, app_id: str) -> Application:
        """``/apps/{id}``; ``YarnHTTPError`` 404 for an unknown id."""
        return self._get(f"/apps/{_segment(app_id)}", parse.parse_app)

    def app_attempts(self, app_id: str) -> tuple[AppAttempt, ...]:
        """``/apps/{id}/appattempts``."""
        return self._get(f"/apps/{_segment(app_id)}/appattempts", parse.parse_app_attempts)

    # ----------------------------------------------------------------- nodes

    def nodes(self, *, states: Iterable[NodeState | str] = ()) -> tuple[Node, ...]:
        """``/nodes``; YARN lists only usable nodes when no state is given."""
        params = _without_none(states=_joined(states) or None)
        return self._get("/nodes", parse.parse_nodes, params)

    def node(self, node_id: str) -> Node:
        """``/nodes/{host:port}``."""
        return self._get(f"/nodes/{_segment(node_id)}", parse.parse_node)

    def update_node_resource(
        self, node_id: str, resources: Resources, *, overcommit_timeout_ms: int = -1
    ) -> Resources:
        """Set the node's total resource as the scheduler sees it
        (``POST /nodes/{id}/resource``). ``overcommit_timeout_ms`` is how long running
        containers may exceed a lowered total before they are preempted; -1 never.

        Returns what the RM answers, which it reads *before* the update is applied
        (RMWebServices.updateNodeResource), so it may still be the old total: poll
        :meth:`node` to confirm.
        """
        payload = {
            "resource": {"memory": resources.memory_mb, "vCores": resources.vcores},
            "overCommitTimeout": overcommit_timeout_ms,
        }
        reply = self._reply("POST", f"/nodes/{_segment(node_id)}/resource", body=Body.json(payload))
        return parse.parse_node_resource(reply.json(), reply.url)

    # ----------------------------------------------------------------- scheduler-conf

    def scheduler_conf(self) -> ConfProperties:
        """``GET /scheduler-conf``: the mutable scheduler's properties as
        ``(name, value)`` pairs. 400 when the store is ``file`` (not mutable)."""
        return self._get("/scheduler-conf", parse.parse_scheduler_conf)

    def update_scheduler_conf(self, sched_conf_xml: str) -> str:
        """``PUT /scheduler-conf`` with a ``<sched-conf>`` body. Returns the RM's
        plain-text confirmation; a refused change raises ``YarnHTTPError`` (400) with
        the RM's reason, and the RM has already rolled it back."""
        reply = self._reply("PUT", "/scheduler-conf", body=Body.xml(sched_conf_xml))
        return " ".join(reply.text.split())

    def validate_scheduler_conf(self, sched_conf_xml: str) -> ConfProperties:
        """``POST /scheduler-conf/validate``: the configuration the change would
        produce, without applying it. ``YarnHTTPError`` (400) with the validator's
        reason when invalid; ``YarnNotSupported`` when this RM lacks the endpoint."""
        try:
            reply = self._reply("POST", "/scheduler-conf/validate", body=Body.xml(sched_conf_xml))
        except YarnHTTPError as error:
            if _endpoint_missing(error):
                raise YarnNotSupported(
                    error.method, error.url, error.status, "this RM has no validation endpoint"
                ) from error
            raise
        return parse.parse_scheduler_conf(reply.json(), reply.url)


def _endpoint_missing(error: YarnHTTPError) -> bool:
    """404/405, or the 503 the RM really sends for a method a path does not take:
    its GenericExceptionHandler maps every unlisted exception, Jersey's 405
    WebApplicationException included, to SERVICE_UNAVAILABLE without a message."""
    if error.status in (404, 405):
        return True
    return error.status == 503 and error.message.startswith("WebApplicationException")


def _without_none(**params: str | int | None) -> dict[str, str | int]:
    return {key: value for key, value in params.items() if value is not None}
