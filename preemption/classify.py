"""Which containers are batch: container → application → kind (pure).

The agent only ever squeezes ``batch`` containers. An application is
latency-critical when its queue, one of its tags or its type is listed as such;
otherwise batch when listed as batch; otherwise ``unknown`` decides, and its
default is latency-critical: a container the agent cannot place is never squeezed.
Latency-critical rules win over batch rules. Application masters (the first
container of an attempt) are never squeezed unless asked: squeezing an AM slows
every task of its job and can fail the job.

Queues match by full path (``root.batch``) or leaf name (``batch``); types and tags
case-insensitively (YARN lower-cases tags).
"""

from __future__ import annotations

from dataclasses import dataclass

from preemption.model import ContainerRef, TaskKind


@dataclass(frozen=True)
class AppFacts:
    """What the RM says about an application."""

    queue: str
    application_type: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ClassifySettings:
    batch_queues: frozenset[str] = frozenset()
    latency_critical_queues: frozenset[str] = frozenset()
    batch_tags: frozenset[str] = frozenset()
    latency_critical_tags: frozenset[str] = frozenset()
    batch_types: frozenset[str] = frozenset({"mapreduce", "spark", "tez"})
    latency_critical_types: frozenset[str] = frozenset()
    unknown: TaskKind = TaskKind.LATENCY_CRITICAL
    squeeze_application_masters: bool = False


def classify(ref: ContainerRef, app: AppFacts | None, settings: ClassifySettings) -> TaskKind:
    if ref.is_application_master and not settings.squeeze_application_masters:
        return TaskKind.APPLICATION_MASTER
    if app is None:
        return settings.unknown
    if _matches(app, settings.latency_critical_queues, settings.latency_critical_tags,
                settings.latency_critical_types):  # fmt: skip
        return TaskKind.LATENCY_CRITICAL
    if _matches(app, settings.batch_queues, settings.batch_tags, settings.batch_types):
        return TaskKind.BATCH
    return settings.unknown


def _matches(
    app: AppFacts, queues: frozenset[str], tags: frozenset[str], types: frozenset[str]
) -> bool:
    leaf = app.queue.rsplit(".", 1)[-1]
    if app.queue in queues or leaf in queues:
        return True
    if any(tag.lower() in tags for tag in app.tags):
        return True
    return app.application_type.lower() in types
