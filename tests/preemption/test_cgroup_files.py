"""The cgroup file seam: a write the kernel holds up is named in the agent's log."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from preemption.cgroups import files
from preemption.cgroups.files import CgroupFiles


class Clock:
    """The seam's clock, moved only by the writes (a loaded machine cannot make an
    ordinary write look slow)."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def monotonic(self) -> float:
        return self.now_s


class HeldUp(CgroupFiles):
    """A write the kernel makes wait (as a cgroup.procs write waits for cgroup locks)."""

    def __init__(self, clock: Clock, wait_s: float) -> None:
        self.clock = clock
        self.wait_s = wait_s

    def raw_write(self, path: Path, value: str) -> None:
        self.clock.now_s += self.wait_s
        super().raw_write(path, value)


def test_a_slow_write_is_logged_with_its_file_value_and_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    monkeypatch.setattr(files, "time", SimpleNamespace(monotonic=clock.monotonic))
    target = tmp_path / "cgroup.procs"
    target.write_text("")
    with caplog.at_level(logging.WARNING, logger="preemption.cgroups.files"):
        HeldUp(clock, files.SLOW_WRITE_S + 1.5).write(target, "4242")
        HeldUp(clock, files.SLOW_WRITE_S / 2).write(target, "4243")
        CgroupFiles().write(target, "4244")
    assert target.read_text() == "4244"
    [record] = caplog.records
    message = record.getMessage()
    assert str(target) in message and "'4242'" in message
    assert f"took {files.SLOW_WRITE_S + 1.5:.1f} s" in message
