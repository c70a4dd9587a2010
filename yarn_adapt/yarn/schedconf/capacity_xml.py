"""capacity-scheduler.xml <-> :class:`CapacitySchedulerConfig`.

Reading follows Hadoop's ``Configuration`` parser (hadoop-common 3.4,
``Configuration.Parser``/``loadProperty``): a ``<property>`` is found by local name
anywhere in the document, its name and value may be child elements or attributes, the
name is trimmed and the value is not, a property without a value sets nothing, a
later property overrides an earlier one unless the earlier one is ``final``.

The queue tree comes from ``yarn.scheduler.capacity.<path>.queues`` starting at
``root``. A property ``yarn.scheduler.capacity.<path>.<suffix>`` belongs to the
deepest queue whose path prefixes it; a dotted suffix only when its first part is a
per-queue property family (``accessible-node-labels.x.capacity``), so the leftover
properties of a queue that is no longer in the tree stay global.

Writing patches the document it was read from: only values whose meaning changed are
rewritten (``50`` and ``50.0`` are the same capacity), new properties go beside
their queue's, properties of removed queues are deleted; every comment, description,
``final`` flag, unknown property and processing instruction stays where it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from lxml import etree

from yarn_adapt.model.capacity import (
    CAPACITY_PREFIX,
    Capacity,
    CapacityQueue,
    CapacitySchedulerConfig,
    Percentage,
    QueueState,
    parse_capacity,
)
from yarn_adapt.yarn.schedconf import xmlio
from yarn_adapt.yarn.schedconf.xmlio import Element, RawDocument

ROOT = "root"
QUEUES = "queues"
CAPACITY = "capacity"
MAXIMUM_CAPACITY = "maximum-capacity"
USER_LIMIT_FACTOR = "user-limit-factor"
MINIMUM_USER_LIMIT_PERCENT = "minimum-user-limit-percent"
ORDERING_POLICY = "ordering-policy"
STATE = "state"
MAXIMUM_AM_RESOURCE_PERCENT = "maximum-am-resource-percent"
TYPED_SUFFIXES = (
    CAPACITY,
    MAXIMUM_CAPACITY,
    USER_LIMIT_FACTOR,
    MINIMUM_USER_LIMIT_PERCENT,
    ORDERING_POLICY,
    STATE,
    MAXIMUM_AM_RESOURCE_PERCENT,
)
# Per-queue properties whose suffix contains dots (CapacitySchedulerConfiguration 3.4).
QUEUE_PROPERTY_FAMILIES = frozenset(
    {
        "accessible-node-labels",
        "ordering-policy",
        "user-settings",
        "leaf-queue-template",
        "auto-create-child-queue",
        "auto-queue-creation-v2",
        "intra-queue-preemption",
        "multi-node-sorting",
    }
)

T = TypeVar("T")


# --------------------------------------------------------------------------- keys


def queue_key(path: str, suffix: str) -> str:
    return f"{CAPACITY_PREFIX}{path}.{suffix}"


def owner_of(name: str, queue_paths: Iterable[str]) -> tuple[str, str] | None:
    """(queue path, suffix) of a per-queue property; None for a global one."""
    if not name.startswith(CAPACITY_PREFIX):
        return None
    rest = name[len(CAPACITY_PREFIX) :]
    owners = [p for p in queue_paths if rest.startswith(p + ".") and len(rest) > len(p) + 1]
    if not owners:
        return None
    path = max(owners, key=len)
    suffix = rest[len(path) + 1 :]
    if "." in suffix and suffix.split(".", 1)[0] not in QUEUE_PROPERTY_FAMILIES:
        return None
    return path, suffix


def ancestors(path: str) -> Iterator[str]:
    """Parent, grandparent, ... of a queue path, nearest first."""
    while "." in path:
        path = path.rsplit(".", 1)[0]
        yield path


# --------------------------------------------------------------------------- values


def format_number(value: float) -> str:
    """``50`` for 50.0, ``0.25`` for 0.25: what a person would write in the file."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def parse_float(text: str) -> float:
    """Java's Float.parseFloat as Configuration.getFloat uses it (trimmed, optional
    f/d suffix)."""
    cleaned = text.strip()
    if cleaned[-1:] in ("f", "F", "d", "D") and not cleaned.lower().endswith("inf"):
        cleaned = cleaned[:-1]
    if "_" in cleaned:
        raise ValueError(f"not a number: {text!r}")
    try:
        return float(cleaned)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None


