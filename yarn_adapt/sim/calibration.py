"""YARN's fixed overheads around a distributed-shell application, and how they map
onto the simulator.

The simulator models scheduling: NodeManager heartbeats, per-heartbeat limits, queue
and user limits, the order in which the scheduler serves apps. It does not see the
time YARN and the application spend outside the scheduler. For a distributed-shell
(DS) ``sleep`` app the path from submission to finish is, with the RM and NM log
events that mark each step in brackets::

    submitted ──(scheduler: room, then a NodeManager heartbeat)──► AM container granted
        [RM: container _000001 NEW -> ALLOCATED]
    ── am_startup_s ──► the AM's container asks reach the RM
        (the AMLauncher starts the container, the AM JVM starts and registers
        [RM: "AM registration"], then its first allocate heartbeat carries the asks:
        the DS AM heartbeats every 1 s)
    ──(scheduler)──► a task container granted [RM: NEW -> ALLOCATED]
    ── container_launch_s ──► the process starts [NM: SCHEDULED -> RUNNING]
        (the AM picks the container up on its next allocate heartbeat and asks the
        NodeManager to start it)
    ── sleep_s + container_exit_s ──► the process exits [NM: RUNNING -> EXITED_*]
        (the NodeManager heartbeats out of band at once, so the RM frees the
        container and schedules on the node then)
    last exit ── am_teardown_s ──► the app's finishedTime
        (the AM learns of the exit on its next heartbeat, stops its NodeManager
        client and unregisters; YARN stamps finishedTime at unregistration)

Two behaviours of the distributed shell that change *who* gets a container are
simulator mechanisms rather than constants:

* its AM re-sends its ask one allocate call late (AMRMClient semantics), so the RM
  grants surplus containers that the AM releases a call later
  (``SimulationOptions.am_allocate_interval_s = am_heartbeat_s``);
* it starts the containers of one grant one after another
  (``container_start_spread_s``), so they end apart and each end is its own
  out-of-band heartbeat.

Mapping onto the simulator (:func:`simulation_options`, :func:`task_duration_s`):

* a task lasts ``container_launch_s + sleep_s + container_exit_s``: the container
  holds its resources from grant to exit, which is what the simulator charges;
* ``am_startup_s``, ``am_teardown_s`` as measured; ``heartbeat_interval_s =
  nm_heartbeat_s``; ``out_of_band_heartbeats=True``; ``am_allocate_interval_s =
  am_heartbeat_s``; ``container_start_spread_s`` as measured;
* Capacity Scheduler: ``off_switch_requests=True`` -- DS asks name no node or rack,
  so ``maximum-offswitch-assignments`` (1) caps grants per heartbeat;
* Fair Scheduler: ``fair_assign_multiple`` as the cluster's yarn-site says (the mini
  cluster sets ``yarn.scheduler.fair.assignmultiple=true``), and the cluster's
  rounding step from :func:`normalisation_step` (the Fair Scheduler rounds requests
  to the increment allocation, 1024 MiB by default).

How the values are measured (:func:`estimate_overheads`): the calibration scenario
(``yarn_adapt.bench.sim_fidelity.scenarios.CALIBRATION``) submits ten small DS apps every 2.5 s
into one queue with room for all of them and no per-heartbeat cap, so no app waits
for the scheduler, but AM JVMs start side by side as in the evaluated scenarios. The
RM and NM logs give each app's AM grant, AM registration, task grants, process starts
and exits, and the RM REST API its finishedTime. Each constant is the median over
the calibration apps:

* ``am_startup_s``: AM grant -> first task grant, less half a NodeManager heartbeat
  (an ask waits on average that long for the next heartbeat to serve it);
* ``container_launch_s``: task grant -> process start (includes the wait for the
  AM's next allocate call, 0-1 s);
* ``container_exit_s``: process run time beyond the command's own (``sleep``) time;
* ``am_teardown_s``: last task exit -> finishedTime;
* ``container_start_spread_s``: gap between the process starts of one app's
  containers granted in the same scheduler pass;
* ``am_registration_s``: AM grant -> AM registration (reported; part of
  ``am_startup_s``);
* ``nm_heartbeat_s``: the cluster's ``yarn.resourcemanager.nodemanagers.heartbeat-
  interval-ms``; ``am_heartbeat_s``: the DS AM's own constant (1 s).

:data:`RECORDED_OVERHEADS` holds one such measurement (``yarn-adapt bench
sim-fidelity --set calibrate=true`` makes and prints a fresh one). They are properties
of this host as much as of YARN: the AM's start is mostly JVM start-up, so it grows
when the host's cores are busy (AM registration took 1.7 s with apps one at a time
on an idle host, 2.2-2.4 s at the scenarios' pace, up to 8 s in bursts).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from yarn_adapt.errors import SettingsError
from yarn_adapt.sim.spec import SimulationOptions

SchedulerKind = Literal["capacity", "fair"]

# The distributed shell's ApplicationMaster creates its AMRMClientAsync with a
# 1000 ms heartbeat (ApplicationMaster.run, Hadoop 3.4).
DS_AM_HEARTBEAT_S = 1.0
# Grants to one app this close together came from the same scheduler pass.
SAME_GRANT_S = 0.02


@dataclass(frozen=True)
class YarnOverheads:
    """Fixed overheads of a DS app, in seconds (see the module docstring)."""

    nm_heartbeat_s: float
    am_startup_s: float
    container_launch_s: float
    container_exit_s: float
    am_teardown_s: float
    am_heartbeat_s: float = DS_AM_HEARTBEAT_S
    container_start_spread_s: float = 0.0
    am_registration_s: float = 0.0
    samples: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        if self.nm_heartbeat_s <= 0:
            raise SettingsError(f"yarn overheads: nm_heartbeat_s must be positive, got "
                                f"{self.nm_heartbeat_s}")  # fmt: skip
        for name in ("am_startup_s", "container_launch_s", "am_teardown_s"):
            if getattr(self, name) < 0:
                raise SettingsError(f"yarn overheads: {name} is negative ({getattr(self, name)})")


# Measured with ``yarn-adapt bench sim-fidelity --set calibrate=true`` on the
# development host (2 cores shared with other work, load average 5-7; Hadoop 3.4.x
# mini cluster of tests/hadoop/pom.xml on Java 17; one 4 GiB / 8-vcore NodeManager;
# NM heartbeat 500 ms; apps submitted through the RM REST API): the medians over
# the 10 calibration apps.
RECORDED_OVERHEADS = YarnOverheads(
    nm_heartbeat_s=0.5,
    am_startup_s=3.38,
    container_launch_s=1.01,
    container_exit_s=0.19,
    am_teardown_s=0.72,
    am_heartbeat_s=DS_AM_HEARTBEAT_S,
    container_start_spread_s=0.026,
    am_registration_s=2.22,
    samples=10,
    source="recorded",
)


# --------------------------------------------------------------------------- mapping


def task_duration_s(command_s: float, overheads: YarnOverheads) -> float:
    """How long a task container of a ``command_s`` command holds its resources."""
    return overheads.container_launch_s + command_s + overheads.container_exit_s


def simulation_options(
    overheads: YarnOverheads,
    scheduler: SchedulerKind,
    *,
    fair_assign_multiple: bool = True,
    seed: int = 0,
) -> SimulationOptions:
    """Options that make the simulator follow a real cluster with these overheads."""
    return SimulationOptions(
        heartbeat_interval_s=overheads.nm_heartbeat_s,
        am_startup_s=overheads.am_startup_s,
        am_teardown_s=overheads.am_teardown_s,
        out_of_band_heartbeats=True,
        am_allocate_interval_s=overheads.am_heartbeat_s,
        container_start_spread_s=overheads.container_start_spread_s,
        off_switch_requests=scheduler == "capacity",
        fair_assign_multiple=fair_assign_multiple and scheduler == "fair",
        seed=seed,
    )


# YARN's default yarn.resource-types.memory-mb.increment-allocation (and the older
# yarn.scheduler.increment-allocation-mb): the Fair Scheduler's rounding step.
FAIR_DEFAULT_INCREMENT_MB = 1024


def normalisation_step(
    scheduler: SchedulerKind, minimum_mb: int, fair_increment_mb: int | None = None
) -> int:
    """The memory step a scheduler rounds container requests up to, for
    ``ClusterSpec.minimum_allocation``: the Capacity Scheduler uses the minimum
    allocation; the Fair Scheduler rounds up to the increment allocation, then to at
    least the minimum (FairScheduler's normalisation: the same as a step of
    ``max(minimum, increment)`` whenever the minimum is at most the increment)."""
    if scheduler == "capacity":
        return minimum_mb
    increment = fair_increment_mb if fair_increment_mb is not None else FAIR_DEFAULT_INCREMENT_MB
    return max(minimum_mb, increment)


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class TaskTimeline:
    """One task container of a calibration app: epoch seconds of its grant (RM),
    process start and process exit (NM)."""

    granted_s: float
    started_s: float
    exited_s: float


@dataclass(frozen=True)
class AppTimeline:
    """One calibration app as the RM and NM logs and the RM REST API saw it."""

    app_id: str
    command_s: float
    am_granted_s: float
    am_registered_s: float
    finished_s: float
    tasks: tuple[TaskTimeline, ...]


def estimate_overheads(
    timelines: Sequence[AppTimeline], nm_heartbeat_s: float, source: str = "measured"
) -> YarnOverheads:
    """Medians over calibration apps that each ran alone (module docstring)."""
    usable = [t for t in timelines if t.tasks]
    if not usable:
        raise SettingsError("calibration: no app with a task container to measure")
    tasks = [(app, task) for app in usable for task in app.tasks]
    return YarnOverheads(
        nm_heartbeat_s=nm_heartbeat_s,
        am_startup_s=max(0.0, _median(_first_grant_delays(usable)) - nm_heartbeat_s / 2),
        container_launch_s=_median(t.started_s - t.granted_s for _, t in tasks),
        container_exit_s=_median(t.exited_s - t.started_s - a.command_s for a, t in tasks),
        am_teardown_s=_median(a.finished_s - max(t.exited_s for t in a.tasks) for a in usable),
        container_start_spread_s=_median(_start_gaps(usable), default=0.0),
        am_registration_s=_median(a.am_registered_s - a.am_granted_s for a in usable),
        samples=len(usable),
        source=source,
    )


def _first_grant_delays(apps: Iterable[AppTimeline]) -> list[float]:
    return [min(t.granted_s for t in app.tasks) - app.am_granted_s for app in apps]


def _start_gaps(apps: Iterable[AppTimeline]) -> list[float]:
    """Gaps between the process starts of one app's containers granted together
    (within ``SAME_GRANT_S``)."""
    gaps: list[float] = []
    for app in apps:
        for together in _grant_groups(app.tasks):
            starts = sorted(t.started_s for t in together)
            gaps.extend(later - earlier for earlier, later in itertools.pairwise(starts))
    return gaps


def _grant_groups(tasks: Iterable[TaskTimeline]) -> list[list[TaskTimeline]]:
    groups: list[list[TaskTimeline]] = []
    for task in sorted(tasks, key=lambda t: t.granted_s):
        if groups and task.granted_s - groups[-1][-1].granted_s <= SAME_GRANT_S:
            groups[-1].append(task)
        else:
            groups.append([task])
    return groups


def _median(values: Iterable[float], default: float | None = None) -> float:
    listed = list(values)
    if not listed and default is not None:
        return default
    return float(statistics.median(listed))
