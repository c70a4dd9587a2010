"""The alternative actuator, for RMs where ``POST /nodes/{id}/resource`` is not
allowed: cap the batch queue's ``maximum-capacity`` at the share of the cluster the
plan lets batch see, through the configurator's own scheduler appliers (the file +
``refreshQueues``, or the scheduler-conf API) -- validated, journalled, verified and
rolled back as every apply is.

It is coarse by nature: a queue cap limits how much batch runs, not where, so a
risky node is not emptied in favour of a safe one, and the per-node safety steps of
the decision do not carry over (the cap follows each round's plan, within the
dead-band). The cap never goes below the queue's guaranteed capacity (YARN refuses a
maximum under the capacity). The queue's original maximum is journalled before the
first change (``<state dir>/guard/queue-cap.json``) and put back on stop, when the
guard is switched off, and by ``yarn-adapt recover``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from yarn_adapt.colocation.actuate import ActOutcome, Result
from yarn_adapt.colocation.follow import JournalChange
from yarn_adapt.colocation.model import GuardPlan
from yarn_adapt.colocation.originals import GuardStateDamaged, NodeOriginal
from yarn_adapt.errors import ApplyError, SettingsError, YarnError
from yarn_adapt.model import CapacitySchedulerConfig, Node, Percentage, SchedulerConfig
from yarn_adapt.model.capacity import Capacity, CapacityQueue, parse_capacity
from yarn_adapt.yarn.apply import Applier, ApplyResult
from yarn_adapt.yarn.confxml import SchedulerDocument

QUEUE_KEY = "queue"


class QueueCap:
    def __init__(
        self,
        running: Callable[[], SchedulerDocument],
        applier: Callable[[], Applier[SchedulerConfig]],
        queue: str,
        state_dir: Path,
        *,
        via: str,
        dead_band_percent: float = 5.0,
    ) -> None:
        self.running = running
        self.applier = applier
        self.queue = queue
        self.via = via  # "mutation", or the scheduler file's path (for recover)
        self.path = state_dir / "guard" / "queue-cap.json"
        self.dead_band_percent = dead_band_percent

    def journalled(self) -> dict[str, NodeOriginal]:
        return {}  # node totals are never changed here

    def follow(self, nodes: Sequence[Node]) -> list[JournalChange]:
        return []  # the cap follows each round's plan; no node's total is journalled

    def pending_nodes(self) -> list[str]:
        return [f"{QUEUE_KEY} {self.queue}"] if self._original() is not None else []

    # ------------------------------------------------------------------ acting

    def act(self, plan: GuardPlan) -> dict[str, ActOutcome]:
        wanted = visible_percent(plan)
        if wanted is None:
            return {}
        config, queue = self._queue()
        floor = _percent(queue.capacity) or 0.0
        cap = min(100.0, max(floor, math.floor(wanted * 10) / 10))
        now = _percent(queue.maximum_capacity)
        now = 100.0 if now is None else now
        if abs(cap - now) <= self.dead_band_percent and not (cap == 100.0 and now != 100.0):
            return {}
        if self._original() is None:
            self._journal(queue.maximum_capacity)
        outcome = self._apply(config, queue, Percentage(cap), f"capped at {cap:g} %")
        return {d.node_id: outcome for d in plan.decisions if d.changes}

    def restore_all(self) -> list[ActOutcome]:
        original = self._original()
        if original is None:
            return []
        config, queue = self._queue()
        value = None if original == "" else parse_capacity(original)
        outcome = self._apply(
            config, queue, value, f"maximum-capacity back to {original or 'unset'}"
        )
        if outcome.ok:
            self.path.unlink(missing_ok=True)
        return [outcome]

    def _apply(
        self, config: CapacitySchedulerConfig, queue: CapacityQueue, value: Capacity | None,
        what: str,
    ) -> ActOutcome:  # fmt: skip
        desired = config.with_queue(replace(queue, maximum_capacity=value))
        try:
            outcome = self.applier().apply(desired)
        except (ApplyError, YarnError) as exc:
            return ActOutcome(f"{QUEUE_KEY} {self.queue}", Result.REFUSED, exc.one_line())
        result = Result.UNCHANGED if outcome.result is ApplyResult.ALREADY_APPLIED else Result.DONE
        return ActOutcome(f"{QUEUE_KEY} {self.queue}", result, f"{self.queue} {what}")

    def _queue(self) -> tuple[CapacitySchedulerConfig, CapacityQueue]:
        config = self.running().config
        if not isinstance(config, CapacitySchedulerConfig):
            raise SettingsError("[colocation] actuator = queue-cap needs the Capacity Scheduler")
        queue = config.find(self.queue)
        if queue is None:
            raise SettingsError(f"[colocation] batch_queue {self.queue!r}: no such queue")
        return config, queue

    # ------------------------------------------------------------------ journal

    def _original(self) -> str | None:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise GuardStateDamaged(f"{self.path}: damaged ({exc})") from exc
        return str(document["original"])

    def _journal(self, original: Capacity | None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.partial")
        value = "" if original is None else str(original)
        with partial.open("w", encoding="utf-8") as stream:
            json.dump({"queue": self.queue, "original": value, "via": self.via}, stream)
            stream.flush()
            os.fsync(stream.fileno())
        partial.replace(self.path)


def visible_percent(plan: GuardPlan) -> float | None:
    """The share (percent) of the running nodes' capacity the plan lets batch see: the
    smaller of the memory and vcore shares."""
    running = [d for d in plan.decisions if d.action.value != "skip"]
    capacity_mb = sum(d.capacity.memory_mb for d in running)
    capacity_vcores = sum(d.capacity.vcores for d in running)
    if not running or capacity_mb <= 0 or capacity_vcores <= 0:
        return None
    memory = sum(d.target.memory_mb for d in running) / capacity_mb
    vcores = sum(d.target.vcores for d in running) / capacity_vcores
    return 100.0 * min(memory, vcores)


def _percent(value: Capacity | None) -> float | None:
    return value.percent if isinstance(value, Percentage) else None


def journalled_queue_cap(state_dir: Path) -> tuple[str, str] | None:
    """(queue, via) of a queue cap the guard left in place, for ``yarn-adapt recover``."""
    path = state_dir / "guard" / "queue-cap.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return str(document["queue"]), str(document["via"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:
        raise GuardStateDamaged(f"{path}: damaged ({exc})") from exc
