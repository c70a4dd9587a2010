"""The Fair Scheduler's allocation file (fair-scheduler.xml) as a queue tree.

``None`` means "element absent"; ``effective_*`` accessors apply the Fair
Scheduler's defaults (weight 1, policy fair, maxAMShare 0.5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum

from yarn_adapt.model.queue_tree import QueueNode, QueueTree
from yarn_adapt.model.resources import Resources

DEFAULT_WEIGHT = 1.0
DEFAULT_MAX_AM_SHARE = 0.5


class SchedulingPolicy(StrEnum):
    FIFO = "fifo"
    FAIR = "fair"
    DRF = "drf"


@dataclass(frozen=True)
class FairResources:
    """A min/max resources value. Absolute (``memory-mb=1024, vcores=2`` or the old
    ``1024 mb, 2 vcores``) or relative (``50%`` or ``memory-mb=50%, vcores=25%``);
    ``text`` keeps what the file said so an untouched value is written back as is."""

    text: str
    memory_mb: int | None = None
    vcores: int | None = None
    memory_percent: float | None = None
    vcores_percent: float | None = None

    @classmethod
    def absolute(cls, resources: Resources) -> FairResources:
        return cls(
            f"memory-mb={resources.memory_mb}, vcores={resources.vcores}",
            memory_mb=resources.memory_mb,
            vcores=resources.vcores,
        )

    def resolve(self, cluster: Resources) -> Resources:
        """The amount this value stands for on a cluster of ``cluster`` resources."""
        memory = self.memory_mb
        if memory is None:
            memory = int(cluster.memory_mb * (self.memory_percent or 0.0) / 100)
        vcores = self.vcores
        if vcores is None:
            vcores = int(cluster.vcores * (self.vcores_percent or 0.0) / 100)
        return Resources(memory, vcores)

    def same_amount(self, other: FairResources) -> bool:
        return (self.memory_mb, self.vcores, self.memory_percent, self.vcores_percent) == (
            other.memory_mb,
            other.vcores,
            other.memory_percent,
            other.vcores_percent,
        )


_OLD_STYLE_PART = re.compile(r"-?[0-9]+(?:\.[0-9]*)?\s*[a-z]+\s*")
_OLD_STYLE_AMOUNT = re.compile(r"^(?P<amount>-?[0-9]+)(?:\.[0-9]*)?\s*(?P<unit>mb|vcores)")
_PERCENT_PAIR_PART = re.compile(
    r"^\s*(?P<percent>-?[0-9]+(?:\.[0-9]*)?)\s*%\s*(?P<name>memory|cpu)\s*$"
)
_SINGLE_PERCENT = re.compile(r"^\s*(?P<percent>[0-9.]+)\s*%\s*$")


def parse_fair_resources(text: str) -> FairResources:
    """Parse the resource formats FairSchedulerConfiguration.parseResourceConfigValue
    (Hadoop 3.4) accepts: ``memory-mb=X, vcores=Y`` (amounts or percentages),
    ``X%``, ``X% memory, Y% cpu`` and the old ``X mb, Y vcores`` (any order, comma or
    space separated). ``ValueError`` on anything else, and on negative amounts as
    YARN rejects them."""
    if "=" in text:
        return _parse_new_style(text)
    if "%" in text:
        return _parse_old_style_percentages(text)
    return _parse_old_style(text)


def _parse_old_style(text: str) -> FairResources:
    lowered = text.lower()
    parts = lowered.split(",")
    if len(parts) != 2:
        parts = _OLD_STYLE_PART.findall(lowered)
    amounts: dict[str, int] = {}
    for part in parts:
        match = _OLD_STYLE_AMOUNT.match(part.strip())
        if match:
            amounts.setdefault(match["unit"], int(match["amount"]))
    if len(parts) != 2 or set(amounts) != {"mb", "vcores"}:
        raise ValueError(f"resource value not understood: {text!r}")
    if amounts["mb"] < 0 or amounts["vcores"] < 0:
        raise ValueError(f"resource amounts must not be negative: {text!r}")
    return FairResources(text, amounts["mb"], amounts["vcores"])


def _parse_old_style_percentages(text: str) -> FairResources:
    single = _SINGLE_PERCENT.match(text)
    if single:
        percent = float(single["percent"])
        return FairResources(text, memory_percent=percent, vcores_percent=percent)
    found: dict[str, float] = {}
    for part in text.lower().split(","):
        match = _PERCENT_PAIR_PART.match(part)
        if match:
            found.setdefault(match["name"], float(match["percent"]))
    if set(found) != {"memory", "cpu"} or min(found.values()) < 0:
        raise ValueError(f"percentage resource value not understood: {text!r}")
    return FairResources(text, memory_percent=found["memory"], vcores_percent=found["cpu"])


def _parse_new_style(text: str) -> FairResources:
    values: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"resource value not understood: {text!r}")
        values[name.strip().lower()] = raw.strip()
    memory = values.pop("memory-mb", values.pop("memory", None))
    vcores = values.pop("vcores", None)
    if memory is None or vcores is None:
        raise ValueError(f"resource value needs memory-mb and vcores: {text!r}")
    result = FairResources(text)
    result = _with_amount(result, "memory", memory)
    return _with_amount(result, "vcores", vcores)


def _with_amount(result: FairResources, dimension: str, raw: str) -> FairResources:
    if raw.endswith("%"):
        percent = float(raw[:-1])
        if dimension == "memory":
            return replace(result, memory_percent=percent)
        return replace(result, vcores_percent=percent)
    amount = int(float(raw.lower().removesuffix("mb").strip()))
    if amount < 0:
        raise ValueError(f"resource amounts must not be negative: {raw!r}")
    if dimension == "memory":
        return replace(result, memory_mb=amount)
    return replace(result, vcores=amount)


@dataclass(frozen=True)
class FairQueue(QueueNode):
    """One queue of the allocation file. ``path`` is the full name (``root.eng``).
    ``other_elements`` keeps simple child elements the model does not know
    (tag, text), in file order; complex unknown elements are kept by the XML layer."""

    path: str
    weight: float | None = None
    scheduling_policy: str | None = None
    min_resources: FairResources | None = None
    max_resources: FairResources | None = None
    max_running_apps: int | None = None
    max_am_share: float | None = None
    declared_parent: bool = False
    children: tuple[FairQueue, ...] = ()
    other_elements: tuple[tuple[str, str], ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children and not self.declared_parent

    @property
    def effective_weight(self) -> float:
        return DEFAULT_WEIGHT if self.weight is None else self.weight


@dataclass(frozen=True)
class FairUser:
    """A top-level ``<user name="...">`` element: per-user limits. ``other_elements``
    keeps simple child elements other than ``maxRunningApps``, in file order."""

    name: str
    max_running_apps: int | None = None
    other_elements: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PlacementRule:
    """One ``<rule>`` of ``<queuePlacementPolicy>``. ``attributes`` holds every attribute
    but ``name`` (``create``, ``queue``, ...) in file order; ``parent_rule`` is the rule
    nested inside it (``nestedUserQueue`` needs one)."""

    name: str
    attributes: tuple[tuple[str, str], ...] = ()
    parent_rule: PlacementRule | None = None

    def attribute(self, key: str) -> str | None:
        return next((v for k, v in self.attributes if k == key), None)

    @property
    def create(self) -> bool:
        """YARN's FSPlacementRule: an absent or empty ``create`` means true."""
        raw = self.attribute("create")
        return not raw or raw.lower() == "true"


