"""Testbed sweeps for the per-core interference model
(:mod:`yarn_adapt.cosim.interference`).

``python -m yarn_adapt.testbed.sweep --out SWEEP.json`` runs the testbed's CPU-heavy
service (``pricing``, :mod:`yarn_adapt.testbed.services`, tracing to a real Redis)
alone on CPU 0 under the testbed's open-loop load generator (on CPU 1), and beside it,
cell by cell, the testbed's batch burners (:mod:`yarn_adapt.testbed.burner`):

* ``threads`` CPU burners on the service's core (0, 1, 2, 4);
* under one of three CPU weightings (``weights``), the service's group at 1024:
  ``yarn`` (YARN's hierarchy: ``hadoop-yarn`` at 1024, each container 1024 below it,
  as CGroupsCpuResourceHandlerImpl makes it), ``flat`` (each container a group of
  1024 beside the service, as when batch runs outside a hierarchy) and ``low`` (the
  hierarchy at the lowest weight, as the node agent sets it while no latency-critical
  container runs in it);
* ``hogs`` memory-copy burners (64 MB array copies) on the other core (0 or 1): the
  memory-bandwidth term, apart from CPU sharing.

Each round goes through every cell once in a shuffled order at one request rate
(``--rates``, one per round), so rounds are separated in time: the fit
(:mod:`yarn_adapt.cosim.core_calibration`) holds the last round out. Per window the
JSON has the cell, its :class:`~yarn_adapt.cosim.interference.CorePressure` terms, the
request rate the service completed, the median CPU time per request (the service
time) and the P95 of the service's own work's wall time (its queueing for the
interpreter and the CPU included), and the CPU the burners used. Needs root and a
writable cgroup ``cpu`` controller (v1 ``cpu.shares`` or v2 ``cpu.weight``) and two
CPUs.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from yarn_adapt.minicluster.redis_server import RedisServer, free_port
from yarn_adapt.testbed.cluster import await_answer
from yarn_adapt.testbed.results import Window, service_figures, stats_records
from yarn_adapt.testbed.services import LAYOUT
from yarn_adapt.testbed.usage import cpu_seconds

BURNER = Path(__file__).with_name("burner.py")
SERVICE_CPU, OTHER_CPU = 0, 1
SERVICE_SHARES = 1024
CONTAINER_SHARES = 1024  # one vcore, CGroupsCpuResourceHandlerImpl's weight
LOWEST_SHARES = 2  # cgroup v1's lowest cpu.shares, the agent's low weight
WEIGHTINGS = ("yarn", "flat", "low")
THREADS = (0, 1, 2, 4)
HOGS = (0, 1)


@dataclass(frozen=True)
class Cell:
    threads: int
    weights: str
    hogs: int


def cells(threads: Sequence[int] = THREADS, hogs: Sequence[int] = HOGS) -> list[Cell]:
    """Every combination; the weighting only matters with burners on the core."""
    out = []
    for hog in hogs:
        for count in threads:
            for weighting in WEIGHTINGS if count else ("none",):
                out.append(Cell(count, weighting, hog))
    return out


def pressure_of(cell: Cell, node_cores: int = 2) -> dict[str, float]:
    """The cell's per-core pressure terms (:class:`CorePressure` fields)."""
    if cell.threads == 0:
        weighted = 0.0
    elif cell.weights == "yarn":
        weighted = CONTAINER_SHARES / SERVICE_SHARES  # the hierarchy weighs as one group
    elif cell.weights == "flat":
        weighted = cell.threads * CONTAINER_SHARES / SERVICE_SHARES
    else:
        weighted = LOWEST_SHARES / SERVICE_SHARES
    return {"weighted": weighted, "threads": float(cell.threads), "hogs": cell.hogs / node_cores}


# --------------------------------------------------------------------------- cgroups


