"""``yarn-adapt bench sim-fidelity``: each app's latency on a real YARN mini cluster
against the simulator's (issue 3 item 4).

Each scenario is data: a scheduler, its queue configuration as the XML text YARN
reads, and distributed-shell ``sleep`` apps (submit offset, queue, containers,
seconds, container size). The bench runs every scenario on a real mini cluster (one
cluster per scheduler kind; before each scenario the ResourceManager is restarted on
the scenario's file), reads each app's submit, AM-launch and finish times from the
RM REST API and its AM grant and containers from the RM and NM logs, then replays
the same apps -- submitted when the RM says they were -- in the simulator, under the
same XML (parsed by :mod:`yarn_adapt.yarn.confxml`) and the node sizes the RM
reports. YARN's fixed overheads and the simulator options that mirror YARN come from
:mod:`yarn_adapt.sim.calibration`: the recorded measurement, or with ``--set
calibrate=true`` a fresh one on a separate calibration scenario run first (never one
of the evaluated scenarios; nothing is fitted per scenario).

Apps are submitted through the RM REST API with the distributed shell's own
ApplicationMaster (:class:`RestSubmitter`): a client JVM per app (``--set
submit=client``, the harness's ``submit_sleep_app``) submits seconds late and takes
the host's two cores from the AMs starting beside it.

Per app: relative error = |sim latency - real latency| / real latency. Figures:
``median_rel_err``, ``p90_rel_err`` over all apps, ``scenarios``, and the error split
into *wait* (submit -> AM container granted) and *run* (the rest): mean signed
(``wait_bias_s``, ``run_bias_s``) and median absolute wait error in seconds.
Per scenario, ``agrees``: the
simulator agrees with the real RM when the median of its apps' relative errors is
<= 0.20 and none exceeds 0.50 (``scenarios_agree``, ``scenarios_disagree``).
Scenarios: the 8 of :data:`SCENARIOS` (pinned by the simulator's golden tests) and
the 6 of :data:`SEMANTICS_SCENARIOS` (issue 14: user limits with apps of several
users, AM-limited queues, Fair/DRF with vcore-bound containers, Fair user limits).
``--quick``: one scenario per scheduler. ``--trace PATH``: scenarios built from the
first jobs of a trace of any supported format (:func:`scenarios_from_trace`; ``--set
apps_per_scenario=N``). ``--set keep_going=true`` reports the scenarios that ran when
one fails. A cluster that cannot start is a :class:`MiniClusterError` (one line).
"""

from __future__ import annotations

import calendar
import getpass
import logging
import re
import statistics
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from xml.sax.saxutils import escape

import requests

from yarn_adapt.bench import BenchOptions, BenchResult, benchmark
from yarn_adapt.errors import SettingsError
from yarn_adapt.minicluster import (
    MiniCluster,
    MiniClusterError,
    MiniClusterSpec,
    resolve_hadoop_jars,
)
from yarn_adapt.minicluster.javacmd import DISTRIBUTED_SHELL_ARTIFACT
from yarn_adapt.minicluster.rest import send
from yarn_adapt.model import Application, AppState
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobSpec, TaskSpec, Workload
from yarn_adapt.progress import report
from yarn_adapt.set_keys import SetSpec, flag, whole, word
from yarn_adapt.sim import ClusterSpec, simulate
from yarn_adapt.sim.calibration import (
    RECORDED_OVERHEADS,
    AppTimeline,
    SchedulerKind,
    TaskTimeline,
    YarnOverheads,
    estimate_overheads,
    normalisation_step,
    simulation_options,
    task_duration_s,
)
from yarn_adapt.workload import load_trace
from yarn_adapt.yarn.confxml import SchedulerConfig, parse_capacity_xml, parse_fair_xml
from yarn_adapt.yarn.rm import ResourceManagerClient

log = logging.getLogger(__name__)

NM_MEMORY_MB = 4096
NM_VCORES = 8
AM_MB = 256
MIN_ALLOCATION_MB = 128
APP_TIMEOUT_S = 600.0
FAIR_INCREMENT_PROPERTY = "yarn.resource-types.memory-mb.increment-allocation"
DS_APPLICATION_MASTER = "org.apache.hadoop.yarn.applications.distributedshell.ApplicationMaster"
SUBMIT_WAYS = ("rest", "client")
# A scenario agrees with the real RM when the median of its apps' relative latency
# errors is within AGREE_MEDIAN_REL_ERR and none is off by more than AGREE_MAX_REL_ERR.
AGREE_MEDIAN_REL_ERR = 0.20
AGREE_MAX_REL_ERR = 0.50

# --------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class SleepApp:
    """A distributed-shell app running ``sleep sleep_s`` in ``containers`` containers."""

    offset_s: float
    queue: str
    containers: int
    sleep_s: float
    container_mb: int = 512
    user: str | None = None  # None: the bench's own user
    vcores: int = 1


@dataclass(frozen=True)
class Scenario:
    name: str
    scheduler: SchedulerKind
    queues_xml: str
    apps: tuple[SleepApp, ...]

    def config(self) -> SchedulerConfig:
        if self.scheduler == "capacity":
            return parse_capacity_xml(self.queues_xml, f"scenario {self.name}").config
        return parse_fair_xml(self.queues_xml, f"scenario {self.name}").config

    def leaf_names(self) -> list[str]:
        return [leaf.path.rsplit(".", 1)[-1] for leaf in self.config().leaves()]


def capacity_xml(
    queues: Mapping[str, Mapping[str, str]],
    am_percent: float = 0.5,
    extra: Mapping[str, str] | None = None,
) -> str:
    """A capacity-scheduler.xml with ``queues`` (leaf -> property suffix -> value)
    under root, and ``extra`` global properties. Node-locality delay is off: one
    host gives nothing to wait for."""
    properties = {
        "yarn.scheduler.capacity.maximum-am-resource-percent": f"{am_percent:g}",
        "yarn.scheduler.capacity.node-locality-delay": "-1",
        **(extra or {}),
        "yarn.scheduler.capacity.root.queues": ",".join(queues),
    }
    for leaf, settings in queues.items():
        for suffix, value in settings.items():
            properties[f"yarn.scheduler.capacity.root.{leaf}.{suffix}"] = value
    rows = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in properties.items()
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<configuration>\n{rows}</configuration>\n'


