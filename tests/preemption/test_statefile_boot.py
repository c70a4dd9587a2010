"""The agent's state file outlives the agent, not the machine: it is written without
fsync (a rename is atomic to every process) and names its boot; a file of an earlier
boot, or one a power cut left unreadable before this boot, is set aside, not restored;
an unreadable file of this boot is still refused."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from preemption.cgroups import Cgroup
from preemption.errors import StateFileCorrupt
from preemption.statefile import BootClock, StateJournal

BACKEND = {"version": "v2", "root": "/sys/fs/cgroup"}


def boot_clock(tmp_path: Path, boot_id: str, started_at: float) -> BootClock:
    proc = tmp_path / f"proc-{boot_id}"
    (proc / "sys/kernel/random").mkdir(parents=True)
    (proc / "sys/kernel/random/boot_id").write_text(f"{boot_id}\n")
    (proc / "stat").write_text(f"cpu  1 2 3 4\nbtime {int(started_at)}\nprocesses 9\n")
    return BootClock(proc)


def journal_with_a_record(state: Path, boot: BootClock) -> StateJournal:
    journal = StateJournal(state, BACKEND, boot)
    journal.remember_original(Cgroup("hadoop-yarn/container_1"), "cpu.max", "max 100000")
    return journal


def test_the_real_boot_clock_reads_this_kernel() -> None:
    clock = BootClock()
    assert len(clock.boot_id()) == 36
    assert 0 < clock.started_at() <= Path("/proc/self").stat().st_mtime + 1


def test_a_record_of_this_boot_is_kept_and_names_the_boot(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    boot = boot_clock(tmp_path, "boot-a", started_at=0)
    journal_with_a_record(state, boot)
    assert json.loads(state.read_text())["boot"] == "boot-a"
    reopened = StateJournal.open(state, BACKEND, boot)
    assert reopened.original(Cgroup("hadoop-yarn/container_1"), "cpu.max") == "max 100000"


def test_a_record_of_an_earlier_boot_is_set_aside_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state.json"
    journal_with_a_record(state, boot_clock(tmp_path, "boot-a", started_at=0))
    with caplog.at_level(logging.WARNING, logger="preemption.statefile"):
        reopened = StateJournal.open(state, BACKEND, boot_clock(tmp_path, "boot-b", 0))
    assert reopened.empty and not state.exists()
    [aside] = tmp_path.glob("state.json.boot-*")
    assert json.loads(aside.read_text())["boot"] == "boot-a"  # kept, not lost
    assert "earlier boot (boot-a)" in caplog.text and aside.name in caplog.text


def test_a_file_without_a_boot_is_read_as_this_boots(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    content = {"format": 1, "backend": BACKEND, "created": ["yarn-adapt/c1"],
               "originals": [], "moved": []}  # fmt: skip
    state.write_text(json.dumps(content))
    reopened = StateJournal.open(state, BACKEND, boot_clock(tmp_path, "boot-b", 0))
    assert reopened.owns(Cgroup("yarn-adapt/c1"))


def test_an_unreadable_file_older_than_this_boot_is_a_power_cuts_leftover(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    state.write_text("")  # a rename that reached the disk before its data
    os.utime(state, (1_000, 1_000))
    reopened = StateJournal.open(state, BACKEND, boot_clock(tmp_path, "boot-b", 2_000))
    assert reopened.empty and not state.exists()
    assert (tmp_path / "state.json.boot-1000").read_text() == ""


def test_an_unreadable_file_of_this_boot_is_refused_and_left_in_place(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"format": 1, "backend": ')
    os.utime(state, (3_000, 3_000))
    with pytest.raises(StateFileCorrupt) as caught:
        StateJournal.open(state, BACKEND, boot_clock(tmp_path, "boot-b", 2_000))
    assert caught.value.one_line().startswith(f"{state}: ")
    assert state.exists()


def test_saving_never_waits_for_the_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(fd: int) -> None:
        raise AssertionError("fsync on the agent's loop")

    monkeypatch.setattr(os, "fsync", refuse)
    monkeypatch.setattr(os, "fdatasync", refuse)
    state = tmp_path / "state.json"
    journal = journal_with_a_record(state, boot_clock(tmp_path, "boot-a", 0))
    journal.forget_group(Cgroup("hadoop-yarn/container_1"))
    assert not state.exists()


def test_a_second_file_set_aside_keeps_the_first(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    for text in ("first", "second"):
        state.write_text(text)
        os.utime(state, (1_000, 1_000))
        StateJournal.open(state, BACKEND, boot_clock(tmp_path, f"boot-{text}", 2_000))
    assert (tmp_path / "state.json.boot-1000").read_text() == "first"
    assert (tmp_path / "state.json.boot-1000.1").read_text() == "second"
