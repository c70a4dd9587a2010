"""Hostile scheduler files: a DOCTYPE (entity expansion, an external entity, or an
entity that would silently read as empty) is refused with one line naming the file
and line, before parsing; a file over the size cap is refused before it is read
whole or parsed, and the cap can be raised."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from yarn_adapt.cli import main
from yarn_adapt.errors import ConfigFileError
from yarn_adapt.yarn.confxml import load_scheduler_config, parse_capacity_xml
from yarn_adapt.yarn.schedconf.xmlio import DEFAULT_MAX_BYTES, MAX_BYTES_ENV

LAUGHS = (
    '<?xml version="1.0"?>\n'
    '<!DOCTYPE configuration [\n <!ENTITY lol "lol">\n'
    + "".join(
        f' <!ENTITY lol{n} "{f"&lol{n - 1};" * 10 if n > 1 else "&lol;" * 10}">\n'
        for n in range(1, 10)
    )
    + "]>\n<configuration><property><name>yarn.scheduler.capacity.root.queues</name>"
    "<value>&lol9;</value></property></configuration>\n"
)
EMPTY_ENTITY = (
    '<?xml version="1.0"?>\n<!DOCTYPE allocations [<!ENTITY policy "">]>\n'
    '<allocations><queue name="a"><schedulingPolicy>&policy;</schedulingPolicy></queue>'
    "</allocations>\n"
)


@pytest.mark.parametrize("text", [LAUGHS, EMPTY_ENTITY], ids=["billion-laughs", "empty-entity"])
def test_a_doctype_is_refused_with_one_line_naming_file_and_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "scheduler.xml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as refused:
        load_scheduler_config(path)
    assert refused.value.one_line() == (
        f"{path}: line 2: a DOCTYPE declaration is not accepted in a scheduler file "
        "(its entities would be expanded, or read as empty); remove it"
    )


def test_a_doctype_in_utf16_is_refused_after_parsing_without_expansion() -> None:
    data = EMPTY_ENTITY.replace('version="1.0"', 'version="1.0" encoding="UTF-16"')
    with pytest.raises(ConfigFileError, match="a DOCTYPE declaration is not accepted"):
        parse_capacity_xml(data.encode("utf-16"), "utf16.xml")


def test_config_validate_refuses_a_doctype_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "capacity-scheduler.xml"
    path.write_text(LAUGHS)
    assert main(["config", "validate", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"yarn-adapt: {path}: line 2: a DOCTYPE declaration")
    assert error.count("\n") == 1


def big_file(path: Path, size: int) -> Path:
    comment = b"<!--" + b"x" * size + b"-->"
    path.write_bytes(b"<configuration>" + comment + b"</configuration>")
    return path


def test_a_file_over_the_size_cap_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = big_file(tmp_path / "capacity-scheduler.xml", 31 * 1024 * 1024)
    began = time.monotonic()
    with pytest.raises(ConfigFileError) as refused:
        load_scheduler_config(path)
    assert time.monotonic() - began < 5.0  # the 31 MB file of the issue took 12.7 s
    assert refused.value.one_line() == (
        f"{path}: larger than {DEFAULT_MAX_BYTES} bytes, the limit for a scheduler file "
        f"(raise ${MAX_BYTES_ENV} if it is really that large)"
    )


def test_the_size_cap_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = big_file(tmp_path / "capacity-scheduler.xml", 2000)
    monkeypatch.setenv(MAX_BYTES_ENV, "1000")
    with pytest.raises(ConfigFileError, match="larger than 1000 bytes"):
        load_scheduler_config(path)
    with pytest.raises(ConfigFileError, match="larger than 1000 bytes"):
        parse_capacity_xml(path.read_bytes(), str(path))
    monkeypatch.setenv(MAX_BYTES_ENV, "many")
    with pytest.raises(ConfigFileError, match=r"\$YARN_ADAPT_MAX_XML_BYTES: expected a number"):
        load_scheduler_config(path)
    monkeypatch.setenv(MAX_BYTES_ENV, "100000")
    with pytest.raises(ConfigFileError, match=r"no yarn\.scheduler\.capacity"):
        load_scheduler_config(path)  # read and parsed: only its content is wrong now