def fair_xml(queues: str, defaults: str = "") -> str:
    """A fair-scheduler.xml: ``queues`` and ``defaults`` are XML elements; apps must
    name an existing queue."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<allocations>\n'
        f"{queues}{defaults}"
        "  <queuePlacementPolicy>\n"
        '    <rule name="specified" create="false"/>\n'
        '    <rule name="reject"/>\n'
        "  </queuePlacementPolicy>\n</allocations>\n"
    )


def _apps(*rows: tuple[float, str, int, float, int]) -> tuple[SleepApp, ...]:
    return tuple(SleepApp(*row) for row in rows)


# One 4 GiB / 8-vcore NodeManager. The Capacity Scheduler's default calculator counts
# memory only; the Fair Scheduler also fits vcores, so at most 8 containers run.
# fmt: off
SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "cap-elastic-fifo",
        "capacity",
        capacity_xml({
            "a": {"capacity": "60", "maximum-capacity": "100", "user-limit-factor": "2"},
            "b": {"capacity": "40", "maximum-capacity": "60", "user-limit-factor": "1.5"},
        }),
        _apps(
            (0, "a", 4, 20, 512), (2, "b", 3, 15, 512), (4, "a", 6, 10, 256),
            (7, "b", 2, 30, 1024), (10, "a", 2, 8, 512), (13, "b", 5, 6, 256),
            (17, "a", 1, 25, 1024), (21, "b", 3, 12, 512),
        ),
    ),
    Scenario(
        "fair-weights",
        "fair",
        fair_xml(
            '  <queue name="a"><weight>3</weight></queue>\n'
            '  <queue name="b"><weight>1</weight></queue>\n'
        ),
        _apps(
            (0, "a", 4, 20, 512), (2, "b", 4, 15, 512), (4, "a", 2, 10, 512),
            (6, "b", 3, 8, 256), (9, "a", 5, 6, 256), (12, "b", 1, 30, 1024),
            (15, "a", 2, 12, 512), (19, "b", 2, 10, 512),
        ),
    ),
    Scenario(
        "cap-three-fair-ordering",
        "capacity",
        capacity_xml({
            "a": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "2",
                  "ordering-policy": "fair"},
            "b": {"capacity": "30", "maximum-capacity": "60", "user-limit-factor": "2"},
            "c": {"capacity": "20", "maximum-capacity": "40", "user-limit-factor": "2"},
        }),
        _apps(
            (0, "a", 3, 25, 512), (2, "b", 4, 12, 512), (4, "c", 2, 18, 512),
            (6, "a", 5, 8, 256), (8.5, "b", 1, 35, 1024), (11, "c", 3, 10, 256),
            (13.5, "a", 2, 15, 1024), (16, "b", 6, 5, 256), (19, "c", 1, 20, 512),
            (22, "a", 4, 6, 512),
        ),
    ),
    Scenario(
        "fair-policies-drf",
        "fair",
        fair_xml(
            '  <queue name="a"><weight>1</weight><schedulingPolicy>fifo</schedulingPolicy>'
            "</queue>\n"
            '  <queue name="b"><weight>1</weight><schedulingPolicy>fair</schedulingPolicy>'
            "</queue>\n"
            '  <queue name="c"><weight>2</weight><schedulingPolicy>drf</schedulingPolicy>'
            "</queue>\n",
            "  <defaultQueueSchedulingPolicy>drf</defaultQueueSchedulingPolicy>\n",
        ),
        _apps(
            (0, "a", 3, 20, 512), (2, "b", 2, 25, 1024), (4, "c", 4, 10, 256),
            (6, "a", 2, 8, 512), (8.5, "b", 3, 12, 256), (11, "c", 2, 15, 1024),
            (13.5, "a", 1, 30, 512), (16, "b", 2, 6, 512), (19, "c", 5, 5, 256),
            (22, "a", 3, 10, 512),
        ),
    ),
    Scenario(
        "cap-hard-max",
        "capacity",
        capacity_xml(
            {
                "a": {"capacity": "70", "maximum-capacity": "70"},
                "b": {"capacity": "30", "maximum-capacity": "100", "user-limit-factor": "3"},
            },
            am_percent=0.3,
        ),
        _apps(
            (0, "a", 2, 15, 512), (2, "b", 3, 20, 512), (4, "a", 4, 6, 512),
            (6, "b", 2, 10, 1024), (8, "a", 1, 30, 512), (10, "b", 5, 5, 256),
            (12, "a", 3, 12, 256), (14, "b", 2, 8, 512), (16.5, "a", 6, 4, 256),
            (19, "b", 1, 25, 512), (21.5, "a", 2, 10, 1024), (24, "b", 4, 6, 512),
        ),
    ),
    Scenario(
        "fair-min-max",
        "fair",
        fair_xml(
            '  <queue name="a"><minResources>2048 mb, 3 vcores</minResources></queue>\n'
            '  <queue name="b"><maxResources>1536 mb, 8 vcores</maxResources></queue>\n'
            '  <queue name="c"><weight>1</weight></queue>\n'
        ),
        _apps(
            (0, "b", 5, 15, 256), (2, "c", 4, 20, 512), (4, "a", 3, 10, 512),
            (6, "b", 2, 12, 512), (8.5, "c", 2, 8, 1024), (11, "a", 4, 6, 256),
            (13.5, "b", 1, 25, 512), (16, "c", 3, 10, 256), (19, "a", 2, 15, 512),
            (23, "b", 3, 5, 256),
        ),
    ),
    Scenario(
        "cap-am-limit",
        "capacity",
        capacity_xml({
            "a": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "2",
                  "maximum-am-resource-percent": "0.15"},
            "b": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "2"},
        }),
        _apps(
            (0, "a", 2, 12, 512), (2, "a", 3, 8, 512), (4, "a", 1, 6, 512),
            (6, "b", 4, 15, 512), (8, "b", 2, 10, 1024), (10, "a", 4, 5, 256),
            (12, "b", 3, 20, 256), (14, "b", 1, 8, 512), (16, "a", 2, 10, 512),
        ),
    ),
    Scenario(
        "fair-am-share-maxapps",
        "fair",
        fair_xml(
            '  <queue name="a"><weight>2</weight></queue>\n'
            '  <queue name="b"><maxRunningApps>2</maxRunningApps></queue>\n',
            "  <queueMaxAMShareDefault>0.3</queueMaxAMShareDefault>\n",
        ),
        _apps(
            (0, "a", 2, 10, 512), (2, "b", 3, 12, 256), (4, "a", 1, 20, 512),
            (6, "b", 2, 8, 512), (8, "a", 3, 6, 256), (10, "b", 1, 15, 1024),
            (12, "a", 2, 8, 512), (14, "b", 4, 5, 256), (16.5, "a", 1, 25, 256),
            (19, "b", 2, 10, 512), (21.5, "a", 4, 4, 256), (24, "b", 1, 12, 512),
        ),
    ),
)

# Scenarios added for issue 14: user limits (several users in one queue), AM-limited
# queues and Fair/DRF with containers that are short of vcores rather than memory.
# Kept apart from SCENARIOS, whose simulated results tests/sim/golden.py pins.
def _user_apps(
    *rows: tuple[float, str, int, float, int, str | None],
) -> tuple[SleepApp, ...]:
    return tuple(SleepApp(o, q, c, s, mb, user=u) for o, q, c, s, mb, u in rows)


def _vcore_apps(*rows: tuple[float, str, int, float, int, int]) -> tuple[SleepApp, ...]:
    return tuple(SleepApp(o, q, c, s, mb, vcores=v) for o, q, c, s, mb, v in rows)


SEMANTICS_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "cap-user-limit",
        "capacity",
        capacity_xml({
            "a": {"capacity": "60", "maximum-capacity": "100", "user-limit-factor": "1",
                  "minimum-user-limit-percent": "50"},
            "b": {"capacity": "40", "maximum-capacity": "100", "user-limit-factor": "2"},
        }),
        _user_apps(
            (0, "a", 4, 20, 512, "alice"), (2, "a", 4, 15, 512, "bob"),
            (4, "b", 3, 12, 512, None), (6, "a", 3, 10, 512, "carol"),
            (8.5, "a", 2, 18, 512, "alice"), (11, "b", 4, 8, 256, None),
            (13.5, "a", 5, 6, 256, "bob"), (16, "a", 2, 12, 1024, "carol"),
            (19, "b", 2, 10, 512, None), (22, "a", 3, 8, 512, "alice"),
        ),
    ),
    Scenario(
        "cap-user-limit-factor",
        "capacity",
        capacity_xml({
            "a": {"capacity": "30", "maximum-capacity": "100", "user-limit-factor": "3"},
            "b": {"capacity": "70", "maximum-capacity": "100", "user-limit-factor": "1",
                  "minimum-user-limit-percent": "25"},
        }),
        _user_apps(
            (0, "a", 5, 15, 512, "alice"), (2, "b", 3, 20, 512, "bob"),
            (4, "b", 4, 10, 256, "carol"), (6, "a", 3, 12, 512, "alice"),
            (8, "b", 2, 15, 1024, "dave"), (10.5, "b", 4, 8, 512, "bob"),
            (13, "a", 2, 10, 512, "erin"), (15.5, "b", 3, 12, 256, "carol"),
            (18, "a", 4, 6, 512, "alice"), (21, "b", 2, 10, 512, "dave"),
        ),
    ),
    Scenario(
        "cap-am-limit-users",
        "capacity",
        capacity_xml(
            {
                "a": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "2",
                      "minimum-user-limit-percent": "50"},
                "b": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "1",
                      "maximum-am-resource-percent": "0.25"},
            },
            am_percent=0.12,
        ),
        _user_apps(
            (0, "a", 2, 12, 512, "alice"), (2, "a", 3, 8, 512, "bob"),
            (4, "b", 2, 10, 512, None), (6, "a", 1, 15, 1024, "alice"),
            (8, "b", 3, 6, 256, None), (10, "a", 4, 5, 256, "bob"),
            (12, "b", 2, 12, 512, "carol"), (14, "a", 2, 8, 512, "alice"),
            (16, "b", 3, 6, 512, None), (18.5, "a", 3, 6, 256, "bob"),
        ),
    ),
    Scenario(
        "fair-drf-vcores",
        "fair",
        fair_xml(
            '  <queue name="a"><weight>1</weight></queue>\n'
            '  <queue name="b"><weight>1</weight></queue>\n'
            '  <queue name="c"><weight>2</weight></queue>\n',
            "  <defaultQueueSchedulingPolicy>drf</defaultQueueSchedulingPolicy>\n",
        ),
        _vcore_apps(
            (0, "a", 3, 15, 256, 3), (2, "b", 3, 20, 1024, 1), (4, "a", 2, 12, 256, 4),
            (6, "b", 4, 10, 512, 1), (8.5, "c", 3, 12, 256, 2), (11, "a", 2, 10, 512, 3),
            (13.5, "b", 2, 15, 1024, 1), (16, "c", 4, 8, 256, 2), (19, "a", 1, 20, 256, 4),
            (22, "b", 3, 8, 512, 1),
        ),
    ),
    Scenario(
        "fair-user-max-apps",
        "fair",
        fair_xml(
            '  <queue name="a"><weight>1</weight></queue>\n'
            '  <queue name="b"><weight>1</weight><schedulingPolicy>fifo</schedulingPolicy>'
            "</queue>\n"
            '  <user name="alice"><maxRunningApps>1</maxRunningApps></user>\n',
            "  <userMaxAppsDefault>2</userMaxAppsDefault>\n",
        ),
        _user_apps(
            (0, "a", 3, 12, 512, "alice"), (2, "b", 2, 15, 512, "bob"),
            (4, "a", 2, 10, 512, "alice"), (6, "b", 3, 8, 512, "carol"),
            (8, "a", 2, 12, 256, "bob"), (10, "b", 1, 15, 1024, "alice"),
            (12, "a", 3, 6, 512, "carol"), (14, "b", 2, 10, 512, "bob"),
            (16.5, "a", 4, 5, 256, "carol"), (19, "b", 2, 8, 512, "alice"),
        ),
    ),
    Scenario(
        "fair-drf-am-share",
        "fair",
        fair_xml(
            '  <queue name="a"><weight>1</weight><maxAMShare>0.2</maxAMShare></queue>\n'
            '  <queue name="b"><weight>1</weight></queue>\n',
            "  <defaultQueueSchedulingPolicy>drf</defaultQueueSchedulingPolicy>\n",
        ),
        _vcore_apps(
            (0, "a", 2, 12, 512, 1), (2, "a", 3, 8, 256, 2), (4, "b", 3, 15, 512, 2),
            (6, "a", 2, 10, 512, 1), (8, "b", 2, 12, 1024, 1), (10, "a", 1, 15, 512, 2),
            (12, "b", 4, 6, 256, 1), (14, "a", 3, 6, 256, 1), (16.5, "b", 2, 10, 512, 2),
            (19, "a", 2, 8, 512, 1),
        ),
    ),
)

ALL_SCENARIOS: tuple[Scenario, ...] = SCENARIOS + SEMANTICS_SCENARIOS

# What YARN adds around an app when no queue or node limit makes it wait: one queue
# with room for every app at once, apps arriving at the evaluated scenarios' pace
# (their JVMs start side by side, as there), and no per-heartbeat off-switch cap,
# so each first grant comes at the first heartbeat after the AM's ask. Not one of
# the evaluated scenarios.
CALIBRATION = Scenario(
    "calibration",
    "capacity",
    capacity_xml(
        {"cal": {"capacity": "100", "maximum-capacity": "100"}},
        am_percent=1.0,
        extra={"yarn.scheduler.capacity.per-node-heartbeat.maximum-offswitch-assignments": "8"},
    ),
    _apps(
        (0, "cal", 1, 4, 256), (2.5, "cal", 2, 6, 256), (5, "cal", 3, 3, 256),
        (7.5, "cal", 1, 8, 512), (10, "cal", 2, 5, 256), (12.5, "cal", 3, 4, 256),
        (15, "cal", 2, 7, 256), (17.5, "cal", 1, 3, 512), (20, "cal", 3, 6, 256),
        (22.5, "cal", 2, 4, 256),
    ),
)
# fmt: on


def quick_scenarios(scenarios: Sequence[Scenario]) -> list[Scenario]:
    """The first scenario of each scheduler kind."""
    firsts = {s.scheduler: s for s in reversed(scenarios)}
    return [s for s in scenarios if firsts.get(s.scheduler) is s]


# --------------------------------------------------------------------------- trace -> scenarios

TRACE_APPS_PER_SCENARIO = 10
TRACE_WINDOW_S = 24.0
MAX_CONTAINERS = 6
SLEEP_RANGE_S = (3.0, 40.0)
CONTAINER_MB_RANGE = (256, 1024)


def scenarios_from_trace(
    workload: Workload, templates: Sequence[Scenario], apps_per_scenario: int
) -> list[Scenario]:
    """One scenario per template from consecutive chunks of the trace's first jobs:
    the template gives scheduler and queues; each job becomes a sleep app."""
    jobs = [j for j in sorted(workload.jobs, key=lambda j: j.submit_s) if j.tasks]
    scenarios = []
    for index, template in enumerate(templates):
        chunk = jobs[index * apps_per_scenario : (index + 1) * apps_per_scenario]
        if len(chunk) < 2:
            break
        apps = sleep_apps_from_jobs(chunk, template.leaf_names())
        scenarios.append(replace(template, name=f"trace-{template.name}", apps=apps))
    if not scenarios:
        raise SettingsError(f"{workload.source or 'trace'}: fewer than 2 jobs with tasks")
    return scenarios


def sleep_apps_from_jobs(jobs: Sequence[JobSpec], leaves: Sequence[str]) -> tuple[SleepApp, ...]:
    """Containers = min(tasks, 6); sleep = median task duration clipped to [3, 40] s;
    submit offsets compressed into the scenario's window; trace queues onto the
    template's leaves in order of first appearance."""
    queue_of = _queue_mapping((j.queue for j in jobs), leaves)
    offsets = compressed_offsets([j.submit_s for j in jobs], TRACE_WINDOW_S)
    return tuple(
        SleepApp(
            offset_s=offset,
            queue=queue_of[job.queue],
            containers=min(len(job.tasks), MAX_CONTAINERS),
            sleep_s=round(
                _clip(statistics.median(t.duration_s for t in job.tasks), *SLEEP_RANGE_S), 1
            ),
            container_mb=_container_mb(job),
        )
        for job, offset in zip(jobs, offsets, strict=True)
    )


