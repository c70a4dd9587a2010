"""How yarn-adapt and a real RM judge an agreement case."""

from __future__ import annotations

import time
from pathlib import Path

from tests.schedconf.agreement_cases import AgreementCase, Verdict
from yarn_adapt.errors import ConfigFileError
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.minicluster.spec import DEFAULT_CAPACITY_XML, DEFAULT_FAIR_XML
from yarn_adapt.model import CapacitySchedulerConfig, FairSchedulerConfig
from yarn_adapt.yarn.confxml import (
    Enforcement,
    enforcement_of,
    parse_capacity_xml,
    parse_fair_xml,
    validate,
    yarn_refuses,
)

# What the running mini cluster holds before each case is written.
RUNNING_CAPACITY = parse_capacity_xml(DEFAULT_CAPACITY_XML, "baseline").config
RUNNING_FAIR = parse_fair_xml(DEFAULT_FAIR_XML, "baseline").config

# FairScheduler.reinitialize / AllocationFileLoaderService: the allocations were not loaded.
FAIR_REFUSED = ("Failed to reload allocations file", "Failed to reload fair scheduler config")
# FSQueue.verifyAndSetPolicyFromConf / QueueManager.createQueue: a setting was dropped.
FAIR_IGNORED = (
    "Setting scheduling policies for existing queues failed",
    "Can't create queue",
    "is only for leaf queues",
)


def parse_case(case: AgreementCase) -> CapacitySchedulerConfig | FairSchedulerConfig:
    if case.scheduler == "capacity":
        return parse_capacity_xml(case.xml, case.name).config
    return parse_fair_xml(case.xml, case.name).config


def our_verdict(case: AgreementCase) -> tuple[Verdict, list[str]]:
    """(verdict, reasons) of yarn-adapt's reader and validator."""
    try:
        config = parse_case(case)
    except ConfigFileError as exc:
        return "refused", [str(exc)]
    running = RUNNING_CAPACITY if case.scheduler == "capacity" else RUNNING_FAIR
    issues = validate(config, running)
    reasons = [f"{enforcement_of(i)}: {i}" for i in issues]
    if yarn_refuses(issues):
        return "refused", reasons
    if any(enforcement_of(i) is Enforcement.IGNORED for i in issues):
        return "ignored", reasons
    return "accepted", reasons


def rm_capacity_verdict(cluster: MiniCluster, case: AgreementCase) -> tuple[Verdict, str]:
    cluster.write_scheduler_xml(case.xml)
    done = cluster.refresh_queues()
    if done.returncode != 0:
        return "refused", done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return "accepted", ""


def rm_fair_verdict(cluster: MiniCluster, case: AgreementCase) -> tuple[Verdict, str]:
    log = cluster.layout.logs_dir / "resourcemanager.log"
    start = log.stat().st_size
    cluster.write_scheduler_xml(case.xml)
    done = cluster.refresh_queues()
    assert done.returncode == 0, done.stderr  # the Fair Scheduler never fails the command
    text = _log_since(log, start)
    if any(marker in text for marker in FAIR_REFUSED):
        return "refused", _first_error(text)
    if any(marker in text for marker in FAIR_IGNORED):
        return "ignored", _first_error(text)
    return "accepted", ""


def _log_since(log: Path, start: int, settle_s: float = 1.0) -> str:
    # The RM writes its log before answering the admin call; the pause only covers
    # stream buffering.
    time.sleep(settle_s)
    with log.open("rb") as stream:
        stream.seek(start)
        return stream.read().decode("utf-8", "replace")


def _first_error(text: str) -> str:
    return next((line for line in text.splitlines() if " ERROR " in line), "")
