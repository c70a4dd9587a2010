"""Hypothesis strategies: random capacity and fair configurations, including the
properties and elements the model does not know, and decorations (comments, unknown
elements and attributes) that only the document carries."""

from __future__ import annotations

from hypothesis import strategies as st
from lxml import etree

from yarn_adapt.model import (
    AbsoluteCapacity,
    CapacityQueue,
    CapacitySchedulerConfig,
    FairQueue,
    FairResources,
    FairSchedulerConfig,
    FairUser,
    Percentage,
    PlacementRule,
    QueueState,
    Resources,
    Weight,
    parse_fair_resources,
)

NAMES = st.text("abcdefgh", min_size=1, max_size=4)
# Text XML can carry in element content (no \r: parsers turn it into \n).
VALUE_TEXT = st.text(
    st.sampled_from([*"abcxyz019 ,.:;*=-_/[]%", "\n", "\t", "é", "<", "&", ">"]),
    min_size=1,
    max_size=12,
)
FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
MAX_DEPTH = 2

# --------------------------------------------------------------------------- capacity

WEIGHTS = st.integers(0, 100_000).map(lambda n: n / 1000)
ABSOLUTE = st.builds(
    AbsoluteCapacity,
    st.builds(Resources, st.integers(0, 10**7), st.integers(0, 10**4)),
    st.sampled_from([(), (("yarn.io/gpu", "2"),)]),
)
CAPACITIES = st.one_of(
    st.integers(-1, 100).map(float).map(Percentage),
    FINITE.map(Percentage),
    WEIGHTS.map(Weight),
    ABSOLUTE,
)
# -1 is not a maximum-capacity of its own: YARN reads it as 100.
MAXIMUM_CAPACITIES = CAPACITIES.filter(lambda c: c != Percentage(-1.0))
QUEUE_SUFFIXES = st.sampled_from(
    [
        "acl_submit_applications",
        "acl_administer_queue",
        "maximum-applications",
        "disable_preemption",
        "accessible-node-labels",
        "accessible-node-labels.gpu.capacity",
        "user-settings.bob.weight",
        "ordering-policy.fair.enable-size-based-weight",
        "site-custom-flag",
    ]
)
GLOBAL_NAMES = st.sampled_from(
    [
        "yarn.scheduler.capacity.maximum-applications",
        "yarn.scheduler.capacity.resource-calculator",
        "yarn.scheduler.capacity.node-locality-delay",
        "yarn.scheduler.capacity.queue-mappings",
        "yarn.scheduler.capacity.root.removed.state",
        "site.dashboards.tier",
    ]
)


