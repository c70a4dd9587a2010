"""Small builders of the agent's frozen data, for table-driven tests."""

from __future__ import annotations

from preemption.model import Amount, BatchTask, Locality, QosSignal, ReclaimTarget

APP = "application_1700000000000_0001"


def cid(n: int) -> str:
    return f"container_1700000000000_0001_01_{n:06d}"


def task(
    n: int,
    started: float,
    *,
    baseline: tuple[int, int] = (1000, 1024),
    limit: tuple[int, int] | None = None,
    locality: Locality = Locality.UNKNOWN,
) -> BatchTask:
    return BatchTask(
        container_id=cid(n),
        application_id=APP,
        started_at_s=started,
        baseline=Amount(*baseline),
        limit=Amount(*(limit or baseline)),
        locality=locality,
    )


def target(
    cpu: int = 0,
    memory: int = 0,
    *,
    generation: int = 1,
    satisfied: bool | None = None,
    latency_ms: float | None = None,
    target_ms: float | None = None,
    expires_at: float | None = None,
) -> ReclaimTarget:
    return ReclaimTarget(
        reclaim=Amount(cpu, memory),
        generation=generation,
        qos=QosSignal(satisfied=satisfied, latency_ms=latency_ms, target_ms=target_ms),
        expires_at_s=expires_at,
    )
