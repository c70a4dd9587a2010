"""The cgroup file seam: a write the kernel holds up is named in the agent's log."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from preemption.cgroups import files
from preemption.cgroups.files import CgroupFiles


class HeldUp(CgroupFiles):
    """A write the kernel makes wait (as a cgroup.procs write waits for cgroup locks)."""

    def raw_write(self, path: Path, value: str) -> None:
        time.sleep(0.05)
        super().raw_write(path, value)


def test_a_slow_write_is_logged_with_its_file_value_and_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(files, "SLOW_WRITE_S", 0.01)
    target = tmp_path / "cgroup.procs"
    target.write_text("")
    with caplog.at_level(logging.WARNING, logger="preemption.cgroups.files"):
        HeldUp().write(target, "4242")
        CgroupFiles().write(target, "4243")
    assert target.read_text() == "4243"
    [record] = caplog.records
    assert str(target) in record.getMessage() and "'4242'" in record.getMessage()
    assert " s" in record.getMessage()