def _optional(strategy: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.none() | strategy


def capacity_queue(path: str, depth: int = 0) -> st.SearchStrategy[CapacityQueue]:
    names = st.lists(NAMES, max_size=3 if depth < MAX_DEPTH else 0, unique=True)
    children = names.flatmap(
        lambda found: st.tuples(*(capacity_queue(f"{path}.{n}", depth + 1) for n in found))
    )
    return st.builds(
        CapacityQueue,
        path=st.just(path),
        capacity=_optional(CAPACITIES),
        maximum_capacity=_optional(MAXIMUM_CAPACITIES),
        user_limit_factor=_optional(FINITE),
        minimum_user_limit_percent=_optional(FINITE),
        ordering_policy=_optional(st.sampled_from(["fifo", "fair", "utilization", "org.x.P"])),
        state=_optional(st.sampled_from(list(QueueState))),
        maximum_am_resource_percent=_optional(FINITE),
        children=children,
        other_properties=st.dictionaries(QUEUE_SUFFIXES, VALUE_TEXT, max_size=3).map(
            lambda d: tuple(d.items())
        ),
    )


capacity_configs = st.builds(
    CapacitySchedulerConfig,
    capacity_queue("root"),
    st.dictionaries(GLOBAL_NAMES, VALUE_TEXT, max_size=4).map(lambda d: tuple(d.items())),
)


# --------------------------------------------------------------------------- fair

RESOURCE_TEXTS = st.one_of(
    st.builds("memory-mb={}, vcores={}".format, st.integers(0, 10**6), st.integers(0, 999)),
    st.builds("{} mb, {} vcores".format, st.integers(0, 10**6), st.integers(0, 999)),
    st.builds("{}%".format, st.integers(0, 100)),
    st.builds("{}% memory, {}% cpu".format, st.integers(0, 100), st.integers(0, 100)),
)
RESOURCES: st.SearchStrategy[FairResources] = RESOURCE_TEXTS.map(parse_fair_resources)
ELEMENT_TAGS = st.sampled_from(
    [
        "aclSubmitApps",
        "aclAdministerApps",
        "minSharePreemptionTimeout",
        "allowPreemptionFrom",
        "maxChildResources",
        "reservation",
        "costCenter",
        "x-team",
    ]
)
ELEMENT_TEXT = st.just("") | VALUE_TEXT
PAIRS = st.lists(st.tuples(ELEMENT_TAGS, ELEMENT_TEXT), max_size=3).map(tuple)


def fair_queue(path: str, depth: int = 0) -> st.SearchStrategy[FairQueue]:
    names = st.lists(NAMES, max_size=3 if depth < MAX_DEPTH else 0, unique=True)
    children = names.flatmap(
        lambda found: st.tuples(*(fair_queue(f"{path}.{n}", depth + 1) for n in found))
    )
    return st.builds(
        FairQueue,
        path=st.just(path),
        weight=_optional(FINITE),
        scheduling_policy=_optional(st.sampled_from(["fair", "drf", "fifo", "DRF", "org.x.P"])),
        min_resources=_optional(RESOURCES),
        max_resources=_optional(RESOURCES),
        max_running_apps=_optional(st.integers(-5, 10**6)),
        max_am_share=_optional(FINITE),
        declared_parent=st.booleans(),
        children=children,
        other_elements=PAIRS,
    )


ATTRIBUTES = st.dictionaries(
    st.sampled_from(["create", "queue"]), st.sampled_from(["true", "false", "dev"]), max_size=2
).map(lambda d: tuple(d.items()))
RULE_NAMES = st.sampled_from(["specified", "user", "primaryGroup", "default", "reject", "x"])
SIMPLE_RULES = st.builds(PlacementRule, RULE_NAMES, ATTRIBUTES)
RULES = st.builds(PlacementRule, RULE_NAMES, ATTRIBUTES, st.none() | SIMPLE_RULES)
DEFAULT_TAGS = st.sampled_from(
    ["queueMaxAMShareDefault", "queueMaxAppsDefault", "defaultQueueSchedulingPolicy", "siteNote"]
)

fair_configs = st.builds(
    FairSchedulerConfig,
    fair_queue("root"),
    st.lists(st.tuples(DEFAULT_TAGS, ELEMENT_TEXT), max_size=3).map(tuple),
    st.lists(
        st.builds(
            FairUser,
            NAMES,
            _optional(st.integers(0, 99)),
            st.lists(st.tuples(st.just("note"), ELEMENT_TEXT), max_size=1).map(tuple),
        ),
        max_size=2,
    ).map(tuple),
    st.none() | st.lists(RULES, max_size=3).map(tuple),
)


# --------------------------------------------------------------------------- decorations


def decorate(text: str, draw: st.DrawFn) -> str:
    """``text`` with comments, unknown elements and attributes, descriptions and
    finals sprinkled in: things only the document carries."""
    root = etree.fromstring(text.split("\n", 1)[1].encode())
    for number, element in enumerate(list(root.iter())):
        if not isinstance(element.tag, str):
            continue
        if element is not root and draw(st.integers(0, 3)) == 0:
            comment = etree.Comment(f" note {number} ")
            comment.tail = element.tail
            element.addprevious(comment)
        _decorate_element(element, number, draw)
    if draw(st.booleans()):
        extra = etree.SubElement(root, "siteExtension", {"version": "2"})
        etree.SubElement(extra, "item").text = "kept"
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + etree.tostring(root, encoding="unicode")


def _decorate_element(element: etree._Element, number: int, draw: st.DrawFn) -> None:
    if element.tag == "property" and draw(st.integers(0, 2)) == 0:
        etree.SubElement(element, "description").text = f"description {number}"
        if draw(st.booleans()):
            etree.SubElement(element, "source").text = "programmatically"
    if element.tag in ("queue", "pool") and draw(st.booleans()):
        element.set("owner", f"team-{number}")
        if draw(st.booleans()):
            annotations = etree.SubElement(element, "annotations")
            etree.SubElement(annotations, "tag", {"key": "tier"}).text = "gold"
