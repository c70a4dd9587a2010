"""The console's pages read as HTML (Flask's test client and lxml, no browser): the
queue tree of either scheduler with live usage and waiting containers as bars and
an open proposal overlaid, the evidence behind a proposal with its links, and the
words for people (local time with its zone, long notes behind a click, actions
named as their endpoints)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from lxml import html

from tests.service.factories import (
    TOKEN,
    FairWeights,
    FixedProposer,
    settings_for,
    sim_service,
    simulated_backend,
    small_workload,
)
from yarn_adapt.service.backend import Observed, YarnBackend
from yarn_adapt.service.demo.replay import DemoOptions, build_demo
from yarn_adapt.service.proposers.evidence import MEDIAN_FALLBACK
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import PredictionError, RealizedLatency, Suggestion
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.console import run_words
from yarn_adapt.service.web.words import percent

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def page(client: FlaskClient, path: str) -> html.HtmlElement:
    reply = client.get(path)
    assert reply.status_code == 200, path
    return html.fromstring(reply.get_data(as_text=True))


def c(name: str) -> str:
    """An XPath test for an element of class ``name``."""
    return f'contains(concat(" ", normalize-space(@class), " "), " {name} ")'


def one(element: html.HtmlElement, xpath: str) -> html.HtmlElement:
    found = element.xpath(xpath)
    assert len(found) == 1, (xpath, len(found))
    return found[0]


def text(element: html.HtmlElement) -> str:
    return " ".join(element.text_content().split())


def tree_rows(doc: html.HtmlElement) -> dict[str, html.HtmlElement]:
    return {
        row.get("data-queue"): row
        for row in doc.xpath(
            f'//table[@id="queue-tree"]/tbody/tr[@data-queue][not({c("proposed-row")})]'
        )
    }


def proposed_rows(doc: html.HtmlElement, queue: str) -> list[str]:
    rows = doc.xpath(f'//table[@id="queue-tree"]//tr[{c("proposed-row")}][@data-queue="{queue}"]')
    return [text(r) for r in rows]


def pending_width(row: html.HtmlElement) -> float | None:
    bars = row.xpath(f"td[{c('pending')}]//*[{c('pending-bar')}]/*[{c('bar-pending')}]")
    return float(bars[0].get("width")) if bars else None


# --------------------------------------------------------------------------- queue tree


def test_the_capacity_tree_shows_usage_and_waiting_as_bars_and_the_open_proposal(
    tmp_path: Path,
) -> None:
    # twelve jobs of 4 tasks a second apart on 16 containers: some wait
    backend = simulated_backend(tmp_path, small_workload(spacing_s=1.0))
    service = Service.build(settings_for(tmp_path), backend, FixedProposer(), token=TOKEN)
    service.loop.run_round()  # proposal 1 (q1 50 -> 70, q2 50 -> 30) stays pending
    doc = page(create_app(service).test_client(), "/?refresh=off")
    rows = tree_rows(doc)
    assert list(rows) == ["root", "root.q1", "root.q2"]

    latest = service.store.latest_usage()
    assert latest is not None
    usage = {u.queue: u for u in latest[2]}
    waiting = usage["root"].pending_containers
    assert waiting > 0 and usage["root.q1"].pending_containers > 0
    for queue, row in rows.items():
        used = one(row, f"td[{c('usage')}]//*[{c('bar-used')}]")
        assert float(used.get("width")) == pytest.approx(usage[queue].used_percent, abs=0.01)
        expected = 100.0 * usage[queue].pending_containers / waiting
        assert pending_width(row) == pytest.approx(expected, abs=0.01), queue
        count = text(one(row, f"td[{c('pending')}]/span[{c('pending-count')}]"))
        assert count.startswith(f"{usage[queue].pending_containers} containers")
    assert pending_width(rows["root"]) == 100.0
    api = create_app(service).test_client().get("/api/queues").get_json()
    assert [(q["path"], q["pending_containers"]) for q in api["queues"]] == [
        (queue, usage[queue].pending_containers) for queue in rows
    ]
    assert "<svg" not in str(api)  # the API gives numbers, not the page's drawing
    metrics = create_app(service).test_client().get("/metrics").get_data(as_text=True)
    for queue in rows:  # the dashboard's series say what the page says
        used_ratio = usage[queue].used_percent / 100.0
        assert f'yarn_adapt_queue_used_capacity_ratio{{queue="{queue}"}} {used_ratio!r}' in metrics
        waiting_now = float(usage[queue].pending_containers)
        assert f'yarn_adapt_queue_pending_containers{{queue="{queue}"}} {waiting_now!r}' in metrics

    # the open proposal on the queues it touches: old -> new, and its guarantee tick
    assert "has-proposal" in rows["root.q1"].classes and "has-proposal" in rows["root.q2"].classes
    assert "has-proposal" not in rows["root"].classes
    assert proposed_rows(doc, "root.q1") == ["→ proposed capacity: 50 → 70"]
    assert proposed_rows(doc, "root.q2") == ["→ proposed capacity: 50 → 30"]
    assert proposed_rows(doc, "root") == []
    tick = one(rows["root.q1"], f".//*[{c('bar-proposed')}]")
    assert float(tick.get("x1")) == pytest.approx(70.0)
    assert float(one(rows["root.q1"], f".//*[{c('bar-guarantee')}]").get("x1")) == 50.0
    assert text(one(doc, '//*[@id="open-proposal"]')).startswith("Proposal 1 is pending")

    # approved and applied: the overlay goes, the tree shows what runs now
    client = create_app(service).test_client()
    assert client.post("/api/proposals/1/approve", headers=AUTH).status_code == 200
    doc = page(client, "/?refresh=off")
    assert not doc.xpath(
        f'//table[@id="queue-tree"]//tr[{c("proposed-row")} or {c("has-proposal")}]'
    )
    assert text(one(tree_rows(doc)["root.q1"], f"td[{c('guarantee')}]")).startswith("70 %")
    service.close()


def test_the_fair_tree_shows_weights_policy_bars_and_the_proposed_weights(
    tmp_path: Path,
) -> None:
    options = DemoOptions(
        state_dir=tmp_path,
        scheduler="fair",
        serve=False,
        step_s=60.0,
        review=True,
        nodes=1,
        containers_per_node=2,  # a small cluster: jobs wait
    )
    service = build_demo(options, FairWeights({"root.q1": 1.5, "root.q2": 0.5}, after_s=80.0))
    service.loop.run_round()  # recommend mode: the proposal waits
    doc = page(create_app(service).test_client(), "/?refresh=off")
    assert "Fair Scheduler" in text(one(doc, '//table[@id="queue-tree"]').getparent())
    rows = tree_rows(doc)
    assert list(rows) == ["root", "root.q1", "root.q2"]
    for leaf in ("root.q1", "root.q2"):
        guarantee = text(one(rows[leaf], f"td[{c('guarantee')}]"))
        assert guarantee == "weight 1 (50 % of cluster)", guarantee
        assert text(one(rows[leaf], f"td[{c('policy')}]")) == "fifo"
        assert text(one(rows[leaf], f"td[{c('maximum')}]")) == "(unset → default no limit)"
        assert one(rows[leaf], f"td[{c('usage')}]//*[{c('bar-used')}]") is not None
    assert text(one(rows["root"], f"td[{c('guarantee')}]")) == "(unset → default weight 1)"
    assert text(one(rows["root"], f"td[{c('policy')}]")) == "(unset → default fair)"
    latest = service.store.latest_usage()
    assert latest is not None
    usage = {u.queue: u for u in latest[2]}
    assert usage["root"].pending_containers > 0
    for queue, row in rows.items():
        expected = 100.0 * usage[queue].pending_containers / usage["root"].pending_containers
        assert (pending_width(row) or 0.0) == pytest.approx(expected, abs=0.01), queue

    assert proposed_rows(doc, "root.q1") == ["→ proposed weight: 1 → 1.5"]
    assert proposed_rows(doc, "root.q2") == ["→ proposed weight: 1 → 0.5"]
    q1_tick = one(rows["root.q1"], f".//*[{c('bar-proposed')}]")
    assert float(q1_tick.get("x1")) == pytest.approx(75.0)  # 1.5 of 2.0
    service.close()


# --------------------------------------------------------------------------- evidence

APP = "application_1700000000000_0042"


@dataclass
class EvidenceProposer(FixedProposer):
    """Proposes as :class:`FixedProposer` with evidence: two jobs (thin), a band,
    and task times from the median fallback."""

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        suggestion = super().propose(observed, frozen)
        assert suggestion is not None
        group = replace(
            suggestion.groups[0],
            jobs=2,
            job_ids=(APP, "job_local_7"),
            after_low_s=65.0,
            after_high_s=98.0,
            estimator=MEDIAN_FALLBACK,
            interval_source="model error",
        )
        return replace(suggestion, groups=(group,))


def _checked(proposal_id: int, predicted_s: float, realised_s: float, jobs: int) -> PredictionError:
    return PredictionError(
        proposal_id, "root", "running", predicted_s, None, None, realised_s, jobs, jobs,
        0.0, 600.0, abs(predicted_s - realised_s) / realised_s,
    )  # fmt: skip


@pytest.fixture
def evidence_service(tmp_path: Path) -> Iterator[Service]:
    """Proposal 1 rejected, its prediction checked on its own 4 jobs off by far (80 s
    predicted, 200 s realised); proposal 2 pending; the service then looks at a real
    RM's and JobHistory's addresses (not contacted: only the links are built)."""
    # the operator lowered the evidence a move needs: the page warns it is thin
    service = sim_service(tmp_path, EvidenceProposer(), tuning={"min_jobs": 1})
    service.loop.run_round()
    service.desk.reject(1, "tester", "not now")
    service.loop.run_round()
    assert [p.id for p in service.store.proposals()] == [2, 1]
    service.store.record_prediction_error(_checked(1, 80.0, 200.0, 4))
    settings = settings_for(
        tmp_path,
        yarn={"rm": ["rm1.example:8088"], "history": "http://jhs.example:19888"},
        scheduler={"file": str(tmp_path / "conf" / "capacity-scheduler.xml")},
    )
    simulated, service.backend = service.backend, YarnBackend(settings)
    try:
        yield service
    finally:
        service.backend.close()
        service.backend = simulated
        service.close()


def test_the_evidence_lists_the_jobs_with_links_the_band_and_the_warnings(
    evidence_service: Service,
) -> None:
    client = create_app(evidence_service).test_client()
    doc = page(client, "/proposals/2")
    row = one(doc, '//table[@id="predictions"]//tr[@data-group="root"]')
    assert text(one(row, f"td[{c('jobs')}]")) == "2"
    assert text(one(row, f"td[{c('band')}]")) == "1 m 5 s – 1 m 38 s"
    assert one(row, f"td[{c('band')}]").get("title") == "model error"
    warnings = [text(w) for w in doc.xpath(f'//table[@id="predictions"]//td[{c("warning")}]')]
    assert warnings == [
        "⚠ thin evidence: the prediction rests on 2 job(s) (fewer than 3)",
        "⚠ thin evidence: task times are medians per kind (too little history to learn)",
        "⚠ past predictions for root missed 1 time(s): proposal 1 predicted 1 m 20 s for "
        "its 4 jobs, which realised 3 m 20 s (off by 60%)",
    ]

    jobs = one(doc, '//details[@id="jobs-root"]')
    assert text(one(jobs, "summary")) == "root: 2 job(s) · task times: median-per-kind"
    items = jobs.xpath(f"ul[{c('job-list')}]/li")
    assert [text(one(li, "code")) for li in items] == [APP, "job_local_7"]
    links = [(a.text, a.get("href"), a.get("rel")) for a in items[0].xpath(f"a[{c('job-link')}]")]
    assert links == [
        ("RM", f"http://rm1.example:8088/cluster/app/{APP}", "noreferrer"),
        ("JobHistory", "http://jhs.example:19888/jobhistory/job/job_1700000000000_0042",
         "noreferrer"),
    ]  # fmt: skip
    assert items[1].xpath("a") == []  # not a YARN application: nothing to link

    detail = client.get("/api/proposals/2").get_json()
    [prediction] = detail["predictions"]
    assert prediction["warnings"] == [w.removeprefix("⚠ ") for w in warnings]
    assert prediction["job_ids"] == [APP, "job_local_7"]
    assert (prediction["after_low_s"], prediction["after_high_s"]) == (65.0, 98.0)
    # the miss is earlier proposals' only: proposal 1 itself has no past to miss
    [first] = client.get("/api/proposals/1").get_json()["predictions"]
    assert not any("past predictions" in w for w in first["warnings"])


def test_an_interval_figure_is_shown_apart_and_never_as_a_miss(tmp_path: Path) -> None:
    """Whatever jobs finished in the rounds after an apply are not the prediction's
    jobs: their mean is named as such, apart, and warns of nothing (issue 29, item 1)."""
    service = sim_service(tmp_path, EvidenceProposer(), tuning={"min_jobs": 1})
    service.loop.run_round()
    service.desk.reject(1, "tester", "not now")
    service.store.record_realized(RealizedLatency(1, "root", 1, 0, 60_000, 4, 200.0, 80.0))
    service.loop.run_round()
    client = create_app(service).test_client()
    later = page(client, "/proposals/2")
    assert "past predictions" not in text(one(later, '//table[@id="predictions"]'))
    first = page(client, "/proposals/1")
    figures = text(one(first, '//details[@id="interval-figures"]'))
    assert "other jobs than the prediction's; not a check of it" in figures
    assert "root, round 1 after the apply: 3 m 20 s (4 jobs)" in figures
    checked = one(first, f'//table[@id="predictions"]//td[{c("checked")}]')
    assert text(checked) == "not yet: its jobs have not all finished"
    [prediction] = client.get("/api/proposals/1").get_json()["predictions"]
    assert prediction["realised_s"] is None and prediction["interval_figures"][0]["mean_s"] == 200
    service.close()


# --------------------------------------------------------------------------- words


@pytest.fixture
def zone_plus_3(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The server's local zone is "ABC", three hours east of UTC."""
    monkeypatch.setenv("TZ", "ABC-3")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_times_are_local_with_their_zone(tmp_path: Path, zone_plus_3: None) -> None:
    service = sim_service(tmp_path)
    service.loop.run_round()
    client = create_app(service).test_client()
    started = service.store.last_round_at()
    assert started is not None
    local = time.gmtime(started + 3 * 3600)
    doc = page(client, "/?refresh=off")
    assert text(one(doc, '//*[@id="last-round"]')) == time.strftime("%H:%M:%S ABC", local)
    created = service.store.proposal(1).created_at
    made = time.strftime("%Y-%m-%d %H:%M:%S ABC", time.gmtime(created + 3 * 3600))
    assert made in text(one(page(client, "/proposals/1"), f"//div[{c('summary')}]"))
    service.close()


