"""Replacing and removing the agent's files: the replaced file stays held until the
background closer lets it go, so the caller's rename or unlink never frees blocks
(with ext4's online discard, that waited seconds on the disk inside the agent's loop)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from preemption import lazyfree
from preemption.status import write_status


class HeldQueue(queue.Queue[int]):
    """The closer's queue, but its ``get`` waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def get(self, block: bool = True, timeout: float | None = None) -> int:
        self.go.wait()
        return super().get(block, timeout)


def deleted_held(path: Path) -> int:
    """How many of this process's descriptors hold a removed file once named ``path``."""
    held = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        held += target == f"{path} (deleted)"
    return held


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldQueue]:
    pending = HeldQueue()
    monkeypatch.setattr(lazyfree, "_pending", pending)
    monkeypatch.setattr(lazyfree, "_closer", None)
    yield pending
    pending.go.set()


def wait_for(probe: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_replaced_file_is_let_go_by_the_closer_not_by_the_rename(
    tmp_path: Path, held: HeldQueue
) -> None:
    path = tmp_path / "status.json"
    write_status(path, {"round": 1})
    write_status(path, {"round": 2})  # the first one: renamed over, still held
    assert path.read_text().startswith('{\n "round": 2')
    assert deleted_held(path) == 1 and lazyfree.pending() == 1
    held.go.set()
    wait_for(lambda: deleted_held(path) == 0)


def test_a_removed_file_is_let_go_by_the_closer(tmp_path: Path, held: HeldQueue) -> None:
    path = tmp_path / "state.json"
    path.write_text("{}")
    lazyfree.remove(path)
    lazyfree.remove(path)  # gone already: nothing to hold
    assert not path.exists() and deleted_held(path) == 1
    held.go.set()
    wait_for(lambda: deleted_held(path) == 0)


def test_past_the_bound_the_caller_lets_go_itself(
    tmp_path: Path, held: HeldQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lazyfree, "MAX_PENDING", 1)
    path = tmp_path / "status.json"
    for round_ in range(4):
        write_status(path, {"round": round_})
    assert deleted_held(path) == 1  # one waits for the closer; the others were closed here