def parse_queue_capacity(text: str) -> Capacity:
    """A ``capacity`` value. Unlike ``maximum-capacity``, -1 is not "100%" here but
    an illegal capacity (CapacitySchedulerConfiguration.getNonLabeledQueueCapacity),
    so it is kept as -1 for the validator to name."""
    stripped = text.strip()
    if stripped.startswith("[") and ("%" in stripped or "w" in stripped.replace("vcores", "")):
        raise ValueError(
            f"capacity vectors (Hadoop 3.4 non-legacy queue mode) are not supported: {text!r}"
        )
    try:
        if parse_float(stripped) == -1:
            return Percentage(-1.0)
    except ValueError:
        pass
    return parse_capacity(stripped)


def parse_state(text: str) -> QueueState:
    """CapacitySchedulerConfiguration.getConfiguredState upper-cases the value."""
    try:
        return QueueState(text.upper())
    except ValueError:
        raise ValueError(f"not a queue state (RUNNING or STOPPED): {text!r}") from None


def parse_queue_list(text: str) -> list[str]:
    """The child names of a ``queues`` value (comma separated, trimmed, empty skipped
    as Hadoop's StringUtils.getStrings does)."""
    return [name.strip() for name in text.split(",") if name.strip()]


_TYPED_PARSERS: dict[str, Callable[[str], object]] = {
    CAPACITY: parse_queue_capacity,
    MAXIMUM_CAPACITY: lambda text: parse_capacity(text.strip()),
    USER_LIMIT_FACTOR: parse_float,
    MINIMUM_USER_LIMIT_PERCENT: parse_float,
    MAXIMUM_AM_RESOURCE_PERCENT: parse_float,
    STATE: parse_state,
    ORDERING_POLICY: str.strip,
    QUEUES: parse_queue_list,
}


def same_meaning(suffix: str | None, old: str, new: str) -> bool:
    """True when two values of a property mean the same to YARN."""
    parser = _TYPED_PARSERS.get(suffix or "")
    if parser is None:
        return old == new
    try:
        return parser(old) == parser(new)
    except ValueError:
        return old == new


# --------------------------------------------------------------------------- model -> flat


@dataclass(frozen=True)
class CapacityProperty:
    """One property as the file spells it. ``queue`` is the owning queue path and
    ``suffix`` the key below it; both empty strings for a global property."""

    name: str
    value: str
    queue: str = ""
    suffix: str = ""

    @property
    def is_global(self) -> bool:
        return not self.queue


def typed_values(queue: CapacityQueue) -> list[tuple[str, str]]:
    """The model's typed fields of ``queue`` as (suffix, text), unset ones left out."""
    numbers = {
        USER_LIMIT_FACTOR: queue.user_limit_factor,
        MINIMUM_USER_LIMIT_PERCENT: queue.minimum_user_limit_percent,
        MAXIMUM_AM_RESOURCE_PERCENT: queue.maximum_am_resource_percent,
    }
    texts: dict[str, str | None] = {
        CAPACITY: None if queue.capacity is None else str(queue.capacity),
        MAXIMUM_CAPACITY: None if queue.maximum_capacity is None else str(queue.maximum_capacity),
        STATE: None if queue.state is None else queue.state.value,
        ORDERING_POLICY: queue.ordering_policy,
    }
    texts.update({k: None if v is None else format_number(v) for k, v in numbers.items()})
    return [(suffix, text) for suffix in TYPED_SUFFIXES if (text := texts[suffix]) is not None]