def test_a_long_note_is_short_with_its_details_behind_a_click(tmp_path: Path) -> None:
    # q1 50 -> 90 moves 40 points, over the budget: auto-approve holds it, saying why
    service = sim_service(tmp_path, FixedProposer(q1=90.0, q2=10.0), service={"auto_approve": True})
    service.loop.run_round()
    client = create_app(service).test_client()
    gate = service.store.proposal(1).gate
    assert len(gate) > 90, gate
    _assert_behind_a_click(
        page(client, "/?refresh=off"), f'//*[@id="proposals"]//td[{c("note")}]', gate
    )
    reason = (
        "the q2 team runs its quarter-end batch this week; revisit once their jobs have "
        "moved to the new cluster"
    )
    service.desk.reject(1, "tester", reason)
    note = service.store.proposal(1).note
    assert note == f"rejected by tester: {reason}"
    _assert_behind_a_click(page(client, "/proposals/1"), '//*[@id="note"]', note)
    service.close()


def _assert_behind_a_click(doc: html.HtmlElement, where: str, note: str) -> None:
    details = one(one(doc, where), "details")
    summary = text(one(details, "summary"))
    assert 0 < len(summary) <= 90 and len(summary) < len(note), summary
    assert note.startswith(summary.removesuffix("…")), summary
    assert note in text(details)


