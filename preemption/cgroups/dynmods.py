"""Whether moving a process between cgroups waits for the kernel's RCU.

Every write to ``cgroup.procs`` takes the kernel's threadgroup lock for writing. Unless
some cgroup hierarchy is mounted with ``favordynmods`` (Linux 6.0 and later, v1 and v2;
one mount is enough, the lock is global), taking it waits for an RCU grace period. That
is milliseconds on a quiet host and, on a host whose CPUs are starved (an oversubscribed
virtual machine), tens of seconds: an agent adopting the containers of the
DefaultContainerExecutor then spends its tick in the kernel, uninterruptible, while
batch runs unsqueezed. ``favordynmods`` trades that wait for slightly dearer forks and
exits, the kernel's own answer for hosts that move processes often.
"""

from __future__ import annotations

CGROUP_FILESYSTEMS = ("cgroup", "cgroup2")
ADVICE = (
    "no cgroup hierarchy is mounted with favordynmods: each process the agent moves "
    "waits for an RCU grace period (seconds on a starved host); on Linux 6.0+ run "
    "`mount -o remount,favordynmods <the cgroup2 mount>` (docs/colocation.md, section 5)"
)


def favours_dynamic_moves(mounts_text: str) -> bool:
    """True when a cgroup mount in the text of ``/proc/mounts`` has ``favordynmods``."""
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[2] not in CGROUP_FILESYSTEMS:
            continue
        if "favordynmods" in fields[3].split(","):
            return True
    return False


def slow_moves_warning(mounts_text: str) -> str | None:
    """The warning an agent that moves processes gives at start, or None."""
    return None if favours_dynamic_moves(mounts_text) else ADVICE
