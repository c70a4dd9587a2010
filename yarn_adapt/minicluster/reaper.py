"""Watchdog process: ``python -m yarn_adapt.minicluster.reaper OWNER_PID TICKS ROOT``.

Polls once a second whether the owning Python process (pid plus start time, so a
reused pid does not count) is alive; when it is not, kills every process tied to the
cluster directory ROOT, removes its NodeManagers' cpusets, and exits.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from yarn_adapt.minicluster import cpusets
from yarn_adapt.minicluster.processes import kill_marked_processes, process_start_ticks

POLL_S = 1.0


def owner_alive(pid: int, ticks: int) -> bool:
    try:
        return process_start_ticks(pid) == ticks
    except (OSError, ValueError, IndexError):
        return False


def main(argv: list[str]) -> int:
    owner, ticks, root = int(argv[0]), int(argv[1]), Path(argv[2])
    while owner_alive(owner, ticks) and root.exists():
        time.sleep(POLL_S)
    if root.exists():
        kill_marked_processes(root)
    cpusets.remove(root)  # the NodeManagers' cpusets, if the cluster had any
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
