"""Resources: the two dimensions YARN schedules, memory in MiB and virtual cores."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Resources:
    """An amount of memory (MiB) and virtual cores. Never negative once built by
    :meth:`clamped`; arithmetic may go negative on purpose (deficits)."""

    memory_mb: int
    vcores: int

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.memory_mb + other.memory_mb, self.vcores + other.vcores)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.memory_mb - other.memory_mb, self.vcores - other.vcores)

    def __mul__(self, factor: float) -> Resources:
        return Resources(int(self.memory_mb * factor), int(self.vcores * factor))

    __rmul__ = __mul__

    def fits_in(self, other: Resources) -> bool:
        """True when both dimensions are no larger than ``other``'s."""
        return self.memory_mb <= other.memory_mb and self.vcores <= other.vcores

    def clamped(self) -> Resources:
        """Negative dimensions raised to zero."""
        return Resources(max(self.memory_mb, 0), max(self.vcores, 0))

    def component_min(self, other: Resources) -> Resources:
        return Resources(min(self.memory_mb, other.memory_mb), min(self.vcores, other.vcores))

    def component_max(self, other: Resources) -> Resources:
        return Resources(max(self.memory_mb, other.memory_mb), max(self.vcores, other.vcores))

    @property
    def is_zero(self) -> bool:
        return self.memory_mb == 0 and self.vcores == 0

    def dominant_share(self, total: Resources) -> float:
        """The larger of the two shares of ``total`` (DRF's dominant share)."""
        shares = [
            self.memory_mb / total.memory_mb if total.memory_mb > 0 else 0.0,
            self.vcores / total.vcores if total.vcores > 0 else 0.0,
        ]
        return max(shares)

    def containers_of(self, container: Resources) -> int:
        """How many whole ``container``-sized allocations fit in this amount."""
        by_memory = self.memory_mb // container.memory_mb if container.memory_mb else 10**9
        by_vcores = self.vcores // container.vcores if container.vcores else 10**9
        return max(0, min(by_memory, by_vcores))

    def __str__(self) -> str:
        return f"<memory:{self.memory_mb}MB, vCores:{self.vcores}>"


NO_RESOURCES = Resources(0, 0)
