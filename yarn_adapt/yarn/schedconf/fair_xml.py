"""fair-scheduler.xml (allocation file) <-> :class:`FairSchedulerConfig`.

Reading follows the Fair Scheduler's own parsers (Hadoop 3.4
``AllocationFileParser``, ``AllocationFileQueueParser``, ``QueuePlacementPolicy``):
``<queue>`` and its old synonym ``<pool>`` nest, ``type="parent"`` declares a parent
without children, a top-level ``<queue name="root">`` makes the root explicit (and
then must be the only top-level queue), ``schedulingMode`` is the old name of
``schedulingPolicy``, the last of repeated elements wins. Simple elements the model
does not know become ``other_elements`` / ``defaults``; complex unknown elements and
unknown attributes stay in the document and survive every rewrite.

Writing patches the document it was read from: an element changes only when the
model's value changed meaning, new queues go after their siblings, and an implicit
root stays implicit unless the new model gives root settings of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from yarn_adapt.model.fair import (
    FairQueue,
    FairResources,
    FairSchedulerConfig,
    FairUser,
    PlacementRule,
    parse_fair_resources,
)
from yarn_adapt.yarn.schedconf import xmlio
from yarn_adapt.yarn.schedconf.capacity_xml import format_number
from yarn_adapt.yarn.schedconf.xmlio import Element, RawDocument

ROOT = "root"
QUEUE_TAGS = frozenset({"queue", "pool"})
WEIGHT = "weight"
SCHEDULING_POLICY = "schedulingPolicy"
SCHEDULING_MODE = "schedulingMode"
MIN_RESOURCES = "minResources"
MAX_RESOURCES = "maxResources"
MAX_RUNNING_APPS = "maxRunningApps"
MAX_AM_SHARE = "maxAMShare"
QUEUE_TYPED_TAGS = frozenset(
    {WEIGHT, SCHEDULING_POLICY, SCHEDULING_MODE, MIN_RESOURCES, MAX_RESOURCES}
    | {MAX_RUNNING_APPS, MAX_AM_SHARE}
)
USER = "user"
PLACEMENT_POLICY = "queuePlacementPolicy"
RULE = "rule"
TOP_LEVEL_STRUCTURE = QUEUE_TAGS | {USER, PLACEMENT_POLICY}

T = TypeVar("T")


# --------------------------------------------------------------------------- values


def parse_java_int(text: str) -> int:
    """Integer.parseInt of the trimmed text (no underscores, optional sign)."""
    cleaned = text.strip()
    if not cleaned.lstrip("+-").isdigit() or not cleaned.isascii():
        raise ValueError(f"not an integer: {text!r}")
    return int(cleaned)


def parse_java_double(text: str) -> float:
    """Double.parseDouble / Float.parseFloat of the trimmed text."""
    cleaned = text.strip()
    if cleaned[-1:] in ("f", "F", "d", "D") and not cleaned.lower().endswith("inf"):
        cleaned = cleaned[:-1]
    try:
        if "_" in cleaned:
            raise ValueError
        return float(cleaned)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None


def parse_resources(text: str) -> FairResources:
    """A min/max resources value as FairSchedulerConfiguration reads it (trimmed)."""
    if not text.strip():
        raise ValueError("the resource string is empty")
    return parse_fair_resources(text.strip())


def has_own_settings(queue: FairQueue) -> bool:
    """True when the queue carries settings (not just children)."""
    fields = (queue.weight, queue.scheduling_policy, queue.min_resources, queue.max_resources)
    extra = (queue.max_running_apps, queue.max_am_share)
    return any(v is not None for v in fields + extra) or bool(queue.other_elements)


# --------------------------------------------------------------------------- reading


def parse_fair_document(document: RawDocument) -> FairSchedulerConfig:
    """The model of an allocation file. ConfigFileError (file, line, queue, element)
    for a wrong root element, a broken queue structure or a value that does not parse."""
    _check_root(document)
    top = list(xmlio.child_elements(document.root))
    queue_elements = [e for e in top if xmlio.local_name(e) in QUEUE_TAGS]
    return FairSchedulerConfig(
        root=_parse_root(document, queue_elements),
        defaults=tuple(
            (xmlio.local_name(e), xmlio.text_of(e))
            for e in top
            if xmlio.local_name(e) not in TOP_LEVEL_STRUCTURE and xmlio.is_simple(e)
        ),
        users=tuple(_parse_user(document, e) for e in top if xmlio.local_name(e) == USER),
        placement_rules=_parse_placement(
            [e for e in top if xmlio.local_name(e) == PLACEMENT_POLICY]
        ),
    )


def _check_root(document: RawDocument) -> None:
    name = document.root_name
    if name == "allocations":
        return
    hint = (
        " (a capacity-scheduler.xml or another Hadoop *-site.xml)"
        if name == "configuration"
        else ""
    )
    raise document.error(
        f"root element is <{name}>{hint}, expected <allocations> of a fair-scheduler.xml",
        document.root,
    )


def is_explicit_root(element: Element) -> bool:
    return (element.get("name") or "").strip().lower() == ROOT


def _parse_root(document: RawDocument, queue_elements: list[Element]) -> FairQueue:
    explicit = [e for e in queue_elements if is_explicit_root(e)]
    if explicit and len(queue_elements) > 1:
        # AllocationFileQueueParser.parse
        raise document.error(
            "if configuring the root queue, no other queues can be placed alongside it",
            explicit[0],
        )
    if explicit:
        return _parse_queue(document, explicit[0], ROOT)
    children = _parse_children(document, ROOT, queue_elements)
    return FairQueue(ROOT, children=children)


def _queue_name(document: RawDocument, element: Element, parent: str) -> str:
    name = (element.get("name") or "").strip()
    if not name:
        raise document.error(f"a queue under {parent} has an empty name", element)
    if "." in name:
        raise document.error(f"queue name {name!r} under {parent} contains '.'", element)
    return name


def _parse_children(
    document: RawDocument, parent: str, elements: list[Element]
) -> tuple[FairQueue, ...]:
    children: list[FairQueue] = []
    for element in elements:
        path = f"{parent}.{_queue_name(document, element, parent)}"
        if any(child.path == path for child in children):
            raise document.error(f"queue {path} is defined twice", element)
        children.append(_parse_queue(document, element, path))
    return tuple(children)


def _parse_queue(document: RawDocument, element: Element, path: str) -> FairQueue:
    fields: dict[str, Element] = {}
    others: list[tuple[str, str]] = []
    nested: list[Element] = []
    for child in xmlio.child_elements(element):
        tag = xmlio.local_name(child)
        if tag in QUEUE_TAGS:
            nested.append(child)
        elif tag in QUEUE_TYPED_TAGS:
            fields[SCHEDULING_POLICY if tag == SCHEDULING_MODE else tag] = child
        elif xmlio.is_simple(child):
            others.append((tag, xmlio.text_of(child)))

    def typed(tag: str, parser: Callable[[str], T]) -> T | None:
        field = fields.get(tag)
        return None if field is None else _typed_text(document, path, field, parser)

    return FairQueue(
        path=path,
        weight=typed(WEIGHT, parse_java_double),
        scheduling_policy=typed(SCHEDULING_POLICY, str.strip),
        min_resources=typed(MIN_RESOURCES, parse_resources),
        max_resources=typed(MAX_RESOURCES, parse_resources),
        max_running_apps=typed(MAX_RUNNING_APPS, parse_java_int),
        max_am_share=typed(MAX_AM_SHARE, parse_java_double),
        declared_parent=element.get("type") == "parent",
        children=_parse_children(document, path, nested),
        other_elements=tuple(others),
    )


def _typed_text(
    document: RawDocument, where: str, element: Element, parser: Callable[[str], T]
) -> T:
    tag = xmlio.local_name(element)
    try:
        if not xmlio.is_simple(element) or not xmlio.text_of(element).strip():
            raise ValueError("empty or not plain text")
        return parser(xmlio.text_of(element))
    except ValueError as exc:
        raise document.error(f"queue {where} element <{tag}>: {exc}", element) from exc


def _parse_user(document: RawDocument, element: Element) -> FairUser:
    name = element.get("name") or ""
    max_apps: int | None = None
    others: list[tuple[str, str]] = []
    for child in xmlio.child_elements(element):
        tag = xmlio.local_name(child)
        if tag == MAX_RUNNING_APPS:
            max_apps = _typed_text(document, f"user {name}", child, parse_java_int)
        elif xmlio.is_simple(child):
            others.append((tag, xmlio.text_of(child)))
    return FairUser(name, max_apps, tuple(others))


def _parse_placement(elements: list[Element]) -> tuple[PlacementRule, ...] | None:
    if not elements:
        return None
    # AllocationFileParser keeps the last <queuePlacementPolicy>.
    return tuple(_parse_rule(e) for e in _rule_elements(elements[-1]))


def _rule_elements(element: Element) -> list[Element]:
    return [e for e in xmlio.child_elements(element) if xmlio.local_name(e).lower() == RULE]


def _parse_rule(element: Element) -> PlacementRule:
    nested = _rule_elements(element)
    return PlacementRule(
        name=element.get("name") or "",
        attributes=tuple((str(k), str(v)) for k, v in element.attrib.items() if k != "name"),
        # QueuePlacementPolicy.getParentRuleElement uses the last nested rule.
        parent_rule=_parse_rule(nested[-1]) if nested else None,
    )


# --------------------------------------------------------------------------- writing


def empty_fair_config() -> FairSchedulerConfig:
    return FairSchedulerConfig(FairQueue(ROOT))


def patch_fair_document(
    document: RawDocument, original: FairSchedulerConfig, new: FairSchedulerConfig
) -> None:
    """Edit ``document`` (read as ``original``) in place so that it reads as ``new``."""
    editor = _Editor(document)
    editor.sync_defaults(new.defaults)
    editor.sync_users(new.users)
    container = editor.root_container(new.root)
    editor.sync_queue(container, original.root, new.root)
    if new.placement_rules != original.placement_rules:
        editor.sync_placement(new.placement_rules)


@dataclass(frozen=True)
class _TypedField:
    tags: tuple[str, ...]
    old: object
    new: object
    text: str | None


def _queue_fields(old: FairQueue, new: FairQueue) -> list[_TypedField]:
    def number(value: float | None) -> str | None:
        return None if value is None else format_number(value)

    def resources(value: FairResources | None) -> str | None:
        return None if value is None else value.text

    def amount(value: FairResources | None) -> object:
        return (
            None
            if value is None
            else (value.memory_mb, value.vcores, value.memory_percent, value.vcores_percent)
        )

    return [
        _TypedField((WEIGHT,), old.weight, new.weight, number(new.weight)),
        _TypedField(
            (SCHEDULING_POLICY, SCHEDULING_MODE),
            old.scheduling_policy,
            new.scheduling_policy,
            new.scheduling_policy,
        ),
        _TypedField(
            (MIN_RESOURCES,),
            amount(old.min_resources),
            amount(new.min_resources),
            resources(new.min_resources),
        ),
        _TypedField(
            (MAX_RESOURCES,),
            amount(old.max_resources),
            amount(new.max_resources),
            resources(new.max_resources),
        ),
        _TypedField(
            (MAX_RUNNING_APPS,),
            old.max_running_apps,
            new.max_running_apps,
            None if new.max_running_apps is None else str(new.max_running_apps),
        ),
        _TypedField((MAX_AM_SHARE,), old.max_am_share, new.max_am_share, number(new.max_am_share)),
    ]


class _Editor:
    """The edit operations of one patch, sharing the document's indentation step."""

    def __init__(self, document: RawDocument) -> None:
        self.document = document
        self.allocations = document.root
        self.unit = xmlio.indent_unit(document)

    # ---- top level

    def _top(self, *tags: str) -> list[Element]:
        return [e for e in xmlio.child_elements(self.allocations) if xmlio.local_name(e) in tags]

    def _defaults(self) -> list[Element]:
        return [
            e
            for e in xmlio.child_elements(self.allocations)
            if xmlio.local_name(e) not in TOP_LEVEL_STRUCTURE and xmlio.is_simple(e)
        ]

    def _insert_top(self, new: Element, after: list[Element]) -> None:
        if after:
            xmlio.insert_after(after[-1], new)
        else:
            xmlio.insert_first(self.allocations, new, self.unit)

    def sync_defaults(self, desired: Sequence[tuple[str, str]]) -> None:
        self._sync_simple(
            self.allocations,
            self._defaults(),
            desired,
            lambda new: self._insert_top(new, self._defaults()),
        )

    def sync_users(self, desired: Sequence[FairUser]) -> None:
        existing = self._top(USER)
        matched = _match_by_occurrence(
            [(e.get("name") or "", e) for e in existing], [u.name for u in desired]
        )
        for element in existing:
            if all(element is not m for m in matched):
                xmlio.remove_element(element)
        placed = []
        for user, found in zip(desired, matched, strict=True):
            element = found if found is not None else self._new_user(user.name)
            self._sync_user(element, user)
            placed.append(element)
        xmlio.arrange(placed)

    def _new_user(self, name: str) -> Element:
        element = xmlio.new_child_element(self.allocations, USER)
        element.set("name", name)
        self._insert_top(element, self._top(USER) or self._defaults())
        return element

    def _sync_user(self, element: Element, user: FairUser) -> None:
        current = [
            c for c in xmlio.child_elements(element) if xmlio.local_name(c) == MAX_RUNNING_APPS
        ]
        if self._current_int(current) != user.max_running_apps:
            text = None if user.max_running_apps is None else str(user.max_running_apps)
            self._set_field(element, current, MAX_RUNNING_APPS, text)
        others = [
            c
            for c in xmlio.child_elements(element)
            if xmlio.local_name(c) != MAX_RUNNING_APPS and xmlio.is_simple(c)
        ]
        self._sync_simple(
            element, others, user.other_elements, lambda new: self._insert_property(element, new)
        )

    @staticmethod
    def _current_int(elements: list[Element]) -> int | None:
        try:
            return parse_java_int(xmlio.text_of(elements[-1])) if elements else None
        except ValueError:
            return None

    def sync_placement(self, rules: tuple[PlacementRule, ...] | None) -> None:
        existing = self._top(PLACEMENT_POLICY)
        for element in existing[:-1] if rules is not None else existing:
            xmlio.remove_element(element)
        if rules is None:
            return
        policy = xmlio.new_child_element(self.allocations, PLACEMENT_POLICY)
        if existing:
            policy.tail = existing[-1].tail
            self.allocations.replace(existing[-1], policy)
        else:
            xmlio.append_child(self.allocations, policy, self.unit)
        for rule in rules:
            self._append_rule(policy, rule)

    def _append_rule(self, parent: Element, rule: PlacementRule) -> None:
        element = xmlio.new_child_element(parent, RULE)
        element.set("name", rule.name)
        for key, value in rule.attributes:
            element.set(key, value)
        xmlio.append_child(parent, element, self.unit)
        if rule.parent_rule is not None:
            self._append_rule(element, rule.parent_rule)

    # ---- queues

    def root_container(self, new_root: FairQueue) -> Element:
        """The element whose children are root's queues: the explicit root queue, or
        <allocations> while the root stays implicit."""
        explicit = [e for e in self._top(*QUEUE_TAGS) if is_explicit_root(e)]
        if explicit:
            return explicit[0]
        if not (has_own_settings(new_root) or new_root.declared_parent):
            return self.allocations
        return self._make_root_explicit()

    def _make_root_explicit(self) -> Element:
        queues = self._top(*QUEUE_TAGS)
        root = xmlio.new_child_element(self.allocations, "queue")
        root.set("name", ROOT)
        if queues:
            xmlio.insert_before(queues[0], root)
        else:
            self._insert_top(root, self._top(USER) or self._defaults())
        for queue in queues:
            xmlio.remove_element(queue)
            xmlio.reindent(queue, self.unit)
            xmlio.append_child(root, queue, self.unit)
        return root

    def sync_queue(self, element: Element, old: FairQueue | None, new: FairQueue) -> None:
        old = old if old is not None else FairQueue(new.path)
        if element is not self.allocations:
            self._sync_queue_settings(element, old, new)
        self._sync_children(element, old, new)

    def _sync_queue_settings(self, element: Element, old: FairQueue, new: FairQueue) -> None:
        if old.declared_parent != new.declared_parent:
            if new.declared_parent:
                element.set("type", "parent")
            elif element.get("type") is not None:
                del element.attrib["type"]
        for field in _queue_fields(old, new):
            if field.old != field.new:
                current = [
                    c for c in xmlio.child_elements(element) if xmlio.local_name(c) in field.tags
                ]
                self._set_field(element, current, field.tags[0], field.text)
        others = [
            c
            for c in xmlio.child_elements(element)
            if xmlio.local_name(c) not in QUEUE_TYPED_TAGS | QUEUE_TAGS and xmlio.is_simple(c)
        ]
        self._sync_simple(
            element, others, new.other_elements, lambda added: self._insert_property(element, added)
        )

    def _sync_children(self, element: Element, old: FairQueue, new: FairQueue) -> None:
        existing = {
            f"{new.path}.{(e.get('name') or '').strip()}": e
            for e in xmlio.child_elements(element)
            if xmlio.local_name(e) in QUEUE_TAGS and not is_explicit_root(e)
        }
        wanted = {child.path for child in new.children}
        for path, child_element in existing.items():
            if path not in wanted:
                xmlio.remove_element(child_element)
        for child in new.children:
            found = existing.get(child.path)
            child_element = found if found is not None else self._new_queue(element, child)
            self.sync_queue(child_element, old.child(child.name), child)
        self._order_children(element, [child.name for child in new.children])

    def _new_queue(self, parent: Element, queue: FairQueue) -> Element:
        element = xmlio.new_child_element(parent, "queue")
        element.set("name", queue.name)
        siblings = [e for e in xmlio.child_elements(parent) if xmlio.local_name(e) in QUEUE_TAGS]
        if siblings:
            xmlio.insert_after(siblings[-1], element)
        elif parent is self.allocations:
            self._insert_top(element, self._top(USER) or self._defaults())
        else:
            xmlio.append_child(parent, element, self.unit)
        return element

    def _order_children(self, parent: Element, names: list[str]) -> None:
        by_name = {
            (e.get("name") or "").strip(): e
            for e in xmlio.child_elements(parent)
            if xmlio.local_name(e) in QUEUE_TAGS and not is_explicit_root(e)
        }
        xmlio.arrange([by_name[name] for name in names])

    # ---- element level

    def _insert_property(self, queue_element: Element, new: Element) -> None:
        """Settings go after the queue's last non-queue child, before child queues."""
        settings = [
            c for c in xmlio.child_elements(queue_element) if xmlio.local_name(c) not in QUEUE_TAGS
        ]
        if settings:
            xmlio.insert_after(settings[-1], new)
        else:
            xmlio.insert_first(queue_element, new, self.unit)

    def _set_field(
        self, parent: Element, current: list[Element], tag: str, text: str | None
    ) -> None:
        if text is None:
            for element in current:
                xmlio.remove_element(element)
            return
        if current:
            target = current[-1]
            for child in list(target):
                target.remove(child)
        else:
            target = xmlio.new_child_element(parent, tag)
            self._insert_property(parent, target)
        target.text = text

    def _sync_simple(
        self,
        parent: Element,
        existing: list[Element],
        desired: Sequence[tuple[str, str]],
        insert: Callable[[Element], None],
    ) -> None:
        """Make the simple unknown children of ``parent`` equal ``desired`` (tag, text),
        matching repeated tags by their order of occurrence."""
        matched = _match_by_occurrence(
            [(xmlio.local_name(e), e) for e in existing], [tag for tag, _ in desired]
        )
        for element in existing:
            if all(element is not m for m in matched):
                xmlio.remove_element(element)
        placed = []
        for (tag, text), found in zip(desired, matched, strict=True):
            target = found if found is not None else xmlio.new_child_element(parent, tag)
            if found is None:
                insert(target)
            if xmlio.text_of(target) != text:
                target.text = text or None
            placed.append(target)
        xmlio.arrange(placed)


def _match_by_occurrence(
    existing: list[tuple[str, Element]], wanted: list[str]
) -> list[Element | None]:
    """For each wanted key, the existing element with the same key and occurrence
    number (the 2nd ``aclSubmitApps`` matches the 2nd one), or None."""
    pools: dict[str, list[Element]] = {}
    for key, element in existing:
        pools.setdefault(key, []).append(element)
    matched: list[Element | None] = []
    for key in wanted:
        pool = pools.get(key, [])
        matched.append(pool.pop(0) if pool else None)
    return matched
