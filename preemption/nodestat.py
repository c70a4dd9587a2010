"""The node's CPU and memory as the kernel counts them: ``/proc/stat`` and ``/proc/meminfo``.

CPU: the per-CPU lines of ``/proc/stat`` (``cpuN user nice system idle iowait irq
softirq steal guest guest_nice``, in clock ticks) summed over the node's CPUs; busy is
everything but ``idle`` and ``iowait`` (``guest`` time is already in ``user``). The
use over an interval is ``busy / total`` of the ticks that passed, times the number
of CPUs: a ratio of two counters read together, so the agent's own timing does not
enter it. Memory: ``MemTotal`` and ``MemAvailable``.

``root`` is ``/proc``; tests point it at a directory of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from preemption.errors import NodeStatError
from preemption.isolation import MemoryInfo

_IDLE_FIELDS = (3, 4)  # idle, iowait (after the "cpuN" name)
_COUNTED_FIELDS = 8  # user .. steal; guest and guest_nice are inside user and nice


@dataclass(frozen=True)
class CpuTicks:
    """Cumulative ticks of the node's CPUs: busy and in total."""

    cpus: int
    busy: int
    total: int


def used_millicores(before: CpuTicks, after: CpuTicks) -> float:
    """The node's CPU use between two readings."""
    total = after.total - before.total
    if total <= 0:
        return 0.0
    busy = max(0, after.busy - before.busy)
    return min(1.0, busy / total) * after.cpus * 1000.0


def parse_cpu_ticks(text: str, cpus: frozenset[int], where: str = "/proc/stat") -> CpuTicks:
    """The ticks of ``cpus`` (empty: every CPU) from the text of ``/proc/stat``."""
    per_cpu: dict[int, tuple[int, int]] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        fields = [int(v) for v in rest.split()[:_COUNTED_FIELDS]]
        idle = sum(fields[i] for i in _IDLE_FIELDS if i < len(fields))
        per_cpu[int(name[3:])] = (sum(fields) - idle, sum(fields))
    wanted = cpus or frozenset(per_cpu)
    missing = sorted(wanted - set(per_cpu))
    if missing or not wanted:
        shown = ", ".join(map(str, missing)) or "any"
        raise NodeStatError(f"{where}: no line for CPU {shown} ([suppress] cpus)")
    busy = sum(per_cpu[cpu][0] for cpu in wanted)
    total = sum(per_cpu[cpu][1] for cpu in wanted)
    return CpuTicks(len(wanted), busy, total)


def parse_meminfo(text: str, where: str = "/proc/meminfo") -> MemoryInfo:
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name] = int(parts[0])  # kB
    if "MemTotal" not in values or "MemAvailable" not in values:
        raise NodeStatError(f"{where}: no MemTotal or MemAvailable (a kernel before 3.14?)")
    return MemoryInfo(values["MemTotal"] // 1024, values["MemAvailable"] // 1024)


class NodeStat:
    """Reads the node's counters (``root`` is ``/proc``)."""

    def __init__(self, root: Path = Path("/proc")) -> None:
        self.root = root

    def cpu(self, cpus: frozenset[int]) -> CpuTicks:
        path = self.root / "stat"
        return parse_cpu_ticks(self._read(path), cpus, str(path))

    def memory(self) -> MemoryInfo:
        path = self.root / "meminfo"
        return parse_meminfo(self._read(path), str(path))

    def all_cpus(self) -> frozenset[int]:
        text = self._read(self.root / "stat")
        return frozenset(
            int(line.split()[0][3:])
            for line in text.splitlines()
            if line.startswith("cpu") and not line.startswith("cpu ")
        )

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text()
        except OSError as exc:
            raise NodeStatError(f"{path}: cannot read: {exc.strerror or exc}") from exc
