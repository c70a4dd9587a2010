"""Batch work for the testbed: burn a fixed amount of CPU, then exit 0.

``python burner.py CPU_SECONDS`` loops until the process has used CPU_SECONDS of CPU
time (not wall time: under contention it simply takes longer, as a real CPU-bound
task does). Run by distributed-shell containers; standalone on purpose (stdlib only,
no package import), so a container needs nothing but a Python interpreter.
"""

import sys
import time


def main() -> int:
    work_s = float(sys.argv[1])
    total = 0
    while time.process_time() < work_s:
        for value in range(20_000):
            total += value & 7
    return 0 if total >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
