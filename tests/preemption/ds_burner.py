"""A distributed-shell container's work for the live agent test.

``ds_burner.py DIR SECONDS``: the first container to claim ``DIR/falter`` is the
*falterer*: it burns CPU until the agent's CFS quota on its cgroup falls to 0.6 core
or less, then stops working (a task that hangs when squeezed too far). Every other
container is *steady*: it burns SECONDS of CPU time and exits 0. Each writes
``DIR/role-<container id>``, and a steady one ``DIR/done-<container id>`` when done.
"""

import os
import sys
import time
from pathlib import Path

directory, seconds = Path(sys.argv[1]), float(sys.argv[2])
container = os.environ.get("CONTAINER_ID", f"pid-{os.getpid()}")
try:
    (directory / "falter").mkdir()
    role = "falter"
except FileExistsError:
    role = "steady"
(directory / f"role-{container}").write_text(role)


def quota_cores() -> float:
    quota = quota_text()
    return float("inf") if quota == "-1" else int(quota) / 100_000


def quota_text() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            file = Path("/sys/fs/cgroup/cpu") / path.lstrip("/") / "cpu.cfs_quota_us"
            return file.read_text().strip() if file.exists() else "-1"
    return "-1"


start = time.process_time()
checked = time.monotonic()
while True:
    for _ in range(20000):
        pass
    if role == "steady" and time.process_time() - start >= seconds:
        (directory / f"done-{container}").write_text(f"{time.process_time() - start:.2f}")
        sys.exit(0)
    if role == "falter" and time.monotonic() - checked > 0.05:
        checked = time.monotonic()
        if quota_cores() <= 0.6:
            time.sleep(300)  # hung: no more progress
