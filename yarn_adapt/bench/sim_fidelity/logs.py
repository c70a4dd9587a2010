"""Each app's AM grant and containers read from the RM's and the NodeManagers' logs,
on the RM's clock (:func:`timelines_from_logs`).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from yarn_adapt.minicluster import (
    MiniCluster,
)
from yarn_adapt.model import Application
from yarn_adapt.sim.calibration import (
    AppTimeline,
    TaskTimeline,
)

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