def test_every_action_offered_is_its_endpoint(tmp_path: Path) -> None:
    service = sim_service(tmp_path)
    service.loop.run_round()
    client = create_app(service).test_client()
    client.post("/login", data={"token": TOKEN})
    seen = []
    for _ in range(2):  # pending (approve / reject), then applied (rollback)
        offered = client.get("/api/proposals/1").get_json()["actions"]
        buttons = page(client, "/proposals/1").xpath('//*[@id="actions"]//a[@id]')
        # each opens its confirmation, whose form posts to the action's endpoint
        confirm = [f"/proposals/1/confirm/{a}" for a in offered]
        assert [b.get("href") for b in buttons] == confirm
        assert [b.get("id") for b in buttons] == offered
        forms = [one(page(client, path), '//form[.//*[@id="confirm"]]') for path in confirm]
        assert [f.get("action") for f in forms] == [f"/proposals/1/{a}" for a in offered]
        seen.append(offered)
        reply = client.post(f"/api/proposals/1/{offered[0]}", headers=AUTH)
        assert reply.status_code == 200, reply.get_json()
    assert seen == [["approve", "reject"], ["rollback"]]
    assert service.store.proposal(1).state == "rolled-back"
    assert client.get("/api/proposals/1").get_json()["actions"] == []
    service.close()


@pytest.mark.parametrize(
    ("value", "digits", "words"),
    [(100.0, 0, "100 %"), (50.0, 1, "50 %"), (20.0, 0, "20 %"), (12.5, 1, "12.5 %"),
     (0.0, 0, "0 %"), (33.333, 2, "33.33 %")],
)  # fmt: skip
def test_a_percentage_keeps_the_zeros_of_its_whole_part(
    value: float, digits: int, words: str
) -> None:
    assert percent(value, digits) == words


def test_the_run_says_how_often_its_ranges_held_as_a_share() -> None:
    said = run_words({"ranges_held": 2, "ranges_checked": 2, "utilisation_ratio": 0.6})
    assert (said["ranges"], said["coverage"], said["utilisation"]) == ("2 of 2", "100 %", "60 %")
