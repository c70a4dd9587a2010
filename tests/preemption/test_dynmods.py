"""Whether the host's cgroup mounts spare a process move its RCU wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from preemption.cgroups.dynmods import favours_dynamic_moves, slow_moves_warning

V1_AND_UNIFIED = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


@pytest.mark.parametrize(
    ("mounts", "favoured"),
    [
        (V1_AND_UNIFIED, False),
        (V1_AND_UNIFIED.replace("cgroup2 rw,relatime", "cgroup2 rw,relatime,favordynmods"), True),
        ("cgroup /sys/fs/cgroup/cpu cgroup rw,cpu,favordynmods 0 0\n", True),
        ("cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate,memory_recursiveprot 0 0\n", False),
        # an option of another file system, or a word inside another option, is not it
        ("tmpfs /x tmpfs rw,favordynmods 0 0\n", False),
        ("cgroup2 /sys/fs/cgroup cgroup2 rw,nofavordynmods 0 0\n", False),
        ("", False),
        ("garbage\ncgroup2 /short\n", False),
    ],
)
def test_only_a_cgroup_mount_with_the_option_counts(mounts: str, favoured: bool) -> None:
    assert favours_dynamic_moves(mounts) is favoured
    warning = slow_moves_warning(mounts)
    assert (warning is None) is favoured
    if warning is not None:
        assert "favordynmods" in warning and "RCU" in warning


def test_this_hosts_mounts_parse() -> None:
    mounts = Path("/proc/mounts").read_text(encoding="utf-8")
    assert isinstance(favours_dynamic_moves(mounts), bool)
