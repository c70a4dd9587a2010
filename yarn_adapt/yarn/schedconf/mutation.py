"""The smallest ``<sched-conf>`` body that turns one Capacity Scheduler configuration
into another through ``PUT /ws/v1/cluster/scheduler-conf``.

The RM applies a body in a fixed order (Hadoop 3.4
``scheduler.capacity.conf.ConfigurationUpdateAssembler``): every ``remove-queue``
(which also rewrites the parent's ``queues`` and, when it empties, unsets the parent's
``ordering-policy``, and drops every key matching ``.*<path>\\..*``), then every
``add-queue`` (appending to the parent's ``queues``; the first child unsets the
parent's ``ordering-policy``), then every ``update-queue``, then ``global-updates``.
:func:`mutation_plan` replays that order on the flat property map of the old
configuration and adds updates for whatever still differs from the new one, so the
result is exact, reorderings and the assembler's side effects included.

Removing a queue: YARN refuses unless the queue is STOPPED in the running scheduler
or the new configuration says ``<path>.state=STOPPED``
(CapacitySchedulerConfigValidator.validateQueueHierarchy). :func:`mutation_body`
therefore sends ``state=STOPPED`` for each removed RUNNING queue in the same call;
that key outlives the queue as an orphan property (harmless, and the next plan
computed from the RM's configuration unsets it). A queue stopped this way is
removed even if applications still run in it; :func:`mutation_steps` splits the
change into "stop" and then "remove" bodies so an applier can wait for the queues
to drain in between.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from lxml import etree

from yarn_adapt.model.capacity import CapacityQueue, CapacitySchedulerConfig, QueueState
from yarn_adapt.yarn.schedconf.capacity_xml import (
    ORDERING_POLICY,
    QUEUES,
    STATE,
    CapacityProperty,
    capacity_properties,
    owner_of,
    parse_queue_list,
    queue_key,
    queue_properties,
    same_meaning,
)
from yarn_adapt.yarn.schedconf.validate_capacity import effective_state


@dataclass(frozen=True)
class QueueParams:
    """One add-queue or update-queue: keys relative to the queue; a None value
    removes the key."""

    queue: str
    params: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class MutationPlan:
    remove: tuple[str, ...] = ()
    add: tuple[QueueParams, ...] = ()
    update: tuple[QueueParams, ...] = ()
    global_updates: tuple[tuple[str, str | None], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (self.remove or self.add or self.update or self.global_updates)

    def to_xml(self) -> str:
        """The documented XML body (ResourceManagerRest.md, "Scheduler Configuration
        Mutation API")."""
        root = etree.Element("sched-conf")
        for path in self.remove:
            etree.SubElement(root, "remove-queue").text = path
        for queue in self.add:
            _queue_element(root, "add-queue", queue)
        for queue in self.update:
            _queue_element(root, "update-queue", queue)
        if self.global_updates:
            _entries(etree.SubElement(root, "global-updates"), self.global_updates)
        etree.indent(root, space="  ")
        return etree.tostring(root, encoding="unicode") + "\n"


def _queue_element(parent: etree._Element, tag: str, queue: QueueParams) -> None:
    element = etree.SubElement(parent, tag)
    etree.SubElement(element, "queue-name").text = queue.queue
    _entries(etree.SubElement(element, "params"), queue.params)


def _entries(parent: etree._Element, pairs: tuple[tuple[str, str | None], ...]) -> None:
    for key, value in pairs:
        entry = etree.SubElement(parent, "entry")
        etree.SubElement(entry, "key").text = key
        # No <value>: the map holds null, which the RM treats as "unset".
        if value is not None:
            etree.SubElement(entry, "value").text = value


def mutation_body(old: CapacitySchedulerConfig, new: CapacitySchedulerConfig) -> str:
    """One body taking the RM from ``old`` to ``new`` (empty ``<sched-conf/>`` when
    they mean the same)."""
    return mutation_plan(old, new).to_xml()


def mutation_steps(old: CapacitySchedulerConfig, new: CapacitySchedulerConfig) -> list[str]:
    """Bodies to PUT in order: first one that only stops the RUNNING queues about to
    be removed (wait until they are STOPPED, not DRAINING), then the change itself.
    A single body when nothing RUNNING is removed."""
    stopping = _running_removed(old, new)
    if not stopping:
        return [mutation_body(old, new)]
    stopped = old
    for path in stopping:
        queue = stopped.find(path)
        assert queue is not None
        stopped = stopped.with_queue(replace(queue, state=QueueState.STOPPED))
    first = mutation_plan(old, stopped, stop_removed=False)
    second = mutation_plan(stopped, new, stop_removed=False)
    return [first.to_xml(), second.to_xml()]


def mutation_plan(
    old: CapacitySchedulerConfig, new: CapacitySchedulerConfig, stop_removed: bool = True
) -> MutationPlan:
    """The structured plan behind :func:`mutation_body`."""
    conf = {p.name: p.value for p in capacity_properties(old)}
    removed = _top_removed(old, new)
    for path in removed:
        _simulate_remove(conf, path)
    added = [q for q in new.queues() if old.find(q.path) is None]
    add = tuple(_simulate_add(conf, queue) for queue in added)
    update, global_updates = _remaining_updates(conf, new)
    if stop_removed:
        update = _with_stops(update, _running_removed(old, new))
    return MutationPlan(tuple(removed), add, update, global_updates)


def _top_removed(old: CapacitySchedulerConfig, new: CapacitySchedulerConfig) -> list[str]:
    """Removed queues whose parent survives (removing a parent drops its subtree)."""
    return [
        q.path
        for q in old.queues()
        if new.find(q.path) is None and q.parent_path and new.find(q.parent_path) is not None
    ]


def _running_removed(old: CapacitySchedulerConfig, new: CapacitySchedulerConfig) -> list[str]:
    """Every removed queue (subtrees included) that is not STOPPED now."""
    return [
        q.path
        for q in old.queues()
        if new.find(q.path) is None and effective_state(old, q) is not QueueState.STOPPED
    ]


def _simulate_remove(conf: dict[str, str], path: str) -> None:
    parent, name = path.rsplit(".", 1)
    siblings = [s for s in parse_queue_list(conf.get(queue_key(parent, QUEUES), "")) if s != name]
    if siblings:
        conf[queue_key(parent, QUEUES)] = ",".join(siblings)
    else:
        conf.pop(queue_key(parent, QUEUES), None)
        conf.pop(queue_key(parent, ORDERING_POLICY), None)
    # Configuration.getValByRegex(".*" + queue + "\\..*"): the dots are not escaped.
    try:
        pattern = re.compile(".*" + path + "\\..*")
    except re.error:
        pattern = re.compile(".*" + re.escape(path) + "\\..*")
    for key in [k for k in conf if pattern.search(k)]:
        del conf[key]


def _simulate_add(conf: dict[str, str], queue: CapacityQueue) -> QueueParams:
    parent = queue.parent_path or ""
    siblings = [*parse_queue_list(conf.get(queue_key(parent, QUEUES), "")), queue.name]
    conf[queue_key(parent, QUEUES)] = ",".join(siblings)
    params: tuple[tuple[str, str | None], ...] = tuple(
        (p.suffix, p.value) for p in queue_properties(queue) if p.suffix != QUEUES
    )
    for suffix, value in params:
        conf[queue_key(queue.path, suffix)] = value or ""
    if len(siblings) == 1:
        conf.pop(queue_key(parent, ORDERING_POLICY), None)
    return QueueParams(queue.path, params)


def _remaining_updates(
    conf: dict[str, str], new: CapacitySchedulerConfig
) -> tuple[tuple[QueueParams, ...], tuple[tuple[str, str | None], ...]]:
    """update-queue and global-updates entries for what still differs."""
    desired = {p.name: p for p in capacity_properties(new)}
    paths = [q.path for q in new.queues()]
    per_queue: dict[str, list[tuple[str, str | None]]] = {}
    global_updates: list[tuple[str, str | None]] = []
    for name in [*desired, *(k for k in conf if k not in desired)]:
        current, wanted = conf.get(name), desired.get(name)
        if _unchanged(current, wanted):
            continue
        value = None if wanted is None else wanted.value
        owner = owner_of(name, paths)
        if owner is None:
            global_updates.append((name, value))
        else:
            per_queue.setdefault(owner[0], []).append((owner[1], value))
    update = tuple(QueueParams(path, tuple(per_queue[path])) for path in paths if path in per_queue)
    return update, tuple(global_updates)


def _unchanged(current: str | None, wanted: CapacityProperty | None) -> bool:
    if wanted is None or current is None:
        return wanted is None and current is None
    return same_meaning(wanted.suffix or None, current, wanted.value)


def _with_stops(update: tuple[QueueParams, ...], stopping: list[str]) -> tuple[QueueParams, ...]:
    """Add state=STOPPED for queues being removed (updates run after removals, so
    the key is there when the RM validates the new hierarchy)."""
    stops = tuple(QueueParams(path, ((STATE, QueueState.STOPPED.value),)) for path in stopping)
    return stops + update
