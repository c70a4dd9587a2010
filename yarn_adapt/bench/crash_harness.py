"""A crash harness that really kills: the service's apply runs in a child process
that is sent SIGKILL, then the service's own recovery runs, then the harness checks
that the scheduler file (or the RM's scheduler-conf), the RM's ``/scheduler`` and
the store agree on one of the two configurations.

One trial, against a real mini YARN:

1. read what runs now (the file's bytes, or ``GET /scheduler-conf``) and store a
   proposal that changes it (the other configuration of the pair; for the
   refusal kinds a configuration the RM refuses);
2. start :mod:`yarn_adapt.bench.crash_child`, which approves the proposal through
   the real :class:`~yarn_adapt.service.loop.desk.ProposalDesk` and applier;
3. kill it: right after a chosen journal step is durably recorded (the child
   SIGKILLs itself) or after a random delay (the harness sends SIGKILL);
4. restart: :func:`~yarn_adapt.service.loop.reconcile.reconcile` on the same database
   with a fresh :class:`~yarn_adapt.service.backend.YarnBackend`, as ``serve``
   does at start;
5. check: the file holds exactly the old bytes or the new configuration; the RM
   reports that configuration and not the other one; the proposal, its apply row
   and the journal's final step record that same outcome (applied for the new one;
   failed, or approved when nothing was changed, for the old one); nothing is left
   open. Any difference counts the trial as inconsistent, with the reasons.

Three applier paths (:data:`PATHS`), each with kinds of trial: a normal apply, and
the refusal paths (the RM refuses a configuration yarn-adapt's validator was told
to let through; a report that lags so the mutation is reversed; a Fair reload
slower than the verify timeout, so the file is restored).
"""

from __future__ import annotations

import getpass
import json
import multiprocessing
import os
import random
import signal
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from yarn_adapt.bench import crash_child
from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.minicluster import MiniCluster, MiniClusterSpec
from yarn_adapt.model import (
    CapacitySchedulerConfig,
    FairSchedulerConfig,
    Percentage,
    SchedulerConfig,
)
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.loop.reconcile import needs_reconcile, reconcile
from yarn_adapt.service.settings import load_settings
from yarn_adapt.service.state.records import ProposalRecord, ProposalState
from yarn_adapt.service.state.store import SqliteJournal, Store
from yarn_adapt.yarn.apply import ApplyStep, interrupted, mismatches, running_document
from yarn_adapt.yarn.confxml import (
    SchedulerDocument,
    diff_configs,
    parse_scheduler_document,
)
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient

S = ApplyStep
CHILD_TIMEOUT_S = 240.0
READY_TIMEOUT_S = 60.0
RECOVERY_VERIFY_S = 40.0
RECOVERY_ROUND_S = 0.2
RECOVERY_ROUNDS_S = 10.0
START_SETTLE_S = 40.0

# Children are forked from a server that imported the child's module once: a new
# process per trial, without a second of imports in each.
_FORK_SERVER = multiprocessing.get_context("forkserver")
_FORK_SERVER.set_forkserver_preload([crash_child.__name__])


@dataclass(frozen=True)
class TrialKind:
    """One way an apply goes: which fault the child gets, how long it waits for
    the RM, and the journal steps it passes (the deterministic kill points)."""

    name: str
    steps: tuple[ApplyStep, ...]
    verify_timeout_s: float
    fault: str = ""
    horizon_s: float = 5.0  # a first guess of the apply's length, for random kills
    refused: bool = False  # the desired configuration is one the RM refuses


@dataclass(frozen=True)
class ApplierPath:
    name: str
    cluster: MiniClusterSpec
    via: str
    kinds: tuple[TrialKind, ...]

    def kind(self, name: str) -> TrialKind:
        return next(kind for kind in self.kinds if kind.name == name)

    @property
    def kill_points(self) -> tuple[tuple[str, ApplyStep], ...]:
        """Every (kind, step) a deterministic kill covers."""
        return tuple((kind.name, step) for kind in self.kinds for step in kind.steps)


