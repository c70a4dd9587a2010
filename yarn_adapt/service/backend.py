"""The cluster the service drives, behind one narrow interface.

A :class:`ClusterBackend` observes (the running scheduler configuration as its file
reads, finished jobs for realized latency, and the backend's own view the proposer
needs), hands out the applier that makes the RM run a configuration, and recovers an
apply a crash interrupted. :class:`YarnBackend` is a real ResourceManager (+
JobHistory); :mod:`yarn_adapt.service.demo.simcluster` has the simulated one of the demo.
"""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from yarn_adapt.errors import SettingsError
from yarn_adapt.model import (
    AppState,
    CapacitySchedulerConfig,
    ClusterSnapshot,
    Node,
    SchedulerConfig,
)
from yarn_adapt.model.workload import JobSpec
from yarn_adapt.service.settings import Settings
from yarn_adapt.sim import ClusterSpec, SimulationOptions, SimulationStart
from yarn_adapt.yarn.apply import (
    Applier,
    ApplyHistory,
    ApplySettings,
    ApplyStep,
    FileApplier,
    MutationApplier,
    PollSettings,
    RefreshCommand,
    WaitForReload,
    activation_named,
    mismatches,
    running_document,
)
from yarn_adapt.yarn.apply.journal import ApplyJournal
from yarn_adapt.yarn.confxml import (
    SchedulerDocument,
    read_scheduler_document,
)
from yarn_adapt.yarn.history import JobHistoryClient
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.observe import observe_cluster
from yarn_adapt.yarn.rm import ResourceManagerClient
from yarn_adapt.yarn.site import (
    hadoop_conf_dir,
    jobhistory_web_address,
    rm_web_addresses,
    scheduler_file_in,
)


@dataclass(frozen=True)
class FinishedJob:
    """A job that ended, for realized latency: its leaf queue (name or path) and
    its submit and finish times (ms since the epoch or since the simulation start)."""

    id: str
    queue: str
    submitted_ms: int
    finished_ms: int

    @property
    def latency_s(self) -> float:
        return (self.finished_ms - self.submitted_ms) / 1000.0


@dataclass(frozen=True)
class SimulatedView:
    """What the proposer reads of a simulated cluster: the time, the jobs in
    progress (as a simulation start), the jobs submitted in the last segment, the
    cluster and the options the simulator runs with, and the jobs submitted over
    the last hours (``history``: the tuner's hindsight replay)."""

    time_s: float
    start: SimulationStart
    recent: tuple[JobSpec, ...]
    cluster: ClusterSpec
    options: SimulationOptions
    history: tuple[JobSpec, ...] = ()


@dataclass(frozen=True, eq=False)
class Observed:
    """One observation: when, the scheduler file as it runs (``document``: its text
    and model, able to render a new configuration as a patch of itself), the jobs
    that finished recently, ``view`` -- what the proposer reads (a
    :class:`~yarn_adapt.model.ClusterSnapshot` for a real RM, a
    :class:`SimulatedView` for the demo's simulated one) -- and ``drift``: every
    way the RM's report differs from the file (empty when it runs the file)."""

    taken_ms: int
    document: SchedulerDocument
    finished: tuple[FinishedJob, ...]
    view: ClusterSnapshot | SimulatedView
    drift: tuple[str, ...] = ()

    @property
    def config(self) -> SchedulerConfig:
        return self.document.config

    @property
    def text(self) -> str:
        return self.document.render()

    def render(self, config: SchedulerConfig) -> str:
        return self.document.render(config)  # type: ignore[arg-type]


class ClusterBackend(Protocol):
    @property
    def target(self) -> str:
        """What an apply changes (a file path, an endpoint), for the page."""
        ...

    def observe(self) -> Observed:
        """Raises a YarnError when the RM cannot be read (down, standby, timeout)."""
        ...

    def document(self) -> SchedulerDocument:
        """The running scheduler configuration alone (cheaper than observe)."""
        ...

    def applier(self, journal: ApplyJournal) -> Applier[SchedulerConfig]: ...

    def recover(self, history: ApplyHistory, journal: ApplyJournal) -> ApplyStep:
        """Finish or roll back an interrupted apply from its whole journal history;
        the final step recorded. A YarnError: the RM cannot be read, try later."""
        ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- YARN


