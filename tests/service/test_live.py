"""Acceptance against the real mini YARN (Hadoop 3.4 RM + NM + JobHistory, capacity
scheduler, file store): the service proposes, an operator approves through the HTTP
API or the page, the RM runs it; restarts keep the history; a crash between the file
write and the refresh is reconciled at the next start; with the RM stopped nothing
is done and the reason is shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.service.browser import click, open_first_proposal, sign_in, text_of
from tests.service.factories import TOKEN
from tests.service.live import (
    PROPOSED,
    api,
    live_service,
    reported_capacities,
    snapshot_proposer_for,
)
from yarn_adapt.cli import main
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.service.runner import serving
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import DecisionKind, ProposalState, RoundStatus
from yarn_adapt.service.state.store import SqliteJournal
from yarn_adapt.service.xmltext import parse_scheduler_text
from yarn_adapt.yarn.apply import ApplyStep, RefreshCommand, mismatches, unfinished
from yarn_adapt.yarn.rm import ResourceManagerClient

BASELINE = {"default": 40.0, "a": 30.0, "b": 30.0}
S = ProposalState


def test_the_tuner_proposes_it_is_approved_through_the_api_and_the_rm_runs_it(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    """The real tuner on the real RM's snapshot: queue a (30 %, user-limit-factor 1)
    gets more applications than its share lets run; the tuner proposes more for it."""
    service = live_service(
        capacity_cluster, tmp_path, snapshot_proposer_for(capacity_cluster, tmp_path)
    )
    assert service.start() == []
    apps = [capacity_cluster.submit_sleep_app("a", containers=2, sleep_s=20) for _ in range(4)]
    for app in apps:
        app.application_id()
    with serving(service) as server:
        assert server is not None
        url = server.url
        round_reply = api(url, "POST", "/api/rounds")
        assert round_reply.status_code == 200
        assert round_reply.json()["decisions"][0]["kind"] == "proposed", round_reply.text
        [listed] = api(url, "GET", "/api/proposals", token=None).json()
        assert listed["state"] == "pending"
        assert listed["predicted_latency_after_s"] < listed["predicted_latency_before_s"]
        detail = api(url, "GET", "/api/proposals/1", token=None).json()
        assert any(c["queue"] == "root.a" for c in detail["property_changes"])
        assert detail["reasons"] and detail["xml_diff"].startswith("---")
        assert reported_capacities(capacity_cluster) == BASELINE  # recommend changed nothing

        refused = api(url, "POST", "/api/proposals/1/approve", token="not-the-token")
        assert refused.status_code == 403
        assert reported_capacities(capacity_cluster) == BASELINE

        approved = api(url, "POST", "/api/proposals/1/approve")
        assert approved.status_code == 200, approved.text
        assert approved.json()["state"] == "applied", approved.text
        proposed = parse_scheduler_text(service.store.proposal(1).proposed_xml, "proposal 1")
        with ResourceManagerClient(capacity_cluster.rm_url) as rm:
            assert mismatches(proposed, rm.scheduler()) == []
        assert reported_capacities(capacity_cluster) != BASELINE

        twice = api(url, "POST", "/api/proposals/1/approve")
        assert twice.status_code == 409
        assert "proposal 1 is applied: only a pending proposal can be approved" in twice.text
        assert service.store.count_applies(1, "apply") == 1

        # Realized latency: the applications finish under the new configuration; the
        # next round measures them beside the prediction, on the API and in /metrics.
        for app in apps:
            app.wait()
        api(url, "POST", "/api/rounds")
        [measured] = api(url, "GET", "/api/proposals/1", token=None).json()["predictions"]
        assert measured["interval_figures"][0]["jobs"] >= 1
        assert measured["interval_figures"][0]["mean_s"] > 20.0
        # and the prediction checked on the very jobs it was about, now all finished
        assert measured["interval_source"].startswith("80% range")
        assert measured["population_jobs"] >= len(apps)
        checked = measured["checked"]
        assert checked is not None and checked["config"] == "proposed", measured
        assert checked["jobs"] == measured["population_jobs"] and checked["realised_s"] > 20.0
        metrics = api(url, "GET", "/metrics", token=None).text
        assert 'yarn_adapt_realized_latency_seconds{group="root"}' in metrics
    service.close()

    restarted = live_service(capacity_cluster, tmp_path)
    assert restarted.start() == []
    with serving(restarted) as server:
        assert server is not None
        [kept] = api(server.url, "GET", "/api/proposals", token=None).json()
        assert kept["state"] == "applied"
        [applied] = api(server.url, "GET", "/api/applies", token=None).json()
        assert applied["result"] == "applied"
        assert applied["actor"] == "operator (shared token) (api)"
        steps = [e.step for e in restarted.store.journal_entries(applied["apply_id"])]
        assert steps[-1] is ApplyStep.VERIFIED
    restarted.close()


class Crash(BaseException):
    """The process dying between the file write and the refresh."""


def test_a_crash_between_write_and_refresh_is_reconciled_at_the_next_start(
    capacity_cluster: MiniCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = live_service(capacity_cluster, tmp_path)
    service.start()
    service.loop.run_round()

    def crash(self: RefreshCommand) -> None:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(RefreshCommand, "activate", crash)
        with pytest.raises(Crash):
            service.desk.approve(1, "alice")
    assert "<value>50</value>" in capacity_cluster.read_scheduler_xml()  # written ...
    assert reported_capacities(capacity_cluster) == BASELINE  # ... never refreshed
    [interrupted] = unfinished(SqliteJournal(service.store))
    assert interrupted.step is ApplyStep.WRITTEN
    service.close()

    restarted = live_service(capacity_cluster, tmp_path)
    done = restarted.start()
    assert len(done) == 2 and "interrupted after written): verified" in done[0]
    assert reported_capacities(capacity_cluster) == PROPOSED
    assert restarted.store.proposal(1).state is S.APPLIED
    assert unfinished(SqliteJournal(restarted.store)) == []
    restarted.close()


def test_with_the_rm_stopped_nothing_is_done_and_the_reason_is_shown(
    capacity_cluster: MiniCluster, tmp_path: Path
) -> None:
    service = live_service(capacity_cluster, tmp_path)
    service.start()
    service.loop.run_round()
    before = capacity_cluster.read_scheduler_xml()
    capacity_cluster.stop_resourcemanager()
    try:
        report = service.loop.run_round()
        assert report.status is RoundStatus.SKIPPED
        [decision] = report.decisions
        assert decision.kind is DecisionKind.RM_UNAVAILABLE
        assert "the RM is unreachable; no action taken" in decision.reason
        status = service.loop.status()
        assert status["rm_available"] is False
        assert "unreachable" in str(status["rm_problem"])

        attempt = service.desk.approve(1, "alice")
        assert attempt.state is S.APPROVED  # nothing written, ready to apply later
        assert "unreachable" in attempt.note or "refused" in attempt.note
        assert capacity_cluster.read_scheduler_xml() == before
    finally:
        capacity_cluster.restart_resourcemanager()
    applied = service.desk.apply(1, "alice")
    assert applied.state is S.APPLIED, applied.note
    assert reported_capacities(capacity_cluster) == PROPOSED
    assert service.loop.run_round().status is RoundStatus.DONE
    service.close()


def test_an_operator_reads_the_diff_and_approves_in_the_browser(
    capacity_cluster: MiniCluster, tmp_path: Path, chromium: Any
) -> None:
    service: Service = live_service(capacity_cluster, tmp_path)
    service.start()
    service.loop.run_round()
    with serving(service) as server:
        assert server is not None
        open_first_proposal(chromium, server.url)
        changes = text_of(chromium, "property-changes").splitlines()
        assert "root.a capacity 30 50" in changes, changes
        chromium.find_element(By.CSS_SELECTOR, "#xml-diff-details summary").click()
        diff = text_of(chromium, "xml-diff")  # the operator opens the file diff
        assert "+" in diff and "<value>50</value>" in diff
        sign_in(chromium, TOKEN)
        click(chromium, "approve")  # opens the confirmation
        click(chromium, "confirm")
        assert text_of(chromium, "state") == "applied"
    assert reported_capacities(capacity_cluster) == PROPOSED
    service.close()


def test_serve_once_runs_a_round_against_the_rm_and_keeps_a_private_token(
    capacity_cluster: MiniCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    config = tmp_path / "yarn-adapt.toml"
    config.write_text(
        f'[yarn]\nrm = ["{capacity_cluster.rm_url}"]\nhistory = "{capacity_cluster.jhs_url}"\n'
        f'retries = 0\n[scheduler]\nfile = "{capacity_cluster.scheduler_xml_path}"\n'
        f'[state]\ndir = "{state}"\n'
    )
    assert main(["serve", "--config", str(config), "--once"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["status"] == "done"
    # An idle cluster: nothing to tune. The cluster serves the whole session, so jobs
    # of earlier tests may have finished on it: this first round then counts them as
    # submitted and finished before it looked (which of the two depends on test order).
    assert [d["kind"] for d in report["decisions"]] in (
        ["no-new-submissions"],
        ["nothing-pending"],
    ), report["decisions"]
    assert set(report["timings_s"]) >= {"observe", "propose", "record"}
    token = state / "token"
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text().strip()) >= 32
