"""Batch work for the testbed: use a fixed amount of CPU, then exit 0.

``python burner.py CPU_SECONDS [cpu|memory|mix]`` works until the process has used
CPU_SECONDS of CPU time (not wall time: under contention it simply takes longer, as a
real task does). ``cpu`` (the default) loops on arithmetic in the core's own caches;
``memory`` copies one 64 MB buffer into another over and over, a memory-bandwidth hog
(its CPU time is mostly stalls on the memory bus, which the services share); ``mix``
is ``memory`` in the containers whose id ends in an odd number and ``cpu`` in the
others (``CONTAINER_ID``, which YARN sets in every container). Run by
distributed-shell containers; standalone on purpose (stdlib only, no package import),
so a container needs nothing but a Python interpreter.
"""

import os
import sys
import time

BUFFER_BYTES = 64 * 1024 * 1024


def burn_cpu(work_s: float) -> int:
    total = 0
    while time.process_time() < work_s:
        for value in range(20_000):
            total += value & 7
    return total


def copy_memory(work_s: float) -> int:
    source = bytearray(os.urandom(4096)) * (BUFFER_BYTES // 4096)
    target = bytearray(BUFFER_BYTES)
    copies = 0
    while time.process_time() < work_s:
        target[:] = source
        copies += 1
    return copies


def kind_of(mode: str, container_id: str) -> str:
    """``cpu`` or ``memory`` for this container."""
    if mode != "mix":
        return mode
    digits = container_id.rstrip()[-1:]
    return "memory" if digits.isdigit() and int(digits) % 2 == 1 else "cpu"


def main() -> int:
    work_s = float(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    if mode not in ("cpu", "memory", "mix"):
        print(f"burner: mode {mode!r}: expected cpu, memory or mix", file=sys.stderr)
        return 2
    kind = kind_of(mode, os.environ.get("CONTAINER_ID", ""))
    done = copy_memory(work_s) if kind == "memory" else burn_cpu(work_s)
    return 0 if done >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