@dataclass(frozen=True)
class FairSchedulerConfig(QueueTree[FairQueue]):
    """A whole allocation file. ``root`` always exists in the model even when the file
    leaves it implicit. ``defaults`` holds the top-level simple elements
    (``defaultQueueSchedulingPolicy``, ``queueMaxAMShareDefault``, ...), in file order;
    ``users`` the ``<user>`` elements and ``placement_rules`` the placement policy."""

    root: FairQueue
    defaults: tuple[tuple[str, str], ...] = field(default=())
    users: tuple[FairUser, ...] = ()
    # None: the file has no <queuePlacementPolicy> (YARN's default: specified, default).
    placement_rules: tuple[PlacementRule, ...] | None = None

    def find_leaf_by_name(self, name: str) -> FairQueue | None:
        full = name if name.startswith("root") else f"root.{name}"
        exact = self.find(full)
        if exact is not None:
            return exact
        matches = [q for q in self.leaves() if q.name == name]
        return matches[0] if len(matches) == 1 else None

    def default(self, tag: str) -> str | None:
        return next((v for k, v in self.defaults if k == tag), None)

    def user(self, name: str) -> FairUser | None:
        return next((u for u in self.users if u.name == name), None)

    def effective_policy(self, queue: FairQueue) -> str:
        return queue.scheduling_policy or self.default("defaultQueueSchedulingPolicy") or "fair"

    def effective_max_am_share(self, queue: FairQueue) -> float:
        if queue.max_am_share is not None:
            return queue.max_am_share
        raw = self.default("queueMaxAMShareDefault")
        return DEFAULT_MAX_AM_SHARE if raw is None else float(raw)
