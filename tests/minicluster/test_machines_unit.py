"""The machine views' files: the node's CPUs only, and one length whatever the values
(they are rewritten in place under a bind mount)."""

from __future__ import annotations

from yarn_adapt.minicluster.machines import (
    cpu_list,
    cpuinfo_text,
    meminfo_text,
    per_cpu_times,
    stat_text,
)

PROC_STAT = """cpu  30 0 6 100 0 0 0 0 0 0
cpu0 10 0 2 50 0 0 0 0 0 0
cpu1 20 0 4 50 0 0 0 0 0 0
intr 1 2 3
ctxt 99
btime 1700000000
"""


def test_a_cpuset_list_names_its_cpus() -> None:
    assert cpu_list("0-2,5") == [0, 1, 2, 5]
    assert cpu_list("3") == [3]


def test_the_aggregate_line_is_the_nodes_cpus_alone() -> None:
    times = per_cpu_times(PROC_STAT)
    lines = stat_text([1], times).splitlines()
    assert [int(v) for v in lines[0].split()[1:5]] == [20, 0, 4, 50]
    assert lines[1].split()[0] == "cpu0" and len(lines) == 2
    both = stat_text([0, 1], times).splitlines()
    assert [int(v) for v in both[0].split()[1:5]] == [30, 0, 6, 100]


def test_the_files_keep_one_length() -> None:
    small = per_cpu_times("cpu0 1 0 1 1 0 0 0 0 0 0\n")
    large = per_cpu_times("cpu0 123456789 0 98765 4444444444 0 0 0 0 0 0\n")
    assert len(stat_text([0], small)) == len(stat_text([0], large))
    assert len(meminfo_text(6144, 0)) == len(meminfo_text(6144, 5_000_000))
    assert "MemFree:" in meminfo_text(6144, 8_000_000)  # never negative
    assert cpuinfo_text([4, 5]).count("processor") == 2
