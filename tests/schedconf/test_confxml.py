"""The public entry point: telling the kinds apart, bad input, and safe writing."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.schedconf.factories import FIXTURES, capacity_xml, fair_xml
from yarn_adapt.errors import ConfigFileError, ConfigValidationError
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig, Percentage
from yarn_adapt.yarn.confxml import (
    CapacityDocument,
    FairDocument,
    load_scheduler_config,
    read_capacity,
    read_fair,
    read_scheduler_document,
    write_scheduler_file,
)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("capacity-scheduler.xml", CapacitySchedulerConfig),
        ("fair-scheduler.xml", FairSchedulerConfig),
        ("fair-scheduler-explicit-root.xml", FairSchedulerConfig),
    ],
)
def test_the_kind_of_file_is_told_by_its_content(name: str, kind: type) -> None:
    assert isinstance(load_scheduler_config(FIXTURES / name), kind)


@dataclass(frozen=True)
class BadFile:
    name: str
    content: str | bytes | None  # None: the path does not exist
    words: tuple[str, ...]
    reader: str = "any"  # which function reads it: any | capacity | fair


CAPACITY_ROOT = {"root.queues": "a", "root.a.capacity": "100"}

BAD_FILES = [
    BadFile("missing file", None, ("cannot read", "No such file")),
    BadFile("empty file", "", ("empty file",)),
    BadFile("not XML", "queues: a, b\n", ("line 1", "not well-formed XML")),
    BadFile("truncated XML", "<configuration>\n<property>\n", ("line", "not well-formed XML")),
    BadFile("an HTML page", "<html><body>502</body></html>", ("root element is <html>",)),
    BadFile(
        "a fair file read as capacity",
        fair_xml('<queue name="a"/>'),
        ("root element is <allocations> (a fair-scheduler.xml)", "expected <configuration>"),
        "capacity",
    ),
    BadFile(
        "a capacity file read as fair",
        capacity_xml(CAPACITY_ROOT),
        ("root element is <configuration>", "expected <allocations>"),
        "fair",
    ),
    BadFile(
        "yarn-site.xml",
        "<configuration><property><name>yarn.resourcemanager.hostname</name>"
        "<value>rm</value></property></configuration>",
        ("no yarn.scheduler.capacity.* property",),
    ),
    BadFile(
        "capacity that does not parse",
        capacity_xml({**CAPACITY_ROOT, "root.a.capacity": "abc"}),
        ("line 4", "queue root.a property capacity", "'abc'"),
    ),
    BadFile(
        "unknown queue state",
        capacity_xml({**CAPACITY_ROOT, "root.a.state": "PAUSED"}),
        ("line 5", "queue root.a property state", "RUNNING or STOPPED"),
    ),
    BadFile(
        "user-limit-factor that is not a number",
        capacity_xml({**CAPACITY_ROOT, "root.a.user-limit-factor": "two"}),
        ("queue root.a property user-limit-factor", "not a number"),
    ),
    BadFile(
        "a child listed twice",
        capacity_xml({"root.queues": "a,b,a", "root.a.capacity": "50", "root.b.capacity": "50"}),
        ("queue root property queues", "'a' is listed twice"),
    ),
    BadFile(
        "capacity vector",
        capacity_xml({**CAPACITY_ROOT, "root.a.capacity": "[memory=50%,vcores=2w]"}),
        ("queue root.a property capacity", "capacity vectors", "not supported"),
    ),
    BadFile(
        "fair weight that does not parse",
        fair_xml('<queue name="a">\n<weight>heavy</weight>\n</queue>'),
        ("line 4", "queue root.a element <weight>", "'heavy'"),
    ),
    BadFile(
        "fair maxRunningApps that is not an integer",
        fair_xml(
            '<queue name="p"><queue name="c"><maxRunningApps>1.5</maxRunningApps></queue></queue>'
        ),
        ("queue root.p.c element <maxRunningApps>", "not an integer"),
    ),
    BadFile(
        "fair resources that do not parse",
        fair_xml('<queue name="a"><minResources>lots</minResources></queue>'),
        ("queue root.a element <minResources>", "'lots'"),
    ),
    BadFile(
        "fair empty weight",
        fair_xml('<queue name="a"><weight/></queue>'),
        ("queue root.a element <weight>", "empty"),
    ),
    BadFile(
        "fair root beside other queues",
        fair_xml('<queue name="root"/><queue name="a"/>'),
        ("no other queues can be placed alongside it",),
    ),
    BadFile(
        "fair queue name with a dot",
        fair_xml('<queue name="a.b"/>'),
        ("queue name 'a.b' under root contains '.'",),
    ),
    BadFile(
        "fair queue defined twice",
        fair_xml('<queue name="a"/><pool name="a"/>'),
        ("queue root.a is defined twice",),
    ),
]


def _read(case: BadFile, path: Path) -> object:
    readers = {"any": load_scheduler_config, "capacity": read_capacity, "fair": read_fair}
    return readers[case.reader](path)


@pytest.mark.parametrize("case", BAD_FILES, ids=lambda c: c.name)
def test_bad_input_is_one_line_naming_file_and_place(case: BadFile, tmp_path: Path) -> None:
    path = tmp_path / "scheduler.xml"
    if isinstance(case.content, str):
        path.write_text(case.content)
    elif isinstance(case.content, bytes):
        path.write_bytes(case.content)
    with pytest.raises(ConfigFileError) as caught:
        _read(case, path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    for words in case.words:
        assert words in message


def test_a_directory_is_not_readable(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match="cannot read"):
        load_scheduler_config(tmp_path)


def test_a_doctype_is_refused_so_no_entity_is_ever_read_or_expanded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    text = (
        f'<?xml version="1.0"?>\n<!DOCTYPE allocations [<!ENTITY s SYSTEM "file://{secret}">]>'
        '<allocations><queue name="a"><aclSubmitApps>&s;</aclSubmitApps></queue></allocations>'
    )
    path = tmp_path / "fair.xml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as refused:
        load_scheduler_config(path)
    message = refused.value.one_line()
    assert message.startswith(f"{path}: line 2: a DOCTYPE declaration is not accepted")
    assert "TOP-SECRET" not in message


# --------------------------------------------------------------------------- writing


@pytest.fixture
def capacity_file(tmp_path: Path) -> Path:
    target = tmp_path / "capacity-scheduler.xml"
    shutil.copy(FIXTURES / "capacity-scheduler.xml", target)
    return target


def _with_sci_capacity(document: CapacityDocument, default: float, sci: float) -> object:
    config = document.config
    queue_default, queue_sci = config.find("root.default"), config.find("root.sci")
    assert queue_default is not None and queue_sci is not None
    config = config.with_queue(replace(queue_default, capacity=Percentage(default)))
    return config.with_queue(replace(queue_sci, capacity=Percentage(sci)))


def test_write_patches_the_original_and_leaves_no_temporary_file(capacity_file: Path) -> None:
    document = read_capacity(capacity_file)
    new = _with_sci_capacity(document, 10.0, 40.0)
    assert isinstance(new, CapacitySchedulerConfig)
    text = write_scheduler_file(capacity_file, new, document)
    assert capacity_file.read_text() == text == document.render(new)
    assert read_capacity(capacity_file).config == new
    assert sorted(p.name for p in capacity_file.parent.iterdir()) == ["capacity-scheduler.xml"]


def test_an_invalid_config_is_refused_before_the_file_is_touched(capacity_file: Path) -> None:
    document = read_capacity(capacity_file)
    before = (capacity_file.read_bytes(), capacity_file.stat().st_mtime_ns)
    broken = _with_sci_capacity(document, 20.0, 45.0)  # children of root add up to 115
    assert isinstance(broken, CapacitySchedulerConfig)
    with pytest.raises(ConfigValidationError) as caught:
        write_scheduler_file(capacity_file, broken, document)
    assert str(caught.value).startswith(f"{capacity_file}: root.capacity: ")
    assert (capacity_file.read_bytes(), capacity_file.stat().st_mtime_ns) == before


def test_removing_a_running_queue_is_refused_against_the_running_config(
    capacity_file: Path,
) -> None:
    document = read_capacity(capacity_file)
    config = document.config
    root = config.root
    default = replace(root.children[0], capacity=Percentage(50.0))
    without_sci = replace(config, root=replace(root, children=(default, root.children[1])))
    write_scheduler_file(capacity_file, without_sci, document)  # fine on its own
    with pytest.raises(ConfigValidationError, match=r"root\.sci\.state: RUNNING queue"):
        write_scheduler_file(capacity_file, without_sci, document, running=config)


def test_a_fresh_file_and_a_kind_mismatch(tmp_path: Path) -> None:
    fair_document = read_fair(FIXTURES / "fair-scheduler.xml")
    target = tmp_path / "new-fair.xml"
    write_scheduler_file(target, fair_document.config)
    assert read_fair(target).config == fair_document.config
    capacity_config = read_capacity(FIXTURES / "capacity-scheduler.xml").config
    with pytest.raises(ConfigFileError, match="cannot hold a capacity config"):
        write_scheduler_file(target, capacity_config, fair_document)


def test_an_unwritable_target_is_a_config_file_error(tmp_path: Path) -> None:
    # A regular file where the directory should be: unwritable even for root (ENOTDIR).
    not_a_directory = tmp_path / "conf"
    not_a_directory.write_text("")
    with pytest.raises(ConfigFileError, match="cannot write"):
        write_scheduler_file(
            not_a_directory / "fair.xml", read_fair(FIXTURES / "fair-scheduler.xml").config
        )


def test_write_to_a_missing_directory_is_a_config_file_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match="cannot write"):
        write_scheduler_file(
            tmp_path / "absent" / "fair.xml", read_fair(FIXTURES / "fair-scheduler.xml").config
        )


def test_read_scheduler_document_returns_the_typed_handle() -> None:
    assert isinstance(read_scheduler_document(FIXTURES / "fair-scheduler.xml"), FairDocument)
    capacity = read_scheduler_document(FIXTURES / "capacity-scheduler.xml")
    assert isinstance(capacity, CapacityDocument)
    assert capacity.source.endswith("capacity-scheduler.xml")
