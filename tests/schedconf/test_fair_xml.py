"""fair-scheduler.xml: reading it as the Fair Scheduler does, and patching it in place."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.schedconf.factories import FIXTURES, fair_xml
from tests.schedconf.test_capacity_xml import changed_lines
from yarn_adapt.model import (
    FairQueue,
    FairSchedulerConfig,
    FairUser,
    PlacementRule,
    parse_fair_resources,
)
from yarn_adapt.yarn.confxml import FairDocument, parse_fair_xml, read_fair, render_fair

FIXTURE = FIXTURES / "fair-scheduler.xml"
EXPLICIT = FIXTURES / "fair-scheduler-explicit-root.xml"


@pytest.fixture
def document() -> FairDocument:
    return read_fair(FIXTURE)


def reread(text: str) -> FairSchedulerConfig:
    return parse_fair_xml(text).config


# --------------------------------------------------------------------------- reading


def test_implicit_root_nested_queues_and_the_pool_synonym(document: FairDocument) -> None:
    config = document.config
    assert [q.path for q in config.queues()] == [
        "root",
        "root.default",
        "root.eng",
        "root.eng.batch",
        "root.eng.adhoc",
        "root.sci",
        "root.users",
    ]
    assert config.root == replace(config.root, weight=None, other_elements=())
    eng = config.find("root.eng")
    assert eng is not None and eng.declared_parent and eng.weight == 3.0
    assert eng.min_resources == parse_fair_resources("memory-mb=8192, vcores=8")
    users = config.find("root.users")
    assert users is not None and users.declared_parent and not users.is_leaf


def test_known_elements_are_typed_and_simple_unknown_ones_kept(document: FairDocument) -> None:
    adhoc = document.config.find("root.eng.adhoc")
    assert adhoc == FairQueue(
        "root.eng.adhoc",
        scheduling_policy="fifo",  # from the old <schedulingMode>
        max_running_apps=5,
        other_elements=(
            ("maxContainerAllocation", "memory-mb=4096, vcores=2"),
            ("costCenter", "CC-1234"),
        ),
    )
    sci = document.config.find("root.sci")
    assert sci is not None
    # <annotations> has children: it stays in the document only
    assert [tag for tag, _ in sci.other_elements] == [
        "minSharePreemptionTimeout",
        "allowPreemptionFrom",
    ]


def test_defaults_users_and_placement_policy(document: FairDocument) -> None:
    config = document.config
    assert config.default("defaultQueueSchedulingPolicy") == "drf"
    assert [tag for tag, _ in config.defaults][:2] == [
        "queueMaxAMShareDefault",
        "queueMaxAppsDefault",
    ]
    assert config.users == (FairUser("etl", 30), FairUser("intern", 2))
    assert config.placement_rules == (
        PlacementRule("specified", (("create", "false"),)),
        PlacementRule(
            "nestedUserQueue",
            parent_rule=PlacementRule("secondaryGroupExistingQueue", (("create", "false"),)),
        ),
        PlacementRule("default", (("queue", "default"),)),
    )


def test_an_explicit_root_is_the_root(document: FairDocument) -> None:
    config = read_fair(EXPLICIT).config
    assert config.root.scheduling_policy == "drf"
    assert [c.path for c in config.root.children] == ["root.prod", "root.dev"]


# --------------------------------------------------------------------------- writing


@pytest.mark.parametrize("path", [FIXTURE, EXPLICIT], ids=lambda p: p.name)
def test_an_unchanged_config_writes_the_file_back_byte_for_byte(path: Path) -> None:
    document = read_fair(path)
    assert document.render() == path.read_text()


def test_an_edit_touches_only_the_changed_elements(document: FairDocument) -> None:
    config = document.config
    batch = config.find("root.eng.batch")
    assert batch is not None
    edited = config.with_queue(replace(batch, weight=3.0, max_am_share=0.25))
    assert changed_lines(FIXTURE.read_text(), document.render(edited)) == [
        "-      <weight>2.0</weight>",
        "+      <weight>3</weight>",
        "-      <maxAMShare>0.3</maxAMShare>",
        "+      <maxAMShare>0.25</maxAMShare>",
    ]


def test_same_meaning_keeps_the_spelling_and_the_old_synonyms(document: FairDocument) -> None:
    config = document.config
    batch = config.find("root.eng.batch")
    assert batch is not None
    same = config.with_queue(
        replace(batch, weight=2, min_resources=parse_fair_resources("memory-mb=4096, vcores=4"))
    )
    text = document.render(same)
    assert text == FIXTURE.read_text()
    assert '<pool name="sci">' in text and "<schedulingMode>fifo</schedulingMode>" in text


def test_unknown_attributes_complex_elements_and_comments_survive_edits(
    document: FairDocument,
) -> None:
    config = document.config
    sci = config.find("root.sci")
    eng = config.find("root.eng")
    assert sci is not None and eng is not None
    edited = config.with_queue(replace(sci, weight=5.0, max_running_apps=7))
    edited = edited.with_queue(replace(eng, max_resources=parse_fair_resources("80%")))
    text = document.render(edited)
    for kept in (
        'owner="team-eng"',
        '<annotations><tag key="tier">gold</tag></annotations>',
        "<!-- site extension, ignored by YARN -->",
        "<costCenter>CC-1234</costCenter>",
    ):
        assert kept in text
    assert text.count("<!--") == FIXTURE.read_text().count("<!--")
    assert reread(text) == edited
    assert "</annotations>\n    <maxRunningApps>7</maxRunningApps>\n  </pool>" in text


def test_queues_added_removed_and_reordered(document: FairDocument) -> None:
    config = document.config
    eng = config.find("root.eng")
    assert eng is not None
    ml = FairQueue("root.eng.ml", weight=1.5, scheduling_policy="drf")
    edited = config.with_queue(replace(eng, children=(ml, eng.children[0])))  # adhoc gone
    root = edited.root
    edited = replace(edited, root=replace(root, children=tuple(reversed(root.children))))
    text = document.render(edited)
    assert reread(text) == edited
    assert "adhoc" not in text and "costCenter" not in text
    assert '    <queue name="ml">\n      <weight>1.5</weight>' in text


def test_users_defaults_and_placement_changes(document: FairDocument) -> None:
    config = document.config
    edited = replace(
        config,
        defaults=(*config.defaults[:1], ("queueMaxAppsDefault", "80"), *config.defaults[2:]),
        users=(FairUser("etl", 40), FairUser("ops", None, (("note", "on call"),))),
        placement_rules=(PlacementRule("specified"), PlacementRule("default", (("queue", "sci"),))),
    )
    text = document.render(edited)
    assert reread(text) == edited
    assert "intern" not in text
    assert '<rule name="default" queue="sci"/>' in text
    assert text.index("<queueMaxAppsDefault>80") < text.index('<user name="etl">')


def test_an_implicit_root_stays_implicit_unless_root_gets_settings(document: FairDocument) -> None:
    config = document.config
    assert 'name="root"' not in document.render(config.with_queue(config.root))
    edited = config.with_queue(replace(config.root, scheduling_policy="drf"))
    text = document.render(edited)
    assert '<queue name="root">\n    <schedulingPolicy>drf</schedulingPolicy>' in text
    assert (
        '\n    <queue name="eng" type="parent" owner="team-eng">\n      <weight>3</weight>' in text
    )
    assert reread(text) == edited


def test_a_fresh_file_reads_back_as_the_same_config() -> None:
    config = FairSchedulerConfig(
        FairQueue(
            "root",
            children=(
                FairQueue("root.a", weight=2.0, max_am_share=0.4),
                FairQueue(
                    "root.p", declared_parent=True, other_elements=(("aclSubmitApps", "alice"),)
                ),
            ),
        ),
        defaults=(("queueMaxAMShareDefault", "0.5"),),
        users=(FairUser("bob", 3),),
        placement_rules=(
            PlacementRule("specified", (("create", "false"),)),
            PlacementRule("default"),
        ),
    )
    text = render_fair(config)
    assert reread(text) == config
    assert render_fair(reread(text)) == text
    assert 'name="root"' not in text


def test_document_of_one_line_gets_compact_additions() -> None:
    document = parse_fair_xml(fair_xml('<queue name="a"><weight>1</weight></queue>'))
    edited = document.config.with_queue(FairQueue("root.a", weight=1.0, max_running_apps=3))
    assert '<queue name="a"><weight>1</weight><maxRunningApps>3</maxRunningApps></queue>' in (
        document.render(edited)
    )