def queue_properties(queue: CapacityQueue) -> list[CapacityProperty]:
    """Every property the model holds for one queue: queues, typed, then others."""
    pairs: list[tuple[str, str]] = []
    if queue.children:
        pairs.append((QUEUES, ",".join(child.name for child in queue.children)))
    pairs += typed_values(queue)
    pairs += list(queue.other_properties)
    return [CapacityProperty(queue_key(queue.path, s), v, queue.path, s) for s, v in pairs]


def capacity_properties(config: CapacitySchedulerConfig) -> list[CapacityProperty]:
    """The whole configuration as the flat property list a file holds: globals in
    their order, then every queue parents-first."""
    flat = [CapacityProperty(name, value) for name, value in config.global_properties]
    for queue in config.queues():
        flat += queue_properties(queue)
    return flat


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True, eq=False)
class PropertyNode:
    """One ``<property>`` element as Hadoop's parser reads it."""

    element: Element
    name: str
    value: str | None
    final: bool


def property_nodes(document: RawDocument) -> list[PropertyNode]:
    nodes = []
    for element in document.root.iter():
        if xmlio.local_name(element) == "property":
            node = _read_property(element)
            if node is not None:
                nodes.append(node)
    return nodes


def _read_property(element: Element) -> PropertyNode | None:
    name = element.get("name")
    value = element.get("value")
    final = element.get("final") == "true"
    for child in xmlio.child_elements(element):
        text = "".join(str(part) for part in child.itertext())
        tag = xmlio.local_name(child)
        if tag == "name" and text:
            name = text.strip()
        elif tag == "value" and text:
            value = text
        elif tag == "final":
            final = text == "true"
    return PropertyNode(element, name, value, final) if name else None


def effective_nodes(nodes: Iterable[PropertyNode]) -> dict[str, PropertyNode]:
    """name -> the node whose value Hadoop uses, in document order of those nodes."""
    chosen: dict[str, PropertyNode] = {}
    finals: set[str] = set()
    for node in nodes:
        if node.value is not None and node.name not in finals:
            chosen.pop(node.name, None)
            chosen[node.name] = node
        if node.final:
            finals.add(node.name)
    return chosen


def parse_capacity_document(document: RawDocument) -> CapacitySchedulerConfig:
    """The model of a capacity-scheduler.xml. ConfigFileError (file, line, queue,
    property) for a wrong root element or a value that does not parse."""
    _check_root(document)
    effective = effective_nodes(property_nodes(document))
    children = _queue_tree(document, effective)
    per_queue: dict[str, list[tuple[str, PropertyNode]]] = {path: [] for path in children}
    global_properties: list[tuple[str, str]] = []
    for name, node in effective.items():
        owner = owner_of(name, children)
        if owner is None:
            global_properties.append((name, node.value or ""))
        else:
            per_queue[owner[0]].append((owner[1], node))
    root = _build_queue(document, ROOT, children, per_queue)
    return CapacitySchedulerConfig(root, tuple(global_properties))


def has_capacity_properties(document: RawDocument) -> bool:
    """True when some property is a yarn.scheduler.capacity.* one (tells a
    capacity-scheduler.xml from another Hadoop configuration file)."""
    return any(node.name.startswith(CAPACITY_PREFIX) for node in property_nodes(document))


def _check_root(document: RawDocument) -> None:
    name = document.root_name
    if name == "configuration":
        return
    hint = " (a fair-scheduler.xml)" if name == "allocations" else ""
    raise document.error(
        f"root element is <{name}>{hint}, expected <configuration> of a capacity-scheduler.xml",
        document.root,
    )