def compressed_offsets(submits: Sequence[float], window_s: float) -> list[float]:
    """Submit times scaled into ``[0, window_s]``, keeping their order and spacing."""
    first, span = submits[0], submits[-1] - submits[0]
    if span <= 0:
        step = window_s / max(1, len(submits) - 1)
        return [round(i * step, 2) for i in range(len(submits))]
    return [round((s - first) / span * window_s, 2) for s in submits]


def _queue_mapping(queues: Iterable[str], leaves: Sequence[str]) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for queue in queues:
        mapping.setdefault(queue, leaves[len(mapping) % len(leaves)])
    return mapping


def _container_mb(job: JobSpec) -> int:
    """The job's largest task container, rounded up as YARN would, within range."""
    memory = max(t.resources.memory_mb for t in job.tasks)
    rounded = -(-memory // MIN_ALLOCATION_MB) * MIN_ALLOCATION_MB
    return int(_clip(rounded, *CONTAINER_MB_RANGE))


def _clip(value: float, low: float, high: float) -> float:
    return min(high, max(low, value))


# --------------------------------------------------------------------------- real runs


@dataclass(frozen=True)
class RealApp:
    """One app as real YARN ran it: the RM's /apps entry and, from the RM and NM logs,
    its AM grant and task containers (epoch seconds)."""

    spec: SleepApp
    app: Application
    am_granted_s: float | None
    timeline: AppTimeline | None

    @property
    def submitted_s(self) -> float:
        return self.app.submitted_ms / 1000

    @property
    def latency_s(self) -> float:
        assert self.app.latency_ms is not None
        return self.app.latency_ms / 1000


@dataclass(frozen=True)
class RealRun:
    scenario: Scenario
    apps: tuple[RealApp, ...]
    cluster: ClusterSpec
    wall_s: float


def cluster_spec_for(scheduler: SchedulerKind, first_xml: str) -> MiniClusterSpec:
    """The scenarios' cluster. The Fair Scheduler rounds requests up to the memory
    increment (1024 MiB by default), not to the minimum allocation: setting it to
    the minimum keeps the scenarios' container sizes on both schedulers."""
    increment = {FAIR_INCREMENT_PROPERTY: str(MIN_ALLOCATION_MB)} if scheduler == "fair" else {}
    return MiniClusterSpec(
        scheduler=scheduler,
        nm_memory_mb=NM_MEMORY_MB,
        nm_vcores=NM_VCORES,
        min_allocation_mb=MIN_ALLOCATION_MB,
        scheduler_xml=first_xml,
        yarn_site=increment,
    )


def run_on_cluster(cluster: MiniCluster, scenario: Scenario, via: str = "rest") -> RealRun:
    """Install the scenario's scheduler file (RM restart), submit its apps at their
    offsets (``via`` REST or distributed-shell client JVMs), wait for all, read the
    results."""
    began = time.monotonic()
    install_scheduler_file(cluster, scenario.queues_xml)
    ids = _submit_all(cluster, scenario, via)
    for app_id in ids:
        cluster.wait_for_app(app_id, APP_TIMEOUT_S)
    apps = _finished_apps(cluster, ids)
    timelines = read_timelines(cluster, apps, [a.sleep_s for a in scenario.apps])
    real = tuple(
        RealApp(spec, app, timelines.am_granted.get(app.id), timelines.apps.get(app.id))
        for spec, app in zip(scenario.apps, apps, strict=True)
    )
    return RealRun(scenario, real, _observed_cluster(cluster), time.monotonic() - began)


def install_scheduler_file(cluster: MiniCluster, xml: str) -> None:
    """A clean RM on ``xml``: nothing left running, the file in place, RM restarted
    (queues may come and go between scenarios, which a refresh cannot always do)."""
    if cluster.read_scheduler_xml() == xml and not _apps_of(cluster.rm_get("apps")):
        return  # a fresh RM already on this file
    cluster.kill_active_apps()
    cluster.write_scheduler_xml(xml)
    cluster.restart_resourcemanager()


def _apps_of(body: object) -> list[object]:
    apps = body.get("apps") if isinstance(body, dict) else None
    return list(apps.get("app") or []) if isinstance(apps, dict) else []


def _submit_all(cluster: MiniCluster, scenario: Scenario, via: str) -> list[str]:
    """Submit each app at its offset; their ids in scenario order."""
    submit = RestSubmitter(cluster) if via == "rest" else ClientSubmitter(cluster)
    start = time.monotonic()
    pending: list[Callable[[], str]] = []
    for index, app in enumerate(scenario.apps):
        time.sleep(max(0.0, start + app.offset_s - time.monotonic()))
        pending.append(submit(app, f"{scenario.name}-{index:02d}"))
    return [app_id() for app_id in pending]


class ClientSubmitter:
    """The harness's way: one distributed-shell client JVM per app (it submits a
    few seconds after it starts, and its start-up competes for the CPU)."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster

    def __call__(self, app: SleepApp, name: str) -> Callable[[], str]:
        if app.user is not None:
            raise SettingsError(
                f"sim-fidelity: app {name} runs as {app.user!r}: submit=client cannot "
                "submit as another user, use submit=rest"
            )
        submitted = self.cluster.submit_sleep_app(
            app.queue,
            app.containers,
            app.sleep_s,
            container_mb=app.container_mb,
            vcores=app.vcores,
            name=name,
            am_mb=AM_MB,
        )
        return submitted.application_id


class RestSubmitter:
    """Submits the distributed shell's own ApplicationMaster through the RM REST API
    (``POST /apps``) with the launch context its client would build: AppMaster.jar,
    the command and its arguments as files the AM reads (Java modified UTF-8, as
    the client's ``writeUTF``), the CLASSPATH and the AM command line. No client
    JVM: the app is submitted at its offset to the millisecond and the host's cores
    are left to YARN."""

    def __init__(self, cluster: MiniCluster) -> None:
        self.cluster = cluster
        self.files = cluster.root / "fidelity-submit"
        self.files.mkdir(exist_ok=True)
        self.am_jar = resolve_hadoop_jars().jar(DISTRIBUTED_SHELL_ARTIFACT)
        self.classpath = "<CPS>".join(
            ["{{CLASSPATH}}", "./*", *_application_classpath(cluster), "./log4j.properties"]
        )

    def __call__(self, app: SleepApp, name: str) -> Callable[[], str]:
        user = app.user or getpass.getuser()
        reply = self._post("apps/new-application", None, user)
        app_id = str(reply.json()["application-id"])
        self._post("apps", self._submission(app_id, app, name), user)
        return lambda: app_id

    def _post(self, path: str, body: dict[str, object] | None, user: str) -> requests.Response:
        """POST as ``user`` (simple authentication: the RM takes ``user.name``)."""
        url = f"{self.cluster.rm_url}/ws/v1/cluster/{path}"
        reply = send(
            "POST",
            url,
            json=body,
            params={"user.name": user},
            headers={"Accept": "application/json"},
        )
        if reply.status_code not in (200, 202):
            first = (reply.text.strip().splitlines() or [""])[0][:200]
            raise MiniClusterError(f"POST {url} -> HTTP {reply.status_code}: {first}")
        return reply

    def _submission(self, app_id: str, app: SleepApp, name: str) -> dict[str, object]:
        resources = {
            "AppMaster.jar": self.am_jar,
            "shellCommands": self._utf_file("shellCommands", "sleep"),
            "shellArgs": self._utf_file(f"shellArgs-{app.sleep_s:g}", f"{app.sleep_s:g}"),
        }
        return {
            "application-id": app_id,
            "application-name": name,
            "queue": app.queue,
            "priority": 0,
            "unmanaged-AM": False,
            "max-app-attempts": 1,
            "application-type": "YARN",
            "keep-containers-across-application-attempts": False,
            "resource": {"memory": AM_MB, "vCores": 1},
            "am-container-spec": {
                "local-resources": {
                    "entry": [
                        {"key": key, "value": _local_resource(path)}
                        for key, path in resources.items()
                    ]
                },
                "environment": {"entry": [{"key": "CLASSPATH", "value": self.classpath}]},
                "commands": {"command": self._am_command(app, name)},
            },
        }

    def _am_command(self, app: SleepApp, name: str) -> str:
        home = self.cluster.layout.home_dir.as_uri()
        return (
            f'"{{{{JAVA_HOME}}}}/bin/java" -Xmx{AM_MB}m <ADD_OPENS> {DS_APPLICATION_MASTER}'
            f" --container_type GUARANTEED --container_memory {app.container_mb}"
            f" --container_vcores {app.vcores} --num_containers {app.containers} --priority 0"
            f" --appname {name} --homedir {home}"
            " 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr"
        )

    def _utf_file(self, name: str, text: str) -> Path:
        """Written once: the NodeManager refuses a resource whose file changed."""
        path = self.files / name
        if not path.exists():
            data = text.encode()
            path.write_bytes(struct.pack(">H", len(data)) + data)
        return path


def _local_resource(path: Path) -> dict[str, object]:
    stat = path.stat()
    return {
        "resource": path.resolve().as_uri(),
        "type": "FILE",
        "visibility": "APPLICATION",
        "size": stat.st_size,
        "timestamp": stat.st_mtime_ns // 1_000_000,
    }


def _application_classpath(cluster: MiniCluster) -> list[str]:
    """``yarn.application.classpath`` of the cluster's yarn-site.xml."""
    value = _site_value(cluster, "yarn.application.classpath")
    if value is None:
        raise MiniClusterError(f"{cluster.conf_dir}/yarn-site.xml: no yarn.application.classpath")
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def _site_value(cluster: MiniCluster, name: str) -> str | None:
    text = (cluster.conf_dir / "yarn-site.xml").read_text()
    found = re.search(rf"<name>{re.escape(name)}</name>\s*<value>([^<]*)</value>", text)
    return found.group(1) if found else None


def _finished_apps(cluster: MiniCluster, ids: Sequence[str]) -> list[Application]:
    with ResourceManagerClient(cluster.rm_url) as rm:
        apps = [rm.app(app_id) for app_id in ids]
    for app in apps:
        if app.state is not AppState.FINISHED or app.finished_ms is None:
            raise MiniClusterError(
                f"{app.id} ({app.name}) ended {app.state}/{app.final_status}; "
                f"see {cluster.layout.logs_dir}"
            )
    return apps


def _observed_cluster(cluster: MiniCluster) -> ClusterSpec:
    """The RM's nodes, and the step the scheduler rounds requests to."""
    with ResourceManagerClient(cluster.rm_url) as rm:
        nodes = rm.nodes()
    spec = cluster.spec
    increment = spec.yarn_site.get(FAIR_INCREMENT_PROPERTY)
    step = normalisation_step(
        spec.scheduler, spec.min_allocation_mb, int(increment) if increment else None
    )
    return ClusterSpec.from_nodes(nodes, minimum_allocation=Resources(step, 1))


# --------------------------------------------------------------------------- logs

_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
_CONTAINER = r"container_(?:e\d+_)?(\d+_\d+)_\d+_(\d+)"
_RM_GRANTED = re.compile(_CONTAINER + r" Container Transitioned from NEW to ALLOCATED")
_RM_RELEASED = re.compile(_CONTAINER + r" Container Transitioned from \w+ to RELEASED")
_RM_REGISTERED = re.compile(r"AM registration appattempt_(\d+_\d+)_\d+")
_RM_LAUNCH_TIME = re.compile(r"launchTime: (\d{13})")
_NM_STARTED = re.compile(r"Container " + _CONTAINER + r" transitioned from SCHEDULED to RUNNING")
_NM_EXITED = re.compile(r"Container " + _CONTAINER + r" transitioned from RUNNING to EXITED_")


@dataclass
class _Events:
    """Log events keyed by (app key ``<cluster ts>_<seq>``, container number)."""

    granted: dict[tuple[str, int], float]
    released: set[tuple[str, int]]
    registered: dict[str, float]
    started: dict[tuple[str, int], float]
    exited: dict[tuple[str, int], float]


@dataclass(frozen=True)
class Timelines:
    am_granted: dict[str, float]
    apps: dict[str, AppTimeline]


def read_timelines(
    cluster: MiniCluster, apps: Sequence[Application], sleeps: Sequence[float]
) -> Timelines:
    logs = cluster.layout.logs_dir
    rm_lines = _read_lines(logs / "resourcemanager.log")
    nm_lines = [
        line for path in sorted(logs.glob("nodemanager-*.log")) for line in _read_lines(path)
    ]
    return timelines_from_logs(rm_lines, nm_lines, apps, sleeps)


def timelines_from_logs(
    rm_lines: Sequence[str],
    nm_lines: Sequence[str],
    apps: Sequence[Application],
    sleeps: Sequence[float],
) -> Timelines:
    """Each app's AM grant and, where every step was logged, its full timeline."""
    offset = _clock_offset(rm_lines)
    events = _Events({}, set(), {}, {}, {})
    _scan(rm_lines, offset, [(_RM_GRANTED, events.granted), (_RM_REGISTERED, events.registered)])
    _scan(nm_lines, offset, [(_NM_STARTED, events.started), (_NM_EXITED, events.exited)])
    events.released = {_container_key(m) for m in _matches(rm_lines, _RM_RELEASED)}
    am_granted: dict[str, float] = {}
    timelines: dict[str, AppTimeline] = {}
    for app, sleep_s in zip(apps, sleeps, strict=True):
        key = app.id.removeprefix("application_")
        if (key, 1) in events.granted:
            am_granted[app.id] = events.granted[(key, 1)]
        timeline = _timeline(app, key, sleep_s, events)
        if timeline is not None:
            timelines[app.id] = timeline
    return Timelines(am_granted, timelines)


def _timeline(app: Application, key: str, sleep_s: float, events: _Events) -> AppTimeline | None:
    tasks = []
    for (app_key, number), granted in sorted(events.granted.items()):
        if app_key != key or number == 1 or (app_key, number) in events.released:
            continue
        started = events.started.get((app_key, number))
        exited = events.exited.get((app_key, number))
        if started is None or exited is None:
            return None
        tasks.append(TaskTimeline(granted, started, exited))
    am_granted = events.granted.get((key, 1))
    registered = events.registered.get(key)
    if not tasks or am_granted is None or registered is None or app.finished_ms is None:
        return None
    return AppTimeline(
        app.id, sleep_s, am_granted, registered, app.finished_ms / 1000, tuple(tasks)
    )


def _scan(
    lines: Sequence[str],
    offset: float,
    patterns: Sequence[tuple[re.Pattern[str], dict]],  # type: ignore[type-arg]
) -> None:
    for line in lines:
        for pattern, target in patterns:
            found = pattern.search(line)
            if found is None:
                continue
            stamp = _log_time(line)
            if stamp is not None:
                key = _container_key(found) if found.re.groups == 2 else found.group(1)
                target.setdefault(key, stamp + offset)


def _matches(lines: Iterable[str], pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
    for line in lines:
        found = pattern.search(line)
        if found is not None:
            yield found


def _container_key(found: re.Match[str]) -> tuple[str, int]:
    return found.group(1), int(found.group(2))


def _log_time(line: str) -> float | None:
    """Seconds of a log line's timestamp read as UTC (:func:`_clock_offset` corrects
    for the JVM's time zone)."""
    found = _LOG_TIME.match(line)
    if found is None:
        return None
    parsed = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")
    return calendar.timegm(parsed.timetuple()) + int(found.group(2)) / 1000


def _clock_offset(rm_lines: Sequence[str]) -> float:
    """Seconds to add to a log timestamp for epoch time: the RM logs each app's
    launchTime in epoch ms next to its own local timestamp; time zones differ from
    UTC by whole quarter hours."""
    for line in rm_lines:
        found = _RM_LAUNCH_TIME.search(line)
        stamp = _log_time(line) if found else None
        if found and stamp is not None:
            return round((int(found.group(1)) / 1000 - stamp) / 900) * 900.0
    return 0.0


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class AppComparison:
    scenario: str
    app_id: str
    real_latency_s: float
    sim_latency_s: float
    real_wait_s: float | None
    sim_wait_s: float | None

    @property
    def rel_err(self) -> float:
        return abs(self.sim_latency_s - self.real_latency_s) / self.real_latency_s


def scenario_workload(run: RealRun, overheads: YarnOverheads) -> Workload:
    """The scenario's apps as the simulator's jobs, submitted when the RM says they
    were: an AM container, then ``containers`` tasks of the sleep plus overheads."""
    first = min(app.submitted_s for app in run.apps)
    jobs = tuple(
        JobSpec(
            id=real.app.id,
            submit_s=real.submitted_s - first,
            queue=real.spec.queue,
            tasks=tuple(
                TaskSpec(
                    TaskType.MAP,
                    task_duration_s(real.spec.sleep_s, overheads),
                    Resources(real.spec.container_mb, real.spec.vcores),
                )
                for _ in range(real.spec.containers)
            ),
            user=real.app.user,
            am_resources=Resources(AM_MB, 1),
        )
        for real in run.apps
    )
    return Workload(jobs, source=f"scenario {run.scenario.name}")


def compare(run: RealRun, overheads: YarnOverheads, seed: int) -> list[AppComparison]:
    options = simulation_options(overheads, run.scenario.scheduler, seed=seed)
    result = simulate(
        scenario_workload(run, overheads), run.scenario.config(), run.cluster, options
    )
    by_id = {job.id: job for job in result.jobs}
    comparisons = []
    for real in run.apps:
        job = by_id[real.app.id]
        if job.latency_s is None:
            raise SettingsError(
                f"scenario {run.scenario.name}: the simulator did not finish "
                f"{real.app.id} ({job.status}: {job.reason})"
            )
        real_wait = None if real.am_granted_s is None else real.am_granted_s - real.submitted_s
        comparisons.append(
            AppComparison(
                run.scenario.name, real.app.id, real.latency_s, job.latency_s, real_wait, job.wait_s
            )
        )
    return comparisons


# --------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of ``values``."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def scenario_agrees(comparisons: Sequence[AppComparison]) -> bool:
    """The simulator agrees with the real RM on a scenario: median relative error
    within :data:`AGREE_MEDIAN_REL_ERR`, every app within :data:`AGREE_MAX_REL_ERR`."""
    errors = [c.rel_err for c in comparisons]
    return statistics.median(errors) <= AGREE_MEDIAN_REL_ERR and max(errors) <= AGREE_MAX_REL_ERR


def scenario_row(run: RealRun, comparisons: Sequence[AppComparison]) -> dict[str, object]:
    errors = [c.rel_err for c in comparisons]
    wait, run_err = _phase_errors(comparisons)
    return {
        "scenario": run.scenario.name,
        "scheduler": run.scenario.scheduler,
        "agrees": scenario_agrees(comparisons),
        "apps": len(comparisons),
        "median_rel_err": round(statistics.median(errors), 4),
        "max_rel_err": round(max(errors), 4),
        "real_mean_latency_s": round(statistics.fmean(c.real_latency_s for c in comparisons), 2),
        "sim_mean_latency_s": round(statistics.fmean(c.sim_latency_s for c in comparisons), 2),
        "wait_bias_s": round(wait, 2),
        "run_bias_s": round(run_err, 2),
        "wall_s": round(run.wall_s, 1),
    }


def _phase_errors(comparisons: Sequence[AppComparison]) -> tuple[float, float]:
    """Mean signed error (sim - real) of wait (submit -> AM grant) and of the rest."""
    waits, runs = [], []
    for c in comparisons:
        if c.real_wait_s is None or c.sim_wait_s is None:
            continue
        waits.append(c.sim_wait_s - c.real_wait_s)
        runs.append((c.sim_latency_s - c.sim_wait_s) - (c.real_latency_s - c.real_wait_s))
    return (statistics.fmean(waits) if waits else 0.0, statistics.fmean(runs) if runs else 0.0)


def summary_figures(comparisons: Sequence[AppComparison], scenarios: int) -> dict[str, object]:
    errors = [c.rel_err for c in comparisons]
    wait, run_err = _phase_errors(comparisons)
    abs_wait = [
        abs(c.sim_wait_s - c.real_wait_s)
        for c in comparisons
        if c.sim_wait_s is not None and c.real_wait_s is not None
    ]
    return {
        "scenarios": scenarios,
        "apps": len(comparisons),
        "median_rel_err": round(statistics.median(errors), 4),
        "p90_rel_err": round(percentile(errors, 90), 4),
        "mean_rel_err": round(statistics.fmean(errors), 4),
        "median_abs_wait_err_s": round(statistics.median(abs_wait), 2) if abs_wait else None,
        "wait_bias_s": round(wait, 2),
        "run_bias_s": round(run_err, 2),
    }


def overheads_figures(overheads: YarnOverheads) -> dict[str, object]:
    return {
        "source": overheads.source,
        "samples": overheads.samples,
        "nm_heartbeat_s": overheads.nm_heartbeat_s,
        "am_startup_s": round(overheads.am_startup_s, 3),
        "am_registration_s": round(overheads.am_registration_s, 3),
        "container_launch_s": round(overheads.container_launch_s, 3),
        "container_exit_s": round(overheads.container_exit_s, 3),
        "am_teardown_s": round(overheads.am_teardown_s, 3),
        "container_start_spread_s": round(overheads.container_start_spread_s, 3),
        "am_heartbeat_s": overheads.am_heartbeat_s,
    }


# --------------------------------------------------------------------------- the bench


def nm_heartbeat_s(cluster: MiniCluster) -> float:
    """The cluster's yarn.resourcemanager.nodemanagers.heartbeat-interval-ms (YARN's
    default 1000 when unset)."""
    value = _site_value(cluster, "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms")
    return int(value) / 1000 if value else 1.0


def calibrate(cluster: MiniCluster, via: str = "rest") -> YarnOverheads:
    """Run the calibration scenario and measure the overheads."""
    run = run_on_cluster(cluster, CALIBRATION, via)
    timelines = [real.timeline for real in run.apps if real.timeline is not None]
    return estimate_overheads(timelines, nm_heartbeat_s(cluster), source="measured")


@dataclass(frozen=True)
class FidelitySettings:
    """``--set`` keys: ``calibrate`` (measure the overheads first), ``keep_going``
    (report the scenarios that ran when one fails), ``submit`` (``rest`` or
    ``client``), ``apps_per_scenario`` (with ``--trace``), ``repeat`` (run each
    scenario that many times: later runs are also compared with the first, real
    against real, which measures how far YARN itself varies)."""

    calibrate: bool = False
    keep_going: bool = False
    submit: str = "rest"
    apps_per_scenario: int = TRACE_APPS_PER_SCENARIO
    repeat: int = 1

    @classmethod
    def parse(cls, extra: Mapping[str, str]) -> FidelitySettings:
        values = SET_KEYS.read(extra)
        return cls(
            calibrate=values[Knobs.calibrate],
            keep_going=values[Knobs.keep_going],
            submit=values[Knobs.submit],
            apps_per_scenario=values[Knobs.apps_per_scenario],
            repeat=values[Knobs.repeat],
        )


class Knobs:
    calibrate = flag("calibrate", False)
    keep_going = flag("keep_going", False)
    submit = word("submit", SUBMIT_WAYS, "rest")
    apps_per_scenario = whole("apps_per_scenario", TRACE_APPS_PER_SCENARIO, low=2)
    repeat = whole("repeat", 1, low=1)


SET_KEYS = SetSpec.of("sim-fidelity", Knobs)


def chosen_scenarios(options: BenchOptions, settings: FidelitySettings) -> list[Scenario]:
    templates = quick_scenarios(ALL_SCENARIOS) if options.quick else list(ALL_SCENARIOS)
    if options.trace is None:
        return templates
    workload = load_trace(options.trace, seed=options.seed)
    return scenarios_from_trace(workload, templates, settings.apps_per_scenario)


@benchmark("sim-fidelity", "Per-app latency: real YARN mini cluster vs the simulator", SET_KEYS)
def sim_fidelity(options: BenchOptions) -> BenchResult:
    began = time.monotonic()
    settings = FidelitySettings.parse(options.extra)
    scenarios = chosen_scenarios(options, settings)
    overheads = RECORDED_OVERHEADS
    runs: list[RealRun] = []
    failed: list[str] = []
    for kind in ("capacity", "fair"):
        mine = [s for s in scenarios if s.scheduler == kind]
        calibrating = kind == "capacity" and settings.calibrate
        if not mine and not calibrating:
            continue
        first_xml = (CALIBRATION if calibrating else mine[0]).queues_xml
        with MiniCluster(cluster_spec_for(kind, first_xml)) as cluster:
            if calibrating:
                overheads = calibrate(cluster, settings.submit)
                log.info("calibration: %s", overheads)
            runs.extend(_run_scenarios(cluster, mine, settings, failed))
    return _result(runs, overheads, options.seed, time.monotonic() - began, failed)


def _run_scenarios(
    cluster: MiniCluster,
    scenarios: Sequence[Scenario],
    settings: FidelitySettings,
    failed: list[str],
) -> list[RealRun]:
    """The scenarios' real runs; with ``keep_going`` a failed one (an app the RM did
    not finish in time, say) is named in ``failed`` and counts as not agreeing."""
    runs = []
    total, done = len(scenarios) * settings.repeat, 0
    for scenario in scenarios:
        for _ in range(settings.repeat):
            log.info("scenario %s: %d apps", scenario.name, len(scenario.apps))
            try:
                runs.append(run_on_cluster(cluster, scenario, settings.submit))
            except MiniClusterError as exc:
                if not settings.keep_going:
                    raise
                log.warning("scenario %s failed: %s", scenario.name, exc.one_line())
                failed.append(scenario.name)
            done += 1
            report("bench sim-fidelity run", done, total, scenario.name)
    return runs


def _result(
    runs: Sequence[RealRun],
    overheads: YarnOverheads,
    seed: int,
    wall_s: float,
    failed: Sequence[str] = (),
) -> BenchResult:
    if not runs:
        raise MiniClusterError("no scenario ran to completion")
    rows, everything = [], []
    for run in runs:
        comparisons = compare(run, overheads, seed)
        everything.extend(comparisons)
        rows.append(scenario_row(run, comparisons))
    figures = {
        **summary_figures(everything, len({run.scenario.name for run in runs})),
        **agreement_figures(rows, failed),
        **repeat_figures(runs),
        "calibration": overheads_figures(overheads),
        "wall_s": round(wall_s, 1),
    }
    return BenchResult(figures=figures, rows=rows)


def agreement_figures(
    rows: Sequence[Mapping[str, object]], failed: Sequence[str] = ()
) -> dict[str, object]:
    """How many scenario runs agree with the real RM, which do not (a scenario that
    failed on the RM among them, also named in ``scenarios_failed``), and the rule."""
    disagree = {str(row["scenario"]) for row in rows if not row["agrees"]} | set(failed)
    return {
        "scenarios_agree": sum(1 for row in rows if row["agrees"]),
        "scenarios_disagree": sorted(disagree),
        "scenarios_failed": sorted(set(failed)),
        "agree_rule": f"median_rel_err <= {AGREE_MEDIAN_REL_ERR:g} and "
        f"max_rel_err <= {AGREE_MAX_REL_ERR:g}",
    }


def repeat_differences(runs: Sequence[RealRun]) -> list[float]:
    """|latency - latency in the scenario's first run| / the first, for each app of
    every later run of a scenario (apps matched by name)."""
    first: dict[str, dict[str, float]] = {}
    differences = []
    for run in runs:
        earlier = first.setdefault(run.scenario.name, {})
        if not earlier:
            earlier.update({real.app.name: real.latency_s for real in run.apps})
            continue
        for real in run.apps:
            base = earlier[real.app.name]
            differences.append(abs(real.latency_s - base) / base)
    return differences


def repeat_figures(runs: Sequence[RealRun]) -> dict[str, float]:
    differences = repeat_differences(runs)
    if not differences:
        return {}
    return {
        "repeat_median_rel_diff": round(statistics.median(differences), 4),
        "repeat_p90_rel_diff": round(percentile(differences, 90), 4),
    }
