"""Which queue a job goes to: priority ranges mapped to leaf queue names.

AdaptiveConfig §4.3 submits best-effort jobs (priorities 2-8) to priority queues:
with two queues, priorities 2-5 and 6-8; with four queues, 2-3, 4-5, 6-7 and 8.
Facebook jobs have no priority in the trace, so the paper draws one uniformly from
2..8 (§4.2); :func:`random_priorities` does the same with a seed.

Queue names are short leaf names (``q1``, ``q2`` ...), not paths: the simulator and
the scheduler configs address leaf queues by name (leaf names are unique in both
YARN schedulers), and ``root.`` is implied. :func:`leaf_queue_name` turns a path
from a trace or from JobHistory into that form.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from yarn_adapt.errors import InputError
from yarn_adapt.model.workload import JobSpec, Workload

BEST_EFFORT_PRIORITIES = range(2, 9)


@dataclass(frozen=True)
class PriorityRange:
    """Priorities ``low..high`` (inclusive) go to ``queue``."""

    low: int
    high: int
    queue: str

    def __contains__(self, priority: object) -> bool:
        return isinstance(priority, int) and self.low <= priority <= self.high


@dataclass(frozen=True)
class QueueMapping:
    """An ordered list of priority ranges; the first range holding a priority wins."""

    ranges: tuple[PriorityRange, ...]

    def __post_init__(self) -> None:
        if not self.ranges:
            raise InputError("a queue mapping needs at least one priority range")
        for bad in (r for r in self.ranges if r.low > r.high or not r.queue):
            raise InputError(f"bad priority range {bad.low}-{bad.high}:{bad.queue!r}")

    def queue_for(self, priority: int) -> str:
        """The queue of a job with this priority."""
        for priority_range in self.ranges:
            if priority in priority_range:
                return priority_range.queue
        raise InputError(f"priority {priority} is in no range of the queue mapping {self}")

    @property
    def queues(self) -> tuple[str, ...]:
        """Queue names in first-mentioned order, without repeats."""
        return tuple(dict.fromkeys(r.queue for r in self.ranges))

    def __str__(self) -> str:
        return ",".join(f"{r.low}-{r.high}:{r.queue}" for r in self.ranges)

    @classmethod
    def parse(cls, text: str) -> QueueMapping:
        """``"2-5:q1,6-8:q2"`` (a single priority may be written ``"8:q4"``)."""
        return cls(tuple(_parse_range(item) for item in text.split(",") if item.strip()))

    @classmethod
    def single(cls, queue: str = "default") -> QueueMapping:
        """Every priority (0-11 in the Google trace; anything else too) to one queue."""
        return cls((PriorityRange(-(2**31), 2**31 - 1, queue),))

    @classmethod
    def paper_two_queues(cls) -> QueueMapping:
        """AdaptiveConfig §4.3, two priority queues: 2-5 -> q1, 6-8 -> q2."""
        return cls((PriorityRange(2, 5, "q1"), PriorityRange(6, 8, "q2")))

    @classmethod
    def paper_four_queues(cls) -> QueueMapping:
        """AdaptiveConfig §4.3, four priority queues: 2-3, 4-5, 6-7, 8 -> q1..q4."""
        bounds = ((2, 3), (4, 5), (6, 7), (8, 8))
        return cls(tuple(PriorityRange(lo, hi, f"q{i}") for i, (lo, hi) in enumerate(bounds, 1)))


def spread_over(
    leaves: Sequence[str], priorities: Sequence[int] = BEST_EFFORT_PRIORITIES
) -> QueueMapping:
    """Split ``priorities`` into contiguous ranges, one per leaf, the larger ranges
    first: two leaves give the paper's 2-5 / 6-8, four give 2-3 / 4-5 / 6-7 / 8."""
    if not leaves:
        raise InputError("no leaf queues to spread priorities over")
    ordered = sorted(priorities)
    base, extra = divmod(len(ordered), len(leaves))
    ranges, start = [], 0
    for index, leaf in enumerate(leaves):
        size = base + (1 if index < extra else 0)
        chunk = ordered[start : start + size] or ordered[-1:]
        ranges.append(PriorityRange(chunk[0], chunk[-1], leaf))
        start += size
    return QueueMapping(tuple(ranges))


def _parse_range(item: str) -> PriorityRange:
    problem = f"bad queue mapping item {item.strip()!r}: want LOW-HIGH:QUEUE"
    span, sep, queue = item.strip().partition(":")
    low, _, high = span.partition("-")
    if not sep:
        raise InputError(problem)
    try:
        return PriorityRange(int(low), int(high or low), queue.strip())
    except ValueError as exc:
        raise InputError(problem) from exc


def random_priorities(
    count: int, *, seed: int, allowed: Sequence[int] = BEST_EFFORT_PRIORITIES
) -> list[int]:
    """``count`` priorities drawn uniformly from ``allowed`` (the paper's 2..8)."""
    rng = np.random.default_rng(seed)
    return [int(p) for p in rng.choice(np.asarray(allowed), size=count)]


def leaf_queue_name(queue: str) -> str:
    """``root.a.b`` -> ``b``; a bare leaf name is returned unchanged."""
    return queue.rsplit(".", 1)[-1] if queue else "default"


def assign_queues(workload: Workload, mapping: QueueMapping) -> Workload:
    """A copy with every job's queue set from its priority by ``mapping``."""
    jobs = tuple(
        replace(job, queue=mapping.queue_for(job.features.priority)) for job in workload.jobs
    )
    return replace(workload, jobs=jobs)


def queue_counts(jobs: Iterable[JobSpec]) -> dict[str, int]:
    """Jobs per queue, queues in first-seen order."""
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.queue] = counts.get(job.queue, 0) + 1
    return counts
