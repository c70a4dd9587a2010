"""cgroup v1 cpusets that pin each NodeManager (and every container it starts) to its
own CPUs, so NodeManagers on one host behave as separate machines.

Layout: ``/sys/fs/cgroup/cpuset/yarn-adapt-<cluster dir name>/nm-<i>``. The parent
takes the root's memory nodes and CPUs; each child its spec's CPU list. A daemon
joins its cpuset before ``exec`` (a ``sh`` wrapper writes its own pid into
``cgroup.procs``), so the JVM and everything it forks -- containers included -- run
there. A user of the cluster may also put work into a cgroup v1 ``cpu`` group with
a weight of its own (:func:`create_weight_group`; the testbed does, to stand apart
from other load on a shared host) and then must give the cluster's control plane
(the ResourceManager, the JobHistory Server, whatever drives the experiment) a group
of the same weight beside it (:func:`control_plane`): in the root group each of
their threads weighs as one ordinary task against the whole weight group, and with
the "machines" saturated they were starved for a minute at a time (REST calls timed
out, an agent took minutes to act and to die). :func:`remove` deletes the groups
once their processes are gone; the reaper does the same after an owner that died
without stopping the cluster.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from yarn_adapt.minicluster.errors import MiniClusterError

ROOT_ENV = "YARN_ADAPT_CPUSET_ROOT"
DEFAULT_ROOT = Path("/sys/fs/cgroup/cpuset")
CPU_ROOT_ENV = "YARN_ADAPT_CPU_CGROUP_ROOT"
DEFAULT_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
JOIN_SCRIPT = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
JOIN_MANY_SCRIPT = (
    'while [ "$1" != "--" ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; '
    'shift; exec "$@"'
)


def cpuset_root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def group_for(cluster_root: Path) -> Path:
    """The cluster's parent cpuset (it may not exist)."""
    return cpuset_root() / f"yarn-adapt-{cluster_root.name}"


def create(cluster_root: Path, cpus: Sequence[str]) -> list[Path]:
    """One cpuset per entry of ``cpus`` (e.g. ``["0", "1"]``) under the cluster's group."""
    root = cpuset_root()
    if not (root / "cpuset.cpus").exists():
        raise MiniClusterError(f"no writable cgroup v1 cpuset hierarchy at {root}")
    parent = group_for(cluster_root)
    try:
        parent.mkdir(exist_ok=True)
        _write(parent / "cpuset.cpus", _read(root / "cpuset.cpus"))
        _write(parent / "cpuset.mems", _read(root / "cpuset.mems"))
        children = []
        for index, cpu_list in enumerate(cpus):
            child = parent / f"nm-{index}"
            child.mkdir(exist_ok=True)
            _write(child / "cpuset.cpus", cpu_list)
            _write(child / "cpuset.mems", _read(root / "cpuset.mems"))
            children.append(child)
    except OSError as exc:
        remove(cluster_root)
        raise MiniClusterError(f"cannot create the cpusets under {parent}: {exc}") from exc
    return children


def wrap(command: Sequence[str], group: Path) -> list[str]:
    """``command`` run inside ``group`` (joined before exec, so every child is in it)."""
    return ["/bin/sh", "-c", JOIN_SCRIPT, str(group), *command]


def wrap_many(command: Sequence[str], groups: Sequence[Path]) -> list[str]:
    """``command`` run inside every group of ``groups`` (one per hierarchy)."""
    return ["/bin/sh", "-c", JOIN_MANY_SCRIPT, "sh", *map(str, groups), "--", *command]


def join(pid: int, group: Path) -> None:
    """Move a running process (all its threads) into ``group``."""
    _write(group / "cgroup.procs", str(pid))


def tasks(group: Path) -> list[int]:
    try:
        return [int(line) for line in _read(group / "cgroup.procs").split()]
    except OSError:
        return []


# --------------------------------------------------------------------------- cpu weight


def cpu_root() -> Path:
    return Path(os.environ.get(CPU_ROOT_ENV) or DEFAULT_CPU_ROOT)


def weight_group_for(cluster_root: Path) -> Path:
    """A cgroup v1 ``cpu`` group for the cluster's work (it may not exist)."""
    return cpu_root() / f"yarn-adapt-{cluster_root.name}"


def create_weight_group(cluster_root: Path, shares: int) -> Path:
    """A ``cpu`` group with ``cpu.shares`` = ``shares`` (1024 is one ordinary task)."""
    return _cpu_group(weight_group_for(cluster_root), shares)


def _cpu_group(group: Path, shares: int) -> Path:
    """``group`` made (if need be) with ``cpu.shares`` = ``shares``."""
    try:
        group.mkdir(exist_ok=True)
        _write(group / "cpu.shares", str(shares))
    except OSError as exc:
        raise MiniClusterError(f"cannot create the cpu cgroup {group}: {exc}") from exc
    return group


def control_group_for(cluster_root: Path) -> Path:
    """The ``cpu`` group of the cluster's control plane (it may not exist)."""
    return cpu_root() / f"yarn-adapt-{cluster_root.name}-control"


@contextlib.contextmanager
def control_plane(cluster_root: Path, shares: int, pids: Sequence[int]) -> Iterator[Path]:
    """``pids`` (and every process they start meanwhile) in a ``cpu`` group of weight
    ``shares``; afterwards each goes back to the ``cpu`` group it came from."""
    group = _cpu_group(control_group_for(cluster_root), shares)
    origins = {pid: cpu_group_of(pid) for pid in pids}
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                join(pid, group)
        yield group
    finally:
        for pid in tasks(group):
            with contextlib.suppress(OSError):  # exited meanwhile, or its group went
                join(pid, origins.get(pid) or cpu_root())
        _rmdir(group, time.monotonic() + 5.0)


def cpu_group_of(pid: int) -> Path | None:
    """The ``cpu`` group ``pid`` is in now (None when it cannot be read)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return cpu_root() / path.lstrip("/")
    return None


def release_weight_group(cluster_root: Path) -> None:
    """Move what still runs in the cluster's ``cpu`` group back to the root; delete it."""
    group = weight_group_for(cluster_root)
    if not group.is_dir():
        return
    for pid in tasks(group):
        try:
            join(pid, cpu_root())
        except OSError:
            continue  # exited meanwhile
    _rmdir(group, time.monotonic() + 5.0)


def remove(cluster_root: Path, timeout_s: float = 10.0) -> None:
    """Delete the cluster's cpusets (children first) and its ``cpu`` group; waits for
    exiting processes."""
    deadline = time.monotonic() + timeout_s
    for weight in (weight_group_for(cluster_root), control_group_for(cluster_root)):
        if weight.is_dir():
            _rmdir(weight, deadline)
    parent = group_for(cluster_root)
    if not parent.is_dir():
        return
    for group in [*sorted(p for p in parent.iterdir() if p.is_dir()), parent]:
        _rmdir(group, deadline)


def _rmdir(group: Path, deadline: float) -> None:
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    with path.open("w") as stream:
        stream.write(value)
