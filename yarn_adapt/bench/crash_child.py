"""The process the crash-safety harness kills: one operator approval carried out by
the service's own code (settings file, SQLite store, :class:`YarnBackend`,
:class:`ProposalDesk`, the real appliers), in a process of its own.

``python -m yarn_adapt.bench.crash_child --settings FILE --proposal N
[--kill-after STEP] [--fault KIND]`` prints ``ready`` once everything is built (the
harness times random kills from there), then approves proposal N, then prints the
proposal's state as JSON. The harness starts it as :func:`run` in a process forked
from a multiprocessing fork server that has imported this module once (a new
process per trial without a second of imports each time), and is told ``ready``
through a pipe.

- ``--kill-after STEP``: the process sends itself SIGKILL right after the journal
  durably records STEP -- a deterministic crash at each step.
- ``--fault force-invalid``: yarn-adapt's own validator is switched off, so the RM
  itself refuses the configuration (the refusal and rollback paths, for real).
- ``--fault lagging-report``: ``/scheduler`` shows each change only ``--lag``
  seconds after it happened (a slow RM the real one cannot be made to be), so
  verification times out and the apply is rolled back or the mutation reversed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from yarn_adapt.model import SchedulerStatus
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.loop.desk import ProposalDesk
from yarn_adapt.service.metrics import ServiceMetrics
from yarn_adapt.service.settings import load_settings
from yarn_adapt.service.state.records import ProposalRecord
from yarn_adapt.service.state.store import Store
from yarn_adapt.yarn.apply import (
    ApplyJournal,
    ApplyStep,
    JournalEntry,
    file_applier,
    mutation_applier,
)
from yarn_adapt.yarn.rm import ResourceManagerClient

ACTOR = "crash-harness"
FAULTS = ("", "force-invalid", "lagging-report")


class KillAfter:
    """A journal that dies right after recording ``step`` (the entry is committed
    first, exactly as the real journal commits it)."""

    def __init__(self, inner: ApplyJournal, step: ApplyStep) -> None:
        self.inner = inner
        self.step = step

    def record(self, entry: JournalEntry) -> None:
        self.inner.record(entry)
        if entry.step is self.step:
            os.kill(os.getpid(), signal.SIGKILL)

    def entries(self) -> list[JournalEntry]:
        return self.inner.entries()


def _never_invalid(*args: object, **kwargs: object) -> None:
    return None


def _lagging(rm: ResourceManagerClient, lag_s: float) -> None:
    """``/scheduler`` shows each change ``lag_s`` after it could first be seen (an RM
    whose report trails what it runs; counted from the change, so a slow refresh on
    a loaded machine does not shorten it)."""
    real = rm.scheduler
    shown = latest = real()
    latest_since = time.monotonic()

    def scheduler() -> SchedulerStatus:
        nonlocal shown, latest, latest_since
        now, status = time.monotonic(), real()
        if status != latest:
            latest, latest_since = status, now
        if now - latest_since >= lag_s:
            shown = latest
        return shown

    rm.scheduler = scheduler  # type: ignore[method-assign]


def approve(
    settings_file: str,
    proposal: int,
    *,
    kill_after: str = "",
    fault: str = "",
    lag_s: float = 6.0,
    ready: Callable[[], None] = lambda: None,
) -> ProposalRecord:
    """Build the service's pieces from the settings file, arm the kill and the
    fault, say ``ready``, approve."""
    settings = load_settings(settings_file)
    store = Store(settings.state.database_path)
    backend = YarnBackend(settings)
    desk = ProposalDesk(store, backend, ServiceMetrics(store))
    if kill_after:
        desk.journal = KillAfter(desk.journal, ApplyStep(kill_after))
    if fault == "force-invalid":
        file_applier.raise_if_invalid = _never_invalid  # type: ignore[attr-defined]
        mutation_applier.raise_if_invalid = _never_invalid  # type: ignore[attr-defined]
    elif fault == "lagging-report":
        _lagging(backend.rm, lag_s)
    ready()
    return desk.approve(proposal, ACTOR)


def run(
    settings_file: str,
    proposal: int,
    kill_after: str,
    fault: str,
    ready: Connection,
    log_file: str,
) -> None:
    """The fork-server entry: output to ``log_file``, ``ready`` through the pipe."""
    with Path(log_file).open("ab", buffering=0) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)

    def say_ready() -> None:
        ready.send("ready")
        ready.close()

    approve(settings_file, proposal, kill_after=kill_after, fault=fault, ready=say_ready)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="crash_child")
    parser.add_argument("--settings", required=True)
    parser.add_argument("--proposal", type=int, required=True)
    parser.add_argument("--kill-after", default="")
    parser.add_argument("--fault", default="", choices=FAULTS)
    parser.add_argument("--lag", type=float, default=6.0)
    args = parser.parse_args(argv)
    record = approve(
        args.settings,
        args.proposal,
        kill_after=args.kill_after,
        fault=args.fault,
        lag_s=args.lag,
        ready=lambda: print("ready", flush=True),
    )
    print(json.dumps({"state": str(record.state), "note": record.note}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
