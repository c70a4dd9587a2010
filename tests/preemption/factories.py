"""Small builders of the agent's frozen data, for table-driven tests, and the
NodeManager's recorded view of a node."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from preemption.model import Amount, BatchTask, Locality, QosSignal, ReclaimTarget
from preemption.yarnedge import parse_nm_containers

if TYPE_CHECKING:
    from preemption.nodemanager import NodeManagerView

APP = "application_1700000000000_0001"

# The isolation loop (batch weight, suppress, memory caps) switched off: for tests of
# Algorithm 2's own steps, whose quotas and weights they check to the value. With it
# on, a container's quota is the stricter of its squeeze and the suppress loop's
# share, which follows this shared host's load (tests/preemption/test_isolation*.py
# test the loop itself and its composition with the squeeze).
ISOLATION_OFF: dict[str, dict[str, object]] = {
    "priority": {"enabled": False},
    "suppress": {"enabled": False},
    "memory": {"enabled": False},
}
ISOLATION_OFF_TOML = "\n".join(
    f"[{table}]\nenabled = false\n" for table in ("priority", "suppress", "memory")
)


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


# ----------------------------------------------------------------- the NodeManager

RECORDED_NM = Path(__file__).resolve().parents[1] / "fixtures" / "preemption" / "nm-containers.json"


def nm_answer(container_ids: Iterable[str], state: str = "RUNNING") -> dict[str, object]:
    """The NodeManager's ``/ws/v1/node/containers`` answer as recorded from Hadoop 3.4.3
    (tests/fixtures/preemption), its task container renamed to each of ``container_ids``
    (1 vcore, 256 MB, as recorded)."""
    recorded = json.loads(RECORDED_NM.read_text())
    template = recorded["containers"]["container"][1]
    listed = [{**template, "id": cid, "state": state} for cid in container_ids]
    return {"containers": {"container": listed} if listed else None}


@dataclass
class ListedBy:
    """The NodeManager's view for tests about what the agent does with the containers it
    may act on: the process ``pid`` stands for the verified NodeManager (its
    verification is tested on its own, and against the real NM in test_agent_yarn.py)
    and the recorded answer lists ``container_ids`` as running."""

    pid: int
    container_ids: list[str] = field(default_factory=list)
    uid: int = 0

    def observe(self) -> NodeManagerView:
        from preemption.nodemanager import NodeManagerView, VerifiedNodeManager

        listed = parse_nm_containers(nm_answer(self.container_ids), "recorded")
        process = VerifiedNodeManager(self.pid, self.uid, start_ticks=0)
        return NodeManagerView(process, {c: n for c, n in listed.items() if n.state == "RUNNING"})