def _queue_tree(document: RawDocument, effective: dict[str, PropertyNode]) -> dict[str, list[str]]:
    """queue path -> child names, parents before children."""
    tree: dict[str, list[str]] = {}
    pending = [ROOT]
    while pending:
        path = pending.pop(0)
        node = effective.get(queue_key(path, QUEUES))
        names = parse_queue_list(node.value or "") if node is not None else []
        _check_child_names(document, path, names, node)
        tree[path] = names
        pending += [f"{path}.{name}" for name in names]
    return tree


def _check_child_names(
    document: RawDocument, path: str, names: list[str], node: PropertyNode | None
) -> None:
    element = node.element if node is not None else None
    for index, name in enumerate(names):
        if "." in name:
            raise document.error(
                f"queue {path} property {QUEUES}: queue name {name!r} contains '.'", element
            )
        if name in names[:index]:
            raise document.error(
                f"queue {path} property {QUEUES}: child {name!r} is listed twice", element
            )


def _build_queue(
    document: RawDocument,
    path: str,
    children: dict[str, list[str]],
    per_queue: dict[str, list[tuple[str, PropertyNode]]],
) -> CapacityQueue:
    properties = dict(per_queue[path])

    def typed(suffix: str, parser: Callable[[str], T]) -> T | None:
        node = properties.get(suffix)
        if node is None or node.value is None:
            return None
        try:
            return parser(node.value)
        except ValueError as exc:
            raise document.error(f"queue {path} property {suffix}: {exc}", node.element) from exc

    return CapacityQueue(
        path=path,
        capacity=typed(CAPACITY, parse_queue_capacity),
        maximum_capacity=typed(MAXIMUM_CAPACITY, lambda text: parse_capacity(text.strip())),
        user_limit_factor=typed(USER_LIMIT_FACTOR, parse_float),
        minimum_user_limit_percent=typed(MINIMUM_USER_LIMIT_PERCENT, parse_float),
        ordering_policy=typed(ORDERING_POLICY, str.strip),
        state=typed(STATE, parse_state),
        maximum_am_resource_percent=typed(MAXIMUM_AM_RESOURCE_PERCENT, parse_float),
        children=tuple(
            _build_queue(document, f"{path}.{name}", children, per_queue) for name in children[path]
        ),
        other_properties=tuple(
            (suffix, node.value or "")
            for suffix, node in per_queue[path]
            if suffix not in TYPED_SUFFIXES and suffix != QUEUES
        ),
    )


# --------------------------------------------------------------------------- writing


def empty_capacity_config() -> CapacitySchedulerConfig:
    return CapacitySchedulerConfig(CapacityQueue(ROOT))


def patch_capacity_document(
    document: RawDocument, original: CapacitySchedulerConfig, new: CapacitySchedulerConfig
) -> None:
    """Edit ``document`` (read as ``original``) in place so that it reads as ``new``."""
    desired = capacity_properties(new)
    new_paths = frozenset(queue.path for queue in new.queues())
    _remove_stale(document, original, {p.name for p in desired}, new_paths)
    _write_values(document, desired, new_paths)
    _keep_model_order(document, new)


def _remove_stale(
    document: RawDocument,
    original: CapacitySchedulerConfig,
    desired_names: set[str],
    new_paths: frozenset[str],
) -> None:
    nodes = property_nodes(document)
    effective = effective_nodes(nodes)
    old_paths = frozenset(queue.path for queue in original.queues())
    for node in nodes:
        if node.name in desired_names:
            continue
        owner = owner_of(node.name, old_paths)
        of_removed_queue = owner is not None and owner[0] not in new_paths
        if of_removed_queue or node.name in effective:
            xmlio.remove_element(node.element)