class YarnBackend:
    """A real ResourceManager (+ JobHistory Server), the scheduler file it reads or
    its scheduler-conf API, and the appliers of :mod:`yarn_adapt.yarn.apply`."""

    def __init__(
        self,
        settings: Settings,
        *,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.settings = settings
        self._now_ms = now_ms
        http = http_settings(settings)
        addresses = rm_addresses(settings)
        refuse_unshared_file_with_ha(settings, addresses)
        self.rm = ResourceManagerClient(addresses, http)
        history = history_address(settings)
        self.history = JobHistoryClient(history, http) if history else None
        self.apply_settings = ApplySettings(
            state_dir=settings.state.state_dir,
            verify=PollSettings(timeout_s=settings.scheduler.verify_timeout_s, interval_s=0.5),
        )
        self.via_mutation = settings.scheduler.via == "mutation"
        self.path = None if self.via_mutation else scheduler_file(settings)
        # the node list, when the service shares one cache with the guard (its NodeCache)
        self.node_list: Callable[[], tuple[Node, ...]] | None = None

    @property
    def target(self) -> str:
        if self.path is not None:
            return str(self.path)
        return "|".join(self.rm.endpoints.base_urls) + "/ws/v1/cluster/scheduler-conf"

    def observe(self) -> Observed:
        window_ms = int(self.settings.yarn.app_window_s * 1000)
        observation = observe_cluster(
            self.rm, self.history, app_window_ms=window_ms, now_ms=self._now_ms,
            nodes=self.node_list,
        )  # fmt: skip
        snapshot = observation.snapshot
        document = self.document()
        drift = tuple(mismatches(document.config, snapshot.scheduler))
        return Observed(snapshot.taken_ms, document, finished_jobs(snapshot), snapshot, drift)

    def document(self) -> SchedulerDocument:
        """The scheduler configuration the RM runs, as its file (or API) says."""
        if self.path is not None:
            return read_scheduler_document(self.path)
        return running_document(self.rm)

    def applier(self, journal: ApplyJournal) -> Applier[SchedulerConfig]:
        if self.path is None:
            return MutationApplier(self.rm, self.apply_settings, journal)  # type: ignore[return-value]
        return FileApplier(self.path, self.rm, self._activation(), self.apply_settings, journal)

    def _activation(self) -> RefreshCommand | WaitForReload:
        assert self.path is not None
        if isinstance(read_scheduler_document(self.path).config, CapacitySchedulerConfig):
            return RefreshCommand(self.settings.scheduler.refresh_command)
        return WaitForReload()

    def recover(self, history: ApplyHistory, journal: ApplyJournal) -> ApplyStep:
        if history.applier.startswith("file+"):
            activation = activation_named(history.applier, self.settings.scheduler.refresh_command)
            applier = FileApplier(
                Path(history.target), self.rm, activation, self.apply_settings, journal
            )
            return applier.recover(history)
        return MutationApplier(self.rm, self.apply_settings, journal).recover(history)

    def close(self) -> None:
        self.rm.close()
        if self.history is not None:
            self.history.close()


def finished_jobs(snapshot: ClusterSnapshot) -> tuple[FinishedJob, ...]:
    """Apps that finished successfully (failed or killed apps say nothing about
    how long a job takes under a configuration)."""
    return tuple(
        FinishedJob(app.id, app.queue, app.submitted_ms, app.finished_ms)
        for app in snapshot.apps
        if app.state is AppState.FINISHED and app.finished_ms is not None
    )


# --------------------------------------------------------------------------- wiring


def http_settings(settings: Settings) -> HttpSettings:
    yarn = settings.yarn
    return HttpSettings(
        read_timeout_s=yarn.timeout_s,
        retries=yarn.retries,
        ca_bundle=yarn.ca_bundle or None,
        verify_tls=yarn.verify_tls,
        auth="kerberos" if yarn.kerberos else "simple",
        user=yarn.user or _login_name(),
        kerberos_principal=yarn.kerberos_principal or None,
        kerberos_keytab=yarn.kerberos_keytab or None,
    )


def rm_addresses(settings: Settings) -> list[str]:
    if settings.yarn.rm:
        return list(settings.yarn.rm)
    conf_dir = hadoop_conf_dir()
    if conf_dir is None:
        raise SettingsError(
            f"{settings.source}: [yarn] rm is empty and HADOOP_CONF_DIR is not set: "
            "no ResourceManager address"
        )
    return rm_web_addresses(conf_dir)


def refuse_unshared_file_with_ha(settings: Settings, addresses: list[str]) -> None:
    """File mode writes one file; with several RMs each reads its own copy unless the
    operator declares it shared, and a failover would silently revert a change."""
    if settings.scheduler.via != "file" or len(addresses) < 2 or settings.scheduler.shared_file:
        return
    raise SettingsError(
        f'{settings.source}: [scheduler] via = "file" with {len(addresses)} ResourceManagers '
        f"({', '.join(addresses)}): each RM reads its own scheduler file, so a failover would "
        "silently revert a change; set [scheduler] shared_file = true if every RM reads this "
        'same file, or use via = "mutation" with a shared configuration store'
    )


def history_address(settings: Settings) -> str | None:
    if settings.yarn.history:
        return settings.yarn.history
    conf_dir = hadoop_conf_dir()
    return jobhistory_web_address(conf_dir) if conf_dir else None


def scheduler_file(settings: Settings) -> Path:
    if settings.scheduler.file:
        return Path(settings.scheduler.file).expanduser()
    conf_dir = hadoop_conf_dir()
    if conf_dir is None:
        raise SettingsError(
            f"{settings.source}: [scheduler] file is empty and HADOOP_CONF_DIR is not set"
        )
    return scheduler_file_in(conf_dir)


def _login_name() -> str:
    try:
        return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    except (KeyError, OSError):
        return "yarn-adapt"