class CpuGroups:
    """The sweep's ``cpu`` cgroups below the root: ``service``, ``hadoop-yarn/cN``
    and flat ``cN`` (v1 ``cpu.shares``, v2 ``cpu.weight``)."""

    def __init__(self, name: str) -> None:
        v1 = Path("/sys/fs/cgroup/cpu")
        self.v2 = not (v1 / "cpu.shares").exists()
        self.root = (Path("/sys/fs/cgroup") if self.v2 else v1) / name
        self.made: list[Path] = []

    def group(self, relpath: str, shares: int) -> Path:
        path = self.root / relpath
        for part in [*reversed(path.relative_to(self.root).parents), path.relative_to(self.root)]:
            directory = self.root / part
            if not directory.exists():
                directory.mkdir()
                self.made.append(directory)
                if self.v2 and directory != path:
                    (directory / "cgroup.subtree_control").write_text("+cpu")
        self.set_shares(path, shares)
        return path

    def set_shares(self, group: Path, shares: int) -> None:
        if self.v2:
            weight = 1 + (max(2, shares) - 2) * 9999 // 262142
            (group / "cpu.weight").write_text(str(weight))
        else:
            (group / "cpu.shares").write_text(str(shares))

    @staticmethod
    def join(group: Path, pid: int) -> None:
        (group / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        top = self.root.parent
        for group in sorted(self.made, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (top / "cgroup.procs").write_text(pid)
                group.rmdir()


_LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _pinned(cpu: int) -> None:
    """In the child: run on ``cpu`` and die with the sweep (a burner left behind by a
    killed sweep would burn a CPU for good)."""
    os.sched_setaffinity(0, {cpu})
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _spawn(command: Sequence[str], cpu: int, log: Path | None = None) -> subprocess.Popen[bytes]:
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("ab")) if log is not None else subprocess.DEVNULL
        return subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: _pinned(cpu),
        )  # the child keeps its own copy of the log's descriptor