def _write_values(
    document: RawDocument, desired: list[CapacityProperty], new_paths: frozenset[str]
) -> None:
    nodes = property_nodes(document)
    effective = effective_nodes(nodes)
    any_node = {node.name: node for node in nodes}
    placed = [(node.element, _owner_path(node.name, new_paths)) for node in nodes]
    unit = xmlio.indent_unit(document)
    for prop in desired:
        node = effective.get(prop.name) or any_node.get(prop.name)
        if node is None:
            _insert_property(document, placed, prop, unit)
        elif node.value is None or not same_meaning(prop.suffix or None, node.value, prop.value):
            _set_value(node, prop.value)


def _keep_model_order(document: RawDocument, new: CapacitySchedulerConfig) -> None:
    """Global and unknown per-queue properties are read back in file order, so the
    file must list them in the model's order."""
    effective = effective_nodes(property_nodes(document))
    groups = [[name for name, _ in new.global_properties]]
    groups += [[queue_key(q.path, s) for s, _ in q.other_properties] for q in new.queues()]
    for names in groups:
        xmlio.arrange([effective[name].element for name in names if name in effective])


def _owner_path(name: str, paths: frozenset[str]) -> str:
    owner = owner_of(name, paths)
    return owner[0] if owner else ""


def _set_value(node: PropertyNode, value: str) -> None:
    element = node.element
    value_children = [c for c in xmlio.child_elements(element) if xmlio.local_name(c) == "value"]
    if not value_children and element.get("value") is not None:
        element.set("value", value)
        return
    if value_children:
        target = value_children[-1]
        for child in list(target):
            target.remove(child)
    else:
        target = xmlio.new_child_element(element, "value")
        names = [c for c in xmlio.child_elements(element) if xmlio.local_name(c) == "name"]
        if names:
            xmlio.insert_after(names[-1], target)
        else:
            element.append(target)
    target.text = value


def _insert_property(
    document: RawDocument,
    placed: list[tuple[Element, str]],
    prop: CapacityProperty,
    unit: str,
) -> None:
    anchor_index = _anchor_index(placed, prop.queue)
    container = document.root
    new = xmlio.new_child_element(container, "property")
    style = placed[anchor_index][0] if anchor_index is not None else _first(placed)
    if anchor_index is not None:
        xmlio.insert_after(placed[anchor_index][0], new)
        placed.insert(anchor_index + 1, (new, prop.queue))
    elif prop.is_global and placed:
        xmlio.insert_before(placed[0][0], new)
        placed.insert(0, (new, prop.queue))
    else:
        xmlio.append_child(container, new, unit)
        placed.append((new, prop.queue))
    _fill_property(new, prop, compact=style is not None and _is_compact(style), unit=unit)


def _first(placed: list[tuple[Element, str]]) -> Element | None:
    return placed[0][0] if placed else None


def _anchor_index(placed: list[tuple[Element, str]], queue: str) -> int | None:
    """Where a new property of ``queue`` goes: after the queue's last property, else
    after the last property of the nearest ancestor's subtree; globals after the last
    global."""
    scopes = [(queue, False)] + [(ancestor, True) for ancestor in ancestors(queue)]
    for scope, whole_subtree in scopes:
        found = [
            index
            for index, (_, owner) in enumerate(placed)
            if owner == scope or (whole_subtree and owner.startswith(scope + "."))
        ]
        if found:
            return found[-1]
    return None


def _is_compact(element: Element) -> bool:
    return len(element) > 0 and "\n" not in (element.text or "")


def _fill_property(element: Element, prop: CapacityProperty, compact: bool, unit: str) -> None:
    name = etree.SubElement(element, _sibling_tag(element, "name"))
    name.text = prop.name
    value = etree.SubElement(element, _sibling_tag(element, "value"))
    value.text = prop.value
    indent = xmlio.indent_of(element)
    if compact or indent is None:
        return
    element.text = "\n" + indent + unit
    name.tail = "\n" + indent + unit
    value.tail = "\n" + indent


def _sibling_tag(parent: Element, tag: str) -> str:
    namespace = etree.QName(parent).namespace
    return f"{{{namespace}}}{tag}" if namespace else tag