PATHS: dict[str, ApplierPath] = {
    "file+refresh": ApplierPath(
        "file+refresh",
        MiniClusterSpec(scheduler="capacity", conf_store="file"),
        "file",
        (
            TrialKind("normal", (S.PLANNED, S.BACKED_UP, S.WRITTEN, S.ACTIVATED, S.VERIFIED), 30.0),
            TrialKind(
                "refused",
                (S.ROLLING_BACK, S.RESTORED, S.ROLLED_BACK),
                30.0,
                "force-invalid",
                horizon_s=8.0,
                refused=True,
            ),
            TrialKind(
                "lagging",
                (S.ROLLING_BACK, S.RESTORED, S.ROLLED_BACK),
                1.5,
                "lagging-report",
                horizon_s=8.0,
            ),
        ),
    ),
    "mutation": ApplierPath(
        "mutation",
        MiniClusterSpec(scheduler="capacity", conf_store="memory"),
        "mutation",
        (
            TrialKind("normal", (S.PLANNED, S.ACTIVATED, S.VERIFIED), 30.0, horizon_s=1.0),
            TrialKind("refused", (S.FAILED,), 30.0, "force-invalid", horizon_s=1.0, refused=True),
            TrialKind(
                "lagging",
                (S.ROLLING_BACK, S.RESTORED, S.ROLLED_BACK),
                1.5,
                "lagging-report",
                horizon_s=2.5,
            ),
        ),
    ),
    "fair-reload": ApplierPath(
        "fair-reload",
        MiniClusterSpec(scheduler="fair"),
        "file",
        (
            TrialKind(
                "normal",
                (S.PLANNED, S.BACKED_UP, S.WRITTEN, S.ACTIVATED, S.VERIFIED),
                40.0,
                horizon_s=15.0,
            ),
            TrialKind(
                "short",
                (S.ROLLING_BACK, S.RESTORED, S.ROLLED_BACK),
                2.0,
                horizon_s=3.0,
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Trial:
    """Kill after journal step ``kill_after``, or ``kill_delay_s`` after the child
    is ready (None and None: let it finish)."""

    kind: str
    kill_after: ApplyStep | None = None
    kill_delay_s: float | None = None


@dataclass(frozen=True)
class TrialResult:
    path: str
    kind: str
    trial: Trial
    by_step: str  # where the kill landed: after:<step>, random:<last step>, ...
    truth: str  # which configuration the file / RM hold: new, old, neither
    outcome: str  # the proposal's state after recovery
    problems: tuple[str, ...]
    seconds: float
    child_seconds: float
    recovered: tuple[str, ...] = ()

    @property
    def consistent(self) -> bool:
        return not self.problems


@dataclass
class _Before:
    config: SchedulerConfig
    document: SchedulerDocument
    data: bytes | None  # the file's exact bytes (file paths)


class CrashHarness:
    """Runs trials of one applier path against a running mini cluster; its state
    (database, backups, settings files, the children's log) lives in ``workdir``."""

    def __init__(
        self,
        path: ApplierPath,
        cluster: MiniCluster,
        workdir: Path,
        rng: random.Random | None = None,
    ) -> None:
        self.path = path
        self.cluster = cluster
        self.workdir = workdir
        self.rng = rng or random.Random(1)
        self.state_dir = workdir / "state"
        self.database = self.state_dir / "yarn-adapt.db"
        self._durations: dict[str, list[float]] = {}
        self._trials = 0
        workdir.mkdir(parents=True, exist_ok=True)
        for kind in path.kinds:
            self._write_settings(self._settings_file(kind.name), kind.verify_timeout_s)
        self._write_settings(self._settings_file("recovery"), RECOVERY_VERIFY_S)
        self._baseline = self._read().config

    # ------------------------------------------------------------------ trials

    def deterministic_trials(self) -> list[Trial]:
        return [Trial(kind, kill_after=step) for kind, step in self.path.kill_points]

    def random_trial(self) -> Trial:
        kind = self.rng.choice(self.path.kinds)
        return Trial(kind.name, kill_delay_s=self.rng.uniform(0.0, self._horizon(kind)))

    def run(self, trial: Trial) -> TrialResult:
        began = time.monotonic()
        self._trials += 1
        kind = self.path.kind(trial.kind)
        before = self._settled_start()
        desired = self._desired(kind, before.config)
        proposal_id = self._propose(before, desired)
        child_seconds, landed, child_problem = self._run_child(trial, kind, proposal_id)
        recovered, recovery_problem = self._recover()
        truth, outcome, problems = self._check(before, desired, proposal_id, kind)
        problems = [p for p in (child_problem, recovery_problem) if p] + problems
        return TrialResult(
            self.path.name,
            kind.name,
            trial,
            landed,
            truth,
            outcome,
            tuple(problems),
            round(time.monotonic() - began, 3),
            round(child_seconds, 3),
            tuple(recovered),
        )

    def _horizon(self, kind: TrialKind) -> float:
        seen = sorted(self._durations.get(kind.name, ()))
        if not seen:
            return kind.horizon_s
        return 1.2 * seen[len(seen) // 2]

    # ------------------------------------------------------------------ the two configurations

    def _desired(self, kind: TrialKind, current: SchedulerConfig) -> SchedulerConfig:
        """The other configuration of the pair (or one the RM refuses)."""
        if kind.refused:
            return refused_variant(current)
        if diff_configs(current, self._baseline):
            return self._baseline
        return changed_variant(self._baseline)

    # ------------------------------------------------------------------ one trial's steps

    def _settled_start(self) -> _Before:
        """What runs now, once the RM reports it (a Fair reload left pending by
        whoever changed the file last must land before a trial starts)."""
        deadline = time.monotonic() + START_SETTLE_S
        while True:
            before = self._read()
            with self._rm() as rm:
                if not mismatches(before.config, rm.scheduler()):
                    return before
            if time.monotonic() > deadline:
                return before  # the trial's check will name the disagreement
            time.sleep(0.5)

    def _read(self) -> _Before:
        if self.path.via == "mutation":
            with self._rm() as rm:
                running: SchedulerDocument = running_document(rm)
            return _Before(running.config, running, None)
        data = self.cluster.scheduler_xml_path.read_bytes()
        document = parse_scheduler_document(data, str(self.cluster.scheduler_xml_path))
        return _Before(document.config, document, data)

    def _propose(self, before: _Before, desired: SchedulerConfig) -> int:
        store = Store(self.database)
        try:
            draft = ProposalRecord(
                id=0,
                created_at=0.0,
                updated_at=0.0,
                state=ProposalState.PENDING,
                round_id=None,
                target=self._target(),
                base_xml=before.document.render(),
                proposed_xml=before.document.render(desired),  # type: ignore[arg-type]
                changes=tuple(diff_configs(before.config, desired)),
                groups=(),
                cluster_before_s=1.0,
                cluster_after_s=0.5,
                reasons=("crash-safety trial",),
            )
            return store.create_proposal(draft, ("root",), actor="crash-harness").id
        finally:
            store.close()

    def _target(self) -> str:
        if self.path.via == "mutation":
            return f"{self.cluster.rm_url}/ws/v1/cluster/scheduler-conf"
        return str(self.cluster.scheduler_xml_path)

    def _run_child(self, trial: Trial, kind: TrialKind, proposal_id: int) -> tuple[float, str, str]:
        """Start the child, kill it as the trial says; (seconds it ran after ready,
        where the kill landed, a problem of the harness itself or '')."""
        receive, send = _FORK_SERVER.Pipe(duplex=False)
        kill_after = str(trial.kill_after) if trial.kill_after is not None else ""
        child = _FORK_SERVER.Process(
            target=crash_child.run,
            args=(
                str(self._settings_file(kind.name)),
                proposal_id,
                kill_after,
                kind.fault,
                send,
                str(self.workdir / "children.log"),
            ),
            name=f"crash-child-{self._trials}",
        )
        child.start()
        send.close()
        try:
            if not _ready(receive):
                child.join(5.0)
                return 0.0, "child-failed", f"the child did not start (exit {child.exitcode})"
            return self._kill(child, trial, kind, proposal_id)
        finally:
            receive.close()
            if child.exitcode is None:
                child.kill()
                child.join()
            child.close()

    def _kill(
        self, child: BaseProcess, trial: Trial, kind: TrialKind, proposal_id: int
    ) -> tuple[float, str, str]:
        ready = time.monotonic()
        delay = trial.kill_delay_s if trial.kill_delay_s is not None else CHILD_TIMEOUT_S
        child.join(delay)
        killed_by_us = child.exitcode is None
        if killed_by_us:
            assert child.pid is not None
            os.kill(child.pid, signal.SIGKILL)
            child.join()
        ran = time.monotonic() - ready
        last = self._last_step(proposal_id)
        died = child.exitcode == -signal.SIGKILL
        if not died or last in (S.VERIFIED, S.ROLLED_BACK, S.FAILED):
            self._durations.setdefault(kind.name, []).append(ran)
        exited = "" if child.exitcode == 0 else f"the child exited {child.exitcode}"
        if trial.kill_after is not None:
            if died and not killed_by_us:
                return ran, f"after:{trial.kill_after}", ""
            why = f"the child was not killed after {trial.kill_after} (last step {last})"
            return ran, f"after:{trial.kill_after}", why
        if trial.kill_delay_s is None:
            return ran, "none", exited
        if not killed_by_us:
            return ran, "random:finished", exited
        return ran, f"random:{last or 'none'}", ""

    def _last_step(self, proposal_id: int) -> ApplyStep | None:
        store = Store(self.database)
        try:
            steps = [
                entry.step
                for record in store.applies(proposal_id=proposal_id)
                for entry in store.journal_entries(record.apply_id)
            ]
        finally:
            store.close()
        return steps[-1] if steps else None

    def _recover(self) -> tuple[list[str], str]:
        """What ``serve`` does at start: a fresh backend, then reconcile -- and what
        its next rounds do while an apply is still open: reconcile again. An apply is
        left open when its lock is still held, by a process the killed one had
        forked that has not yet let go of it (a refresh command between fork and
        exec); here the rounds come every ``RECOVERY_ROUND_S``, for at most
        ``RECOVERY_ROUNDS_S``."""
        store = Store(self.database)
        try:
            backend = YarnBackend(load_settings(self._settings_file("recovery")))
            try:
                done = reconcile(store, backend)
                deadline = time.monotonic() + RECOVERY_ROUNDS_S
                while needs_reconcile(store) and time.monotonic() < deadline:
                    time.sleep(RECOVERY_ROUND_S)
                    done += reconcile(store, backend)
                return done, ""
            finally:
                backend.close()
        except YarnAdaptError as exc:
            return [], f"recovery failed: {exc.one_line()}"
        finally:
            store.close()

    # ------------------------------------------------------------------ the check

    def _check(
        self, before: _Before, desired: SchedulerConfig, proposal_id: int, kind: TrialKind
    ) -> tuple[str, str, list[str]]:
        problems: list[str] = []
        truth, truth_problems = self._truth(before, desired)
        problems += truth_problems
        running = desired if truth == "new" else before.config
        other = before.config if truth == "new" else desired
        with self._rm() as rm:
            status = rm.scheduler()
        reported = mismatches(running, status)
        if reported:
            problems.append(f"the RM does not report the {truth} configuration: {reported[0]}")
        if not kind.refused and not mismatches(other, status):
            problems.append("the RM's report cannot tell the two configurations apart")
        outcome, record_problems = self._records(proposal_id, truth)
        if truth == "new" and kind.refused:
            problems.append("the RM runs a configuration it should have refused")
        return truth, outcome, problems + record_problems

    def _truth(self, before: _Before, desired: SchedulerConfig) -> tuple[str, list[str]]:
        """Which configuration the target holds now: for a file, the old one means
        its old bytes exactly."""
        now = self._read()
        if before.data is not None:
            if now.data == before.data:
                return "old", []
            if not diff_configs(now.config, desired):
                return "new", []
            close = "" if diff_configs(now.config, before.config) else " (not byte for byte)"
            return "neither", [f"the file holds neither configuration{close}"]
        if not diff_configs(now.config, desired):
            return "new", []
        if not diff_configs(now.config, before.config):
            return "old", []
        return "neither", ["scheduler-conf holds neither configuration"]

    def _records(self, proposal_id: int, truth: str) -> tuple[str, list[str]]:
        store = Store(self.database)
        try:
            proposal = store.proposal(proposal_id)
            applies = sorted(store.applies(proposal_id=proposal_id), key=lambda a: a.id)
            journal = SqliteJournal(store)
            open_applies = [a.apply_id for a in store.unfinished_applies()]
            open_journal = [h.apply_id for h in interrupted(journal)]
            finals = [store.journal_entries(a.apply_id)[-1].step for a in applies
                      if store.journal_entries(a.apply_id)]  # fmt: skip
            results = [a.result for a in applies]
        finally:
            store.close()
        state = proposal.state
        problems = [f"apply {a} left open" for a in open_applies + open_journal]
        problems += _record_problems(truth, state, results, finals)
        return str(state), problems

    # ------------------------------------------------------------------ plumbing

    def _rm(self) -> ResourceManagerClient:
        return ResourceManagerClient(self.cluster.rm_url, HttpSettings(user=getpass.getuser()))

    def _settings_file(self, name: str) -> Path:
        return self.workdir / f"settings-{name}.toml"

    def _write_settings(self, path: Path, verify_timeout_s: float) -> None:
        lines = [
            "[yarn]",
            f"rm = [{json.dumps(self.cluster.rm_url)}]",
            "retries = 1",
            "timeout_s = 20.0",
            "[scheduler]",
            f'via = "{self.path.via}"',
            f"verify_timeout_s = {verify_timeout_s}",
            f"refresh_command = {json.dumps(list(self.cluster.refresh_command))}",
            "[state]",
            f"dir = {json.dumps(str(self.state_dir))}",
            "[http]",
            "enabled = false",
        ]
        if self.path.via == "file":
            lines.insert(5, f"file = {json.dumps(str(self.cluster.scheduler_xml_path))}")
        path.write_text("\n".join(lines) + "\n")


def _record_problems(
    truth: str, state: ProposalState, results: list[str], finals: list[ApplyStep]
) -> list[str]:
    """The store must say what runs: applied (and a verified journal) for the new
    configuration; for the old one, failed or -- when nothing was changed --
    approved (or still pending/approved when the kill came before the apply)."""
    problems: list[str] = []
    if truth == "new":
        if state is not ProposalState.APPLIED:
            problems.append(f"the new configuration runs but the proposal is {state}")
        if "applied" not in results:
            problems.append(f"the new configuration runs but the applies say {results}")
        if finals and not finals[-1].new_config_runs:
            problems.append(f"the new configuration runs but the journal ends {finals[-1]}")
        return problems
    if truth != "old":
        return problems
    allowed = {ProposalState.FAILED, ProposalState.APPROVED, ProposalState.PENDING}
    if state not in allowed:
        problems.append(f"the old configuration runs but the proposal is {state}")
    if "applied" in results:
        problems.append(f"the old configuration runs but the applies say {results}")
    if finals and finals[-1].new_config_runs:
        problems.append(f"the old configuration runs but the journal ends {finals[-1]}")
    if state is ProposalState.FAILED and finals and all(f is S.ABANDONED for f in finals):
        problems.append("nothing was changed but the proposal is failed (should be approved)")
    return problems


def refused_variant(config: SchedulerConfig) -> SchedulerConfig:
    """A Capacity configuration YARN refuses: root.default at 60 % makes the
    children's capacities add up to more than 100."""
    assert isinstance(config, CapacitySchedulerConfig)
    return _with_capacity(config, "root.default", 60.0)


def changed_variant(config: SchedulerConfig) -> SchedulerConfig:
    """The second configuration of the pair, different in what ``/scheduler``
    reports: Capacity shares 20/50/30; Fair root.b FIFO and root.a at most 7 apps."""
    if isinstance(config, CapacitySchedulerConfig):
        for path, percent in (("root.default", 20.0), ("root.a", 50.0), ("root.b", 30.0)):
            config = _with_capacity(config, path, percent)
        return config
    assert isinstance(config, FairSchedulerConfig)
    a, b = config.find("root.a"), config.find("root.b")
    assert a is not None and b is not None
    config = config.with_queue(replace(b, scheduling_policy="fifo"))
    return config.with_queue(replace(a, max_running_apps=7))


def _with_capacity(
    config: CapacitySchedulerConfig, path: str, percent: float
) -> CapacitySchedulerConfig:
    queue = config.find(path)
    assert queue is not None
    return config.with_queue(replace(queue, capacity=Percentage(percent)))


def _ready(receive: Connection) -> bool:
    try:
        return receive.poll(READY_TIMEOUT_S) and receive.recv() == "ready"
    except EOFError:  # the child died before it was ready
        return False


def summarize(results: list[TrialResult], wall_s: float) -> dict[str, object]:
    """The bench's figures: trials, inconsistencies, where the kills landed, and per
    path the outcomes and trial times (median and worst)."""
    by_step: dict[str, int] = {}
    for result in results:
        by_step[result.by_step] = by_step.get(result.by_step, 0) + 1
    paths: dict[str, dict[str, object]] = {}
    for name in dict.fromkeys(r.path for r in results):
        mine = [r for r in results if r.path == name]
        paths[name] = _path_figures(mine)
    return {
        "trials": len(results),
        "inconsistent": sum(1 for r in results if not r.consistent),
        "by_step": dict(sorted(by_step.items())),
        "paths": paths,
        "wall_s": round(wall_s, 1),
    }


def _path_figures(results: list[TrialResult]) -> dict[str, object]:
    outcomes: dict[str, int] = {}
    truths: dict[str, int] = {}
    for result in results:
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
        truths[result.truth] = truths.get(result.truth, 0) + 1
    seconds = sorted(r.seconds for r in results)
    return {
        "trials": len(results),
        "inconsistent": sum(1 for r in results if not r.consistent),
        "outcomes": outcomes,
        "runs": truths,
        "trial_s_mean": round(sum(seconds) / len(seconds), 2),
        "trial_s_median": seconds[len(seconds) // 2],
        "trial_s_worst": seconds[-1],
    }
