"""The scenarios ``bench sim-fidelity`` runs: each is data (a scheduler, its queue
configuration as the XML YARN reads, distributed-shell ``sleep`` apps: submit offset,
queue, containers, seconds, container size). :data:`SCENARIOS` (pinned by the
simulator's golden tests), :data:`SEMANTICS_SCENARIOS`, the calibration scenario, and
scenarios built from any trace (:func:`scenarios_from_trace`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from xml.sax.saxutils import escape

from yarn_adapt.errors import SettingsError
from yarn_adapt.model.workload import JobSpec, Workload
from yarn_adapt.sim.calibration import (
    SchedulerKind,
)
from yarn_adapt.yarn.confxml import SchedulerConfig, parse_capacity_xml, parse_fair_xml

NM_MEMORY_MB = 4096


NM_VCORES = 8


AM_MB = 256


MIN_ALLOCATION_MB = 128


APP_TIMEOUT_S = 600.0


FAIR_INCREMENT_PROPERTY = "yarn.resource-types.memory-mb.increment-allocation"


DS_APPLICATION_MASTER = "org.apache.hadoop.yarn.applications.distributedshell.ApplicationMaster"


SUBMIT_WAYS = ("rest", "client")


AGREE_MEDIAN_REL_ERR = 0.20


AGREE_MAX_REL_ERR = 0.50


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


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "cap-elastic-fifo",
        "capacity",
        capacity_xml(
            {
                "a": {"capacity": "60", "maximum-capacity": "100", "user-limit-factor": "2"},
                "b": {"capacity": "40", "maximum-capacity": "60", "user-limit-factor": "1.5"},
            }
        ),
        _apps(
            (0, "a", 4, 20, 512),
            (2, "b", 3, 15, 512),
            (4, "a", 6, 10, 256),
            (7, "b", 2, 30, 1024),
            (10, "a", 2, 8, 512),
            (13, "b", 5, 6, 256),
            (17, "a", 1, 25, 1024),
            (21, "b", 3, 12, 512),
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
            (0, "a", 4, 20, 512),
            (2, "b", 4, 15, 512),
            (4, "a", 2, 10, 512),
            (6, "b", 3, 8, 256),
            (9, "a", 5, 6, 256),
            (12, "b", 1, 30, 1024),
            (15, "a", 2, 12, 512),
            (19, "b", 2, 10, 512),
        ),
    ),
    Scenario(
        "cap-three-fair-ordering",
        "capacity",
        capacity_xml(
            {
                "a": {
                    "capacity": "50",
                    "maximum-capacity": "100",
                    "user-limit-factor": "2",
                    "ordering-policy": "fair",
                },
                "b": {"capacity": "30", "maximum-capacity": "60", "user-limit-factor": "2"},
                "c": {"capacity": "20", "maximum-capacity": "40", "user-limit-factor": "2"},
            }
        ),
        _apps(
            (0, "a", 3, 25, 512),
            (2, "b", 4, 12, 512),
            (4, "c", 2, 18, 512),
            (6, "a", 5, 8, 256),
            (8.5, "b", 1, 35, 1024),
            (11, "c", 3, 10, 256),
            (13.5, "a", 2, 15, 1024),
            (16, "b", 6, 5, 256),
            (19, "c", 1, 20, 512),
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
            (0, "a", 3, 20, 512),
            (2, "b", 2, 25, 1024),
            (4, "c", 4, 10, 256),
            (6, "a", 2, 8, 512),
            (8.5, "b", 3, 12, 256),
            (11, "c", 2, 15, 1024),
            (13.5, "a", 1, 30, 512),
            (16, "b", 2, 6, 512),
            (19, "c", 5, 5, 256),
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
            (0, "a", 2, 15, 512),
            (2, "b", 3, 20, 512),
            (4, "a", 4, 6, 512),
            (6, "b", 2, 10, 1024),
            (8, "a", 1, 30, 512),
            (10, "b", 5, 5, 256),
            (12, "a", 3, 12, 256),
            (14, "b", 2, 8, 512),
            (16.5, "a", 6, 4, 256),
            (19, "b", 1, 25, 512),
            (21.5, "a", 2, 10, 1024),
            (24, "b", 4, 6, 512),
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
            (0, "b", 5, 15, 256),
            (2, "c", 4, 20, 512),
            (4, "a", 3, 10, 512),
            (6, "b", 2, 12, 512),
            (8.5, "c", 2, 8, 1024),
            (11, "a", 4, 6, 256),
            (13.5, "b", 1, 25, 512),
            (16, "c", 3, 10, 256),
            (19, "a", 2, 15, 512),
            (23, "b", 3, 5, 256),
        ),
    ),
    Scenario(
        "cap-am-limit",
        "capacity",
        capacity_xml(
            {
                "a": {
                    "capacity": "50",
                    "maximum-capacity": "100",
                    "user-limit-factor": "2",
                    "maximum-am-resource-percent": "0.15",
                },
                "b": {"capacity": "50", "maximum-capacity": "100", "user-limit-factor": "2"},
            }
        ),
        _apps(
            (0, "a", 2, 12, 512),
            (2, "a", 3, 8, 512),
            (4, "a", 1, 6, 512),
            (6, "b", 4, 15, 512),
            (8, "b", 2, 10, 1024),
            (10, "a", 4, 5, 256),
            (12, "b", 3, 20, 256),
            (14, "b", 1, 8, 512),
            (16, "a", 2, 10, 512),
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
            (0, "a", 2, 10, 512),
            (2, "b", 3, 12, 256),
            (4, "a", 1, 20, 512),
            (6, "b", 2, 8, 512),
            (8, "a", 3, 6, 256),
            (10, "b", 1, 15, 1024),
            (12, "a", 2, 8, 512),
            (14, "b", 4, 5, 256),
            (16.5, "a", 1, 25, 256),
            (19, "b", 2, 10, 512),
            (21.5, "a", 4, 4, 256),
            (24, "b", 1, 12, 512),
        ),
    ),
)


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
        capacity_xml(
            {
                "a": {
                    "capacity": "60",
                    "maximum-capacity": "100",
                    "user-limit-factor": "1",
                    "minimum-user-limit-percent": "50",
                },
                "b": {"capacity": "40", "maximum-capacity": "100", "user-limit-factor": "2"},
            }
        ),
        _user_apps(
            (0, "a", 4, 20, 512, "alice"),
            (2, "a", 4, 15, 512, "bob"),
            (4, "b", 3, 12, 512, None),
            (6, "a", 3, 10, 512, "carol"),
            (8.5, "a", 2, 18, 512, "alice"),
            (11, "b", 4, 8, 256, None),
            (13.5, "a", 5, 6, 256, "bob"),
            (16, "a", 2, 12, 1024, "carol"),
            (19, "b", 2, 10, 512, None),
            (22, "a", 3, 8, 512, "alice"),
        ),
    ),
    Scenario(
        "cap-user-limit-factor",
        "capacity",
        capacity_xml(
            {
                "a": {"capacity": "30", "maximum-capacity": "100", "user-limit-factor": "3"},
                "b": {
                    "capacity": "70",
                    "maximum-capacity": "100",
                    "user-limit-factor": "1",
                    "minimum-user-limit-percent": "25",
                },
            }
        ),
        _user_apps(
            (0, "a", 5, 15, 512, "alice"),
            (2, "b", 3, 20, 512, "bob"),
            (4, "b", 4, 10, 256, "carol"),
            (6, "a", 3, 12, 512, "alice"),
            (8, "b", 2, 15, 1024, "dave"),
            (10.5, "b", 4, 8, 512, "bob"),
            (13, "a", 2, 10, 512, "erin"),
            (15.5, "b", 3, 12, 256, "carol"),
            (18, "a", 4, 6, 512, "alice"),
            (21, "b", 2, 10, 512, "dave"),
        ),
    ),
    Scenario(
        "cap-am-limit-users",
        "capacity",
        capacity_xml(
            {
                "a": {
                    "capacity": "50",
                    "maximum-capacity": "100",
                    "user-limit-factor": "2",
                    "minimum-user-limit-percent": "50",
                },
                "b": {
                    "capacity": "50",
                    "maximum-capacity": "100",
                    "user-limit-factor": "1",
                    "maximum-am-resource-percent": "0.25",
                },
            },
            am_percent=0.12,
        ),
        _user_apps(
            (0, "a", 2, 12, 512, "alice"),
            (2, "a", 3, 8, 512, "bob"),
            (4, "b", 2, 10, 512, None),
            (6, "a", 1, 15, 1024, "alice"),
            (8, "b", 3, 6, 256, None),
            (10, "a", 4, 5, 256, "bob"),
            (12, "b", 2, 12, 512, "carol"),
            (14, "a", 2, 8, 512, "alice"),
            (16, "b", 3, 6, 512, None),
            (18.5, "a", 3, 6, 256, "bob"),
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
            (0, "a", 3, 15, 256, 3),
            (2, "b", 3, 20, 1024, 1),
            (4, "a", 2, 12, 256, 4),
            (6, "b", 4, 10, 512, 1),
            (8.5, "c", 3, 12, 256, 2),
            (11, "a", 2, 10, 512, 3),
            (13.5, "b", 2, 15, 1024, 1),
            (16, "c", 4, 8, 256, 2),
            (19, "a", 1, 20, 256, 4),
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
            (0, "a", 3, 12, 512, "alice"),
            (2, "b", 2, 15, 512, "bob"),
            (4, "a", 2, 10, 512, "alice"),
            (6, "b", 3, 8, 512, "carol"),
            (8, "a", 2, 12, 256, "bob"),
            (10, "b", 1, 15, 1024, "alice"),
            (12, "a", 3, 6, 512, "carol"),
            (14, "b", 2, 10, 512, "bob"),
            (16.5, "a", 4, 5, 256, "carol"),
            (19, "b", 2, 8, 512, "alice"),
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
            (0, "a", 2, 12, 512, 1),
            (2, "a", 3, 8, 256, 2),
            (4, "b", 3, 15, 512, 2),
            (6, "a", 2, 10, 512, 1),
            (8, "b", 2, 12, 1024, 1),
            (10, "a", 1, 15, 512, 2),
            (12, "b", 4, 6, 256, 1),
            (14, "a", 3, 6, 256, 1),
            (16.5, "b", 2, 10, 512, 2),
            (19, "a", 2, 8, 512, 1),
        ),
    ),
)


ALL_SCENARIOS: tuple[Scenario, ...] = SCENARIOS + SEMANTICS_SCENARIOS


CALIBRATION = Scenario(
    "calibration",
    "capacity",
    capacity_xml(
        {"cal": {"capacity": "100", "maximum-capacity": "100"}},
        am_percent=1.0,
        extra={"yarn.scheduler.capacity.per-node-heartbeat.maximum-offswitch-assignments": "8"},
    ),
    _apps(
        (0, "cal", 1, 4, 256),
        (2.5, "cal", 2, 6, 256),
        (5, "cal", 3, 3, 256),
        (7.5, "cal", 1, 8, 512),
        (10, "cal", 2, 5, 256),
        (12.5, "cal", 3, 4, 256),
        (15, "cal", 2, 7, 256),
        (17.5, "cal", 1, 3, 512),
        (20, "cal", 3, 6, 256),
        (22.5, "cal", 2, 4, 256),
    ),
)


def quick_scenarios(scenarios: Sequence[Scenario]) -> list[Scenario]:
    """The first scenario of each scheduler kind."""
    firsts = {s.scheduler: s for s in reversed(scenarios)}
    return [s for s in scenarios if firsts.get(s.scheduler) is s]


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