def _stop(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    for process in processes:
        process.wait(timeout=10)


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class SweepSettings:
    rates: tuple[float, ...] = (30.0, 60.0, 45.0)
    window_s: float = 5.0
    settle_s: float = 1.5
    threads: tuple[int, ...] = THREADS
    hogs: tuple[int, ...] = HOGS
    seed: int = 1


@dataclass(frozen=True)
class CellWindow:
    round: int
    rate_offered: float
    cell: Cell
    began_s: float
    ended_s: float
    burner_cpu_share: float  # the CPU burners' CPU seconds per wall second on the core


class Sweep:
    """The service, Redis and the load generator for one sweep."""

    def __init__(self, directory: Path, settings: SweepSettings) -> None:
        self.directory = directory
        self.settings = settings
        self.stats = directory / "pricing-stats.jsonl"
        self.groups = CpuGroups(f"yarn-adapt-sweep-{os.getpid()}")
        self.service_group = self.groups.group("service", SERVICE_SHARES)
        self.port = free_port()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        redis = RedisServer(self.directory / "redis").start()
        spec = next(s for s in LAYOUT if s.name == "pricing")
        service = _spawn(
            [sys.executable, "-m", "yarn_adapt.testbed.services", spec.name,
             "--port", str(self.port), "--host", "node0", "--redis", redis.url,
             "--prefix", "sweep", "--work", str(spec.work), "--stats", str(self.stats)],
            SERVICE_CPU, self.directory / "service.log",
        )  # fmt: skip
        try:
            self.groups.join(self.service_group, service.pid)
            await_answer(f"http://127.0.0.1:{self.port}/", 30.0)
            yield
        finally:
            _stop([service])
            redis.stop()
            self.groups.remove()

    def round(self, index: int, rate: float) -> list[CellWindow]:
        order = cells(self.settings.threads, self.settings.hogs)
        random.Random(self.settings.seed * 1000 + index).shuffle(order)
        per_cell = self.settings.settle_s + self.settings.window_s
        load = _spawn(
            [sys.executable, "-m", "yarn_adapt.testbed.loadgen",
             "--target", f"http://127.0.0.1:{self.port}/", "--rate", str(rate),
             "--duration", str(per_cell * len(order) + 30), "--seed", str(index),
             "--out", str(self.directory / f"load-{index}.jsonl")],
            OTHER_CPU,
        )  # fmt: skip
        try:
            time.sleep(2.0)  # the generator's start-up
            return [self._cell(index, rate, cell) for cell in order]
        finally:
            load.send_signal(signal.SIGTERM)
            load.wait(timeout=30)

    def _cell(self, index: int, rate: float, cell: Cell) -> CellWindow:
        burners = [self._burner("cpu", SERVICE_CPU) for _ in range(cell.threads)]
        for number, burner in enumerate(burners):
            self.groups.join(self._container_group(cell.weights, number), burner.pid)
        hogs = [self._burner("memory", OTHER_CPU) for _ in range(cell.hogs)]
        try:
            time.sleep(self.settings.settle_s)
            before = _cpu(burners)
            began = time.time()
            time.sleep(self.settings.window_s)
            ended = time.time()
            used = _cpu(burners) - before
        finally:
            _stop([*burners, *hogs])
        return CellWindow(index, rate, cell, began, ended, used / (ended - began))

    def _burner(self, kind: str, cpu: int) -> subprocess.Popen[bytes]:
        return _spawn([sys.executable, str(BURNER), "1000000", kind], cpu)

    def _container_group(self, weights: str, number: int) -> Path:
        if weights == "flat":
            return self.groups.group(f"c{number}", CONTAINER_SHARES)
        hierarchy = LOWEST_SHARES if weights == "low" else CONTAINER_SHARES
        self.groups.group("hadoop-yarn", hierarchy)
        return self.groups.group(f"hadoop-yarn/c{number}", CONTAINER_SHARES)


def _cpu(processes: Sequence[subprocess.Popen[bytes]]) -> float:
    return sum(cpu_seconds(p.pid) or 0.0 for p in processes)


# --------------------------------------------------------------------------- figures


def window_figures(
    window: CellWindow, stats: Sequence[tuple[float, float, float]]
) -> dict[str, object]:
    """One window's JSON: the service's requests whose own work began within it."""
    found = service_figures("pricing", 0, stats, Window("sweep", window.began_s, window.ended_s))
    measured = found.requests > 0
    return {
        "round": window.round,
        "cell": asdict(window.cell),
        "pressure": pressure_of(window.cell),
        "rate_offered": window.rate_offered,
        "rate_rps": round(found.rate_rps, 2),
        "requests": found.requests,
        "cpu_ms_median": round(found.cpu_ms_median, 4) if measured else None,
        "p95_ms": round(found.self_p95_ms, 3) if measured else None,
        "burner_cpu_share": round(window.burner_cpu_share, 3),
    }


def run(settings: SweepSettings, directory: Path) -> dict[str, object]:
    if (os.cpu_count() or 1) < 2:
        raise RuntimeError("the sweep needs two CPUs (the service's and the load's)")
    sweep = Sweep(directory, settings)
    windows: list[CellWindow] = []
    with sweep.running():
        for index, rate in enumerate(settings.rates):
            windows.extend(sweep.round(index, rate))
    stats = stats_records(sweep.stats)
    return {
        "sweep": "yarn_adapt.testbed.sweep",
        "service": "pricing",
        "cgroup": "v2" if sweep.groups.v2 else "v1",
        "settings": asdict(settings),
        "windows": [window_figures(w, stats) for w in windows],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m yarn_adapt.testbed.sweep")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rates", default="30,60,45", help="requests/s, one per round")
    parser.add_argument("--window", type=float, default=5.0, help="seconds")
    parser.add_argument("--threads", default="0,1,2,4")
    parser.add_argument("--hogs", default="0,1")
    parser.add_argument("--seed", type=int, default=1, help="the cells' order")
    args = parser.parse_args(argv)
    settings = SweepSettings(
        rates=tuple(float(v) for v in args.rates.split(",")),
        window_s=args.window,
        threads=tuple(int(v) for v in args.threads.split(",")),
        hogs=tuple(int(v) for v in args.hogs.split(",")),
        seed=args.seed,
    )
    os.sched_setaffinity(0, {OTHER_CPU})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the cleanup runs
    with tempfile.TemporaryDirectory(prefix="yarn-adapt-sweep-") as scratch:
        result = run(settings, Path(scratch))
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"sweep: {len(result['windows'])} windows -> {args.out}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
