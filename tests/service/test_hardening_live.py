"""The service hardened, on the real mini YARN (Capacity Scheduler, file store):
SIGTERM while an apply approved through the API runs waits for it before the
database is closed; a round that finds the RM not running the scheduler file
records the drift and acts on nothing."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from tests.service.factories import TOKEN, with_capacities
from tests.service.live import PROPOSED, live_service, reported_capacities
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.service.state.records import (
    DecisionKind,
    ProposalRecord,
    ProposalState,
    RoundStatus,
)
from yarn_adapt.service.state.store import Store
from yarn_adapt.yarn.apply import ApplyStep
from yarn_adapt.yarn.confxml import diff_configs, read_capacity

ROOT = Path(__file__).resolve().parents[2]
# Longer than the web server takes to stop (a 5 s wait for its threads, then up to
# 5 s for its loop), after which the database used to be closed under the apply.
SLOW_REFRESH_S = 12
CLI = "import sys; from yarn_adapt.cli import main; sys.exit(main(sys.argv[1:]))"


def store_proposal(database: Path, cluster: MiniCluster) -> int:
    document = read_capacity(cluster.scheduler_xml_path)
    desired = with_capacities(document.config, **PROPOSED)
    store = Store(database)
    draft = ProposalRecord(
        id=0, created_at=0.0, updated_at=0.0, state=ProposalState.PENDING, round_id=None,
        target=str(cluster.scheduler_xml_path), base_xml=document.render(),
        proposed_xml=document.render(desired),  # type: ignore[arg-type]
        changes=tuple(diff_configs(document.config, desired)), groups=(),
        cluster_before_s=10.0, cluster_after_s=5.0, reasons=("test",),
    )  # fmt: skip
    proposal = store.create_proposal(draft, ("root",))
    store.close()
    return proposal.id


def serve_config(cluster: MiniCluster, tmp_path: Path) -> Path:
    slow_refresh = ["sh", "-c", f'sleep {SLOW_REFRESH_S}; exec "$0" "$@"', *cluster.refresh_command]
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(
        "[service]\ninterval_s = 3600.0\n"
        f'[yarn]\nrm = ["{cluster.rm_url}"]\nhistory = "{cluster.jhs_url}"\nretries = 0\n'
        f'[scheduler]\nfile = "{cluster.scheduler_xml_path}"\n'
        f"refresh_command = {json.dumps(slow_refresh)}\nverify_timeout_s = 30.0\n"
        '[tuning]\nexecutor = "serial"\n'
        f'[state]\ndir = "{tmp_path / "state"}"\n[http]\nport = 0\n'
    )
    return config


def wait_for_step(database: Path, step: ApplyStep, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        store = Store(database)
        steps = [e.step for e in store.journal_entries()]
        store.close()
        if step in steps:
            return
        time.sleep(0.2)
    raise AssertionError(f"the apply never reached {step}")


def test_sigterm_during_an_apply_waits_for_it_before_closing_the_database(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    database = tmp_path / "state" / "yarn-adapt.db"
    proposal_id = store_proposal(database, capacity_cluster)
    serve = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", "--config",
         str(serve_config(capacity_cluster, tmp_path))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "YARN_ADAPT_TOKEN": TOKEN},
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        if not line.startswith("yarn-adapt serving http://127.0.0.1:"):
            serve.kill()
            raise AssertionError(f"serve did not start: {serve.communicate()[1][-2000:]}")
        url = line.split()[2]
        answers: list[dict[str, object]] = []
        approval = threading.Thread(target=approve, args=(url, proposal_id, answers))
        approval.start()
        wait_for_step(database, ApplyStep.WRITTEN)  # the refresh is now sleeping

        serve.send_signal(signal.SIGTERM)
        _, errors = serve.communicate(timeout=90)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.communicate()
    approval.join()
    assert serve.returncode == 0, errors
    # The page was stopped only after the apply: the operator got the answer.
    assert [(a["status"], a["state"]) for a in answers] == [(200, "applied")]
    assert f"waiting up to 150 s for the apply in progress (p{proposal_id}-" in errors
    assert "the apply in progress has finished" in errors
    store = Store(database)
    assert store.proposal(proposal_id).state is ProposalState.APPLIED
    assert [a.result for a in store.applies()] == ["applied"]
    assert store.journal_entries()[-1].step is ApplyStep.VERIFIED
    store.close()
    assert reported_capacities(capacity_cluster) == PROPOSED


def approve(url: str, proposal_id: int, answers: list[dict[str, object]]) -> None:
    with contextlib.suppress(requests.RequestException):
        reply = requests.post(
            f"{url}/api/proposals/{proposal_id}/approve",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=60,
        )
        answers.append({"status": reply.status_code, **reply.json()})


def test_a_round_records_that_the_rm_does_not_run_the_file_and_takes_no_action(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    service = live_service(capacity_cluster, tmp_path)
    text = capacity_cluster.read_scheduler_xml()
    capacity_cluster.write_scheduler_xml(
        text.replace("<value>40</value>", "<value>20</value>", 1).replace(
            "<value>30</value>", "<value>50</value>", 1
        )
    )  # edited by hand, never refreshed

    report = service.loop.run_round()

    assert report.status is RoundStatus.SKIPPED
    [decision] = report.decisions
    assert decision.kind is DecisionKind.DRIFT
    assert decision.reason.startswith(
        f"the RM does not run the scheduler file ({capacity_cluster.scheduler_xml_path}): "
        "root.default capacity: RM reports 40.0, expected 20.0"
    )
    assert service.loop.status()["drift"]
    assert service.store.proposals() == []

    assert capacity_cluster.refresh_queues().returncode == 0
    again = service.loop.run_round()
    assert again.decisions[0].kind is not DecisionKind.DRIFT
    assert service.loop.status()["drift"] == []
    service.close()
