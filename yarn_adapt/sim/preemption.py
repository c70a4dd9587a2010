"""Which running containers to take back for a claim, and when to kill them.

Both schedulers' policies end the same way here: the victims of a claim are task
containers (never an ApplicationMaster) of the claimed leaf's apps, the most
recently submitted app first and, within an app, the most recently started
containers first (ProportionalCapacityPreemptionPolicy's FifoCandidatesSelector
order; the Fair Scheduler also spares AMs). A container is first *marked*; if a
later round still selects it ``max_wait_before_kill_s`` after its marking, it is
killed and its task runs again from the start.
"""

from __future__ import annotations

from collections.abc import Iterable

from .state import Batch, Claim


def select_victims(claims: Iterable[Claim]) -> dict[int, tuple[Batch, int]]:
    """Batch id -> (batch, containers of it) covering each claim's memory."""
    selected: dict[int, tuple[Batch, int]] = {}
    for claim in claims:
        needed = claim.memory
        apps = sorted(claim.leaf.apps.values(), key=lambda a: a.index, reverse=True)
        for app in apps:
            if needed <= 0:
                break
            needed = _take_from(app.batches.values(), needed, selected)
    return selected


def _take_from(
    batches: Iterable[Batch], needed: int, selected: dict[int, tuple[Batch, int]]
) -> int:
    for batch in reversed(list(batches)):
        if needed <= 0:
            break
        if batch.is_am or batch.memory <= 0:
            continue
        count = min(batch.count, -(-needed // batch.memory))
        selected[batch.id] = (batch, count)
        needed -= count * batch.memory
    return needed


class PreemptionMarks:
    """When each marked container was marked, per batch (batch id -> times, oldest
    first): containers of a batch are alike, so a batch selected for ``k`` keeps its
    ``k`` oldest marks."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self._marked: dict[int, list[float]] = {}

    def due(self, selected: dict[int, tuple[Batch, int]], now: float) -> list[tuple[Batch, int]]:
        """Record this round's selection (marks of unselected containers lapse, as
        in ProportionalCapacityPreemptionPolicy); return how many containers of each
        batch have been marked for ``wait_s`` or longer."""
        marked: dict[int, list[float]] = {}
        kills = []
        for batch_id, (batch, count) in selected.items():
            times = self._marked.get(batch_id, [])[:count]
            times += [now] * (count - len(times))
            marked[batch_id] = times
            ripe = sum(1 for t in times if now - t >= self.wait_s)
            if ripe:
                kills.append((batch, ripe))
                marked[batch_id] = times[ripe:]
        self._marked = marked
        return kills

    def forget(self, batch_id: int) -> None:
        self._marked.pop(batch_id, None)
