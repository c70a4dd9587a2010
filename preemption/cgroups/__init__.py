"""Cgroup backends: v1 and v2 on a host, and the interface the simulator's backend
also implements (:class:`~preemption.cgroups.base.CgroupBackend`)."""

from preemption.cgroups.base import Cgroup, CgroupBackend, MemoryPolicy, Originals, Usage
from preemption.cgroups.files import CgroupFiles
from preemption.cgroups.v1 import V1Backend
from preemption.cgroups.v2 import V2Backend

__all__ = [
    "Cgroup",
    "CgroupBackend",
    "CgroupFiles",
    "MemoryPolicy",
    "Originals",
    "Usage",
    "V1Backend",
    "V2Backend",
]
