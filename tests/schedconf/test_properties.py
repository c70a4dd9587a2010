"""Round trips on random configurations: parse -> write -> parse is the identity,
writing is idempotent, and patching keeps what only the document knows."""

from __future__ import annotations

import pickle
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from tests.schedconf.strategies import capacity_configs, decorate, fair_configs
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig
from yarn_adapt.yarn.confxml import (
    diff_configs,
    parse_capacity_xml,
    parse_fair_xml,
    render_capacity,
    render_fair,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def top_level(text: str) -> tuple[int, int]:
    """(comments, unknown elements) directly under the root element."""
    root = etree.fromstring(text.split("\n", 1)[1].encode())
    comments = sum(1 for node in root if not isinstance(node.tag, str))
    unknown = sum(1 for node in root if node.tag == "siteExtension")
    return comments, unknown


# --------------------------------------------------------------------------- capacity


@SETTINGS
@given(capacity_configs)
def test_capacity_fresh_write_reads_back_identically(config: CapacitySchedulerConfig) -> None:
    text = render_capacity(config)
    document = parse_capacity_xml(text)
    assert document.config == config
    assert document.render() == text
    assert render_capacity(document.config) == text
    assert diff_configs(config, document.config) == []


@SETTINGS
@given(capacity_configs, capacity_configs, st.data())
def test_capacity_patch_reads_back_as_the_new_config_and_keeps_decorations(
    old: CapacitySchedulerConfig, new: CapacitySchedulerConfig, data: st.DataObject
) -> None:
    original = decorate(render_capacity(old), data.draw)
    document = parse_capacity_xml(original)
    assert document.config == old
    assert parse_capacity_xml(document.render()).render() == document.render()
    written = document.render(new)
    again = parse_capacity_xml(written)
    assert again.config == new
    assert again.render() == written
    assert again.render(new) == written
    assert top_level(written) == top_level(original)


# --------------------------------------------------------------------------- fair


@SETTINGS
@given(fair_configs)
def test_fair_fresh_write_reads_back_identically(config: FairSchedulerConfig) -> None:
    text = render_fair(config)
    document = parse_fair_xml(text)
    assert document.config == config
    assert document.render() == text
    assert render_fair(document.config) == text
    assert diff_configs(config, document.config) == []


@SETTINGS
@given(fair_configs, fair_configs, st.data())
def test_fair_patch_reads_back_as_the_new_config_and_keeps_decorations(
    old: FairSchedulerConfig, new: FairSchedulerConfig, data: st.DataObject
) -> None:
    original = decorate(render_fair(old), data.draw)
    document = parse_fair_xml(original)
    assert document.config == old
    written = document.render(new)
    again = parse_fair_xml(written)
    assert again.config == new
    assert again.render() == written
    assert again.render(new) == written
    comments, unknown = top_level(written)
    assert unknown == top_level(original)[1]
    assert comments >= _comments_outside_queues(original)


def _comments_outside_queues(text: str) -> int:
    """Top-level comments not attached to a queue that may be removed: the ones
    before a non-queue element or at the end."""
    root = etree.fromstring(text.split("\n", 1)[1].encode())
    kept = 0
    for node in root:
        if isinstance(node.tag, str):
            continue
        following = node.getnext()
        if following is None or following.tag not in ("queue", "pool"):
            kept += 1
    return kept


# --------------------------------------------------------------------------- look-ups


def _walked(config: CapacitySchedulerConfig | FairSchedulerConfig, path: str) -> object:
    return next((q for q in config.root.walk() if q.path == path), None)


@SETTINGS
@given(st.one_of(capacity_configs, fair_configs))
def test_find_agrees_with_a_walk_after_pickling_and_replacing(
    config: CapacitySchedulerConfig | FairSchedulerConfig,
) -> None:
    """``find`` keeps an index per tree; it must answer as a walk does, on a copy
    sent to a worker (pickled without the index) and on a tree with a queue
    replaced (a new tree, a new index)."""
    paths = [q.path for q in config.root.walk()]
    assert all(config.find(p) is _walked(config, p) for p in [*paths, "root.absent"])
    copied = pickle.loads(pickle.dumps(config))
    assert copied == config and "_queues_by_path" not in pickle.loads(pickle.dumps(copied)).__dict__
    assert all(copied.find(p) == config.find(p) for p in paths)
    last = [*config.root.walk()][-1]
    changed = config.with_queue(replace(last, children=()))  # a new tree
    assert changed.find(last.path) is _walked(changed, last.path)
