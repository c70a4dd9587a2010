"""capacity-scheduler.xml: reading it as Hadoop does, and patching it in place."""

from __future__ import annotations

import difflib
from dataclasses import replace

import pytest

from tests.schedconf.factories import FIXTURES
from yarn_adapt.model import (
    AbsoluteCapacity,
    CapacityQueue,
    CapacitySchedulerConfig,
    Percentage,
    QueueState,
    Resources,
    Weight,
)
from yarn_adapt.yarn.confxml import (
    CapacityDocument,
    parse_capacity_xml,
    read_capacity,
    render_capacity,
)

FIXTURE = FIXTURES / "capacity-scheduler.xml"


@pytest.fixture
def document() -> CapacityDocument:
    return read_capacity(FIXTURE)


def changed_lines(before: str, after: str) -> list[str]:
    """The lines added or removed between two texts, without the diff headers."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


# --------------------------------------------------------------------------- reading


def test_the_queue_tree_comes_from_the_queues_properties(document: CapacityDocument) -> None:
    paths = [q.path for q in document.config.queues()]
    assert paths == [
        "root",
        "root.default",
        "root.eng",
        "root.eng.batch",
        "root.eng.adhoc",
        "root.sci",
    ]


def test_known_properties_become_typed_fields(document: CapacityDocument) -> None:
    config = document.config
    default = config.find("root.default")
    assert default == CapacityQueue(
        "root.default",
        capacity=Percentage(20.0),
        maximum_capacity=Percentage(100.0),  # -1 means 100
        user_limit_factor=1.0,
        state=QueueState.RUNNING,
        other_properties=(("acl_submit_applications", "*"),),
    )
    batch = config.find("root.eng.batch")
    assert batch is not None
    assert (batch.ordering_policy, batch.maximum_am_resource_percent) == ("fair", 0.3)
    assert config.find("root.eng.adhoc").minimum_user_limit_percent == 25.0  # type: ignore[union-attr]


def test_unknown_and_dotted_per_queue_properties_stay_with_their_queue(
    document: CapacityDocument,
) -> None:
    batch = document.config.find("root.eng.batch")
    adhoc = document.config.find("root.eng.adhoc")
    assert batch is not None and adhoc is not None
    assert batch.other_properties == (
        ("ordering-policy.fair.enable-size-based-weight", "true"),
        ("accessible-node-labels", "gpu"),
        ("accessible-node-labels.gpu.capacity", "100"),
    )
    assert adhoc.other("user-settings.alice.weight") == "2.0"
    assert adhoc.other("maximum-application-lifetime") == "86400"


def test_globals_keep_file_order_and_hadoop_override_rules(document: CapacityDocument) -> None:
    names = [name for name, _ in document.config.global_properties]
    assert names == [
        "yarn.scheduler.capacity.maximum-applications",
        "yarn.scheduler.capacity.maximum-am-resource-percent",
        "yarn.scheduler.capacity.resource-calculator",
        "yarn.scheduler.capacity.queue-mappings",
        "yarn.scheduler.capacity.queue-mappings-override.enable",
        "acme.dashboards.cluster-tier",
        "yarn.scheduler.capacity.node-locality-delay",  # its later definition wins
    ]
    # the final 0.2 is not overridden by the later 0.9; the later 20 overrides 40
    assert document.config.global_value("maximum-am-resource-percent") == "0.2"
    assert document.config.global_value("node-locality-delay") == "20"


def test_attribute_form_and_valueless_properties() -> None:
    text = """<configuration>
      <property name="yarn.scheduler.capacity.root.queues" value="a"/>
      <property name="yarn.scheduler.capacity.root.a.capacity" value="100"/>
      <property><name>yarn.scheduler.capacity.root.a.state</name><value></value></property>
      <property><name>yarn.scheduler.capacity.root.a.maximum-capacity</name></property>
    </configuration>"""
    config = parse_capacity_xml(text).config
    assert config.find("root.a") == CapacityQueue("root.a", capacity=Percentage(100.0))


def test_properties_of_queues_not_in_the_tree_are_global() -> None:
    text = """<configuration>
      <property><name>yarn.scheduler.capacity.root.queues</name><value>a</value></property>
      <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>100</value></property>
      <property><name>yarn.scheduler.capacity.root.gone.state</name><value>STOPPED</value></property>
    </configuration>"""
    config = parse_capacity_xml(text).config
    assert config.global_value("root.gone.state") == "STOPPED"
    assert config.root.other_properties == ()


def test_capacity_forms() -> None:
    text = """<configuration>
      <property><name>yarn.scheduler.capacity.root.queues</name><value>w, a ,b</value></property>
      <property><name>yarn.scheduler.capacity.root.w.capacity</name><value>2.5w</value></property>
      <property><name>yarn.scheduler.capacity.root.a.capacity</name>
        <value>[memory=10g,vcores=4,yarn.io/gpu=1]</value></property>
      <property><name>yarn.scheduler.capacity.root.b.capacity</name><value> 12.5 </value></property>
    </configuration>"""
    config = parse_capacity_xml(text).config
    assert [c.capacity for c in config.root.children] == [
        Weight(2.5),
        AbsoluteCapacity(Resources(10240, 4), (("yarn.io/gpu", "1"),)),
        Percentage(12.5),
    ]


# --------------------------------------------------------------------------- writing


def test_an_unchanged_config_writes_the_file_back_byte_for_byte(document: CapacityDocument) -> None:
    assert document.render() == FIXTURE.read_text()
    assert document.render(document.config) == FIXTURE.read_text()


def test_an_edit_touches_only_the_changed_values(document: CapacityDocument) -> None:
    config = document.config
    batch = config.find("root.eng.batch")
    adhoc = config.find("root.eng.adhoc")
    assert batch is not None and adhoc is not None
    edited = config.with_queue(replace(batch, capacity=Percentage(60.0), user_limit_factor=3.0))
    edited = edited.with_queue(replace(adhoc, capacity=Percentage(40.0)))
    changes = changed_lines(FIXTURE.read_text(), document.render(edited))
    assert changes == [
        "-    <value>70</value>",
        "+    <value>60</value>",
        "-    <value>2</value>",
        "+    <value>3</value>",
        "-    <value>30</value>",
        "+    <value>40</value>",
    ]


def test_a_value_with_the_same_meaning_keeps_its_spelling(document: CapacityDocument) -> None:
    config = document.config
    default = config.find("root.default")
    assert default is not None
    same = config.with_queue(
        replace(default, capacity=Percentage(20), maximum_capacity=Percentage(100.0))
    )
    text = document.render(same)
    assert "<value>20.0</value>" in text and "<value>-1</value>" in text
    assert text == FIXTURE.read_text()


def test_comments_descriptions_finals_unknowns_and_order_survive_an_edit(
    document: CapacityDocument,
) -> None:
    config = document.config
    sci = config.find("root.sci")
    assert sci is not None
    text = document.render(config.with_queue(replace(sci, maximum_capacity=Percentage(70.0))))
    original = FIXTURE.read_text()
    for kept in (
        '<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>',
        "<!-- not a YARN property: read by the site's own dashboards -->",
        "<description>May grow to the whole cluster when idle.</description>",
        "<final>true</final>",
        "<name>acme.dashboards.cluster-tier</name>",
        "<value>0.9</value>",  # the overridden duplicate stays, as Hadoop ignores it
    ):
        assert kept in text
    assert text.count("<!--") == original.count("<!--")
    assert changed_lines(original, text) == ["-    <value>50</value>", "+    <value>70</value>"]


def test_new_properties_go_beside_their_queue(document: CapacityDocument) -> None:
    config = document.config
    adhoc = config.find("root.eng.adhoc")
    assert adhoc is not None
    edited = config.with_queue(replace(adhoc, state=QueueState.STOPPED))
    text = document.render(edited)
    lines = text.splitlines()
    new = lines.index("    <name>yarn.scheduler.capacity.root.eng.adhoc.state</name>")
    previous_name = next(
        line for line in reversed(lines[:new]) if line.strip().startswith("<name>")
    )
    assert "root.eng.adhoc.maximum-application-lifetime" in previous_name
    assert read_capacity_text(text).find("root.eng.adhoc").state is QueueState.STOPPED  # type: ignore[union-attr]


def test_a_new_queue_follows_its_siblings_and_a_removed_one_leaves_nothing(
    document: CapacityDocument,
) -> None:
    config = document.config
    eng = config.find("root.eng")
    assert eng is not None
    ml = CapacityQueue("root.eng.ml", capacity=Percentage(30.0), ordering_policy="fair")
    batch = replace(eng.children[0], capacity=Percentage(70.0))
    edited = config.with_queue(replace(eng, children=(batch, ml)))  # adhoc removed
    text = document.render(edited)
    assert "root.eng.adhoc" not in text
    assert "<value>batch,ml</value>" in text
    ml_line = text.index("root.eng.ml.capacity")
    assert text.index("root.eng.batch.user-limit-factor") < ml_line < text.index("root.sci.")
    assert read_capacity_text(text) == edited


def test_a_fresh_file_reads_back_as_the_same_config() -> None:
    config = CapacitySchedulerConfig(
        CapacityQueue(
            "root",
            children=(
                CapacityQueue("root.a", capacity=Percentage(62.5), user_limit_factor=-1.0),
                CapacityQueue(
                    "root.b",
                    capacity=Percentage(37.5),
                    state=QueueState.STOPPED,
                    other_properties=(("acl_submit_applications", "bob"),),
                ),
            ),
        ),
        global_properties=(("yarn.scheduler.capacity.maximum-applications", "500"),),
    )
    text = render_capacity(config)
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<configuration>\n  <property>')
    assert read_capacity_text(text) == config
    assert render_capacity(read_capacity_text(text)) == text


def read_capacity_text(text: str) -> CapacitySchedulerConfig:
    return parse_capacity_xml(text).config
