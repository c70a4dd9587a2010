"""The operators' console in headless Chromium over a real HTTP server, against the
simulated cluster: the queue tree, the charts' points against the store, a version
diff and a revert through the ordinary review, the demo's review loop, and no
request leaving the page's own origin."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By

from tests.service.browser import click, sign_in, text_of
from tests.service.factories import TOKEN, FixedProposer, sim_service
from yarn_adapt.service.demo.replay import DemoOptions, build_demo
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.records import ProposalState
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer


@pytest.fixture
def applied(tmp_path: Path) -> Iterator[tuple[Service, WebServer]]:
    """Four rounds with auto-approve: proposal 1 (q1 50 -> 70) applied in round 1."""
    service = sim_service(tmp_path, service={"auto_approve": True})
    for _ in range(4):
        service.loop.run_round()
    server = WebServer(create_app(service), "127.0.0.1", 0).start()
    try:
        yield service, server
    finally:
        server.stop()
        service.close()


def _points(driver: Any, chart: str) -> list[tuple[str, str, float]]:
    return [
        (c.get_attribute("data-series"), c.get_attribute("data-x"),
         float(c.get_attribute("data-y")))
        for c in driver.find_elements(By.CSS_SELECTOR, f"#{chart} circle.pt")
    ]  # fmt: skip


def _requests(driver: Any) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def test_the_queue_tree_and_the_charts_show_what_the_store_holds(
    applied: tuple[Service, WebServer], chromium: Any
) -> None:
    service, server = applied
    chromium.get(server.url + "/")
    rows = chromium.find_elements(By.CSS_SELECTOR, "#queue-tree tbody tr[data-queue]")
    assert [r.get_attribute("data-queue") for r in rows] == ["root", "root.q1", "root.q2"]
    q1 = chromium.find_element(By.CSS_SELECTOR, '#queue-tree tr[data-queue="root.q1"]')
    assert q1.find_element(By.CLASS_NAME, "guarantee").text.startswith("70 %")
    assert q1.find_element(By.CLASS_NAME, "policy").text == "(unset → default fifo)"
    latest = service.store.latest_usage()
    assert latest is not None
    used = {u.queue: u.used_percent for u in latest[2]}
    assert q1.find_element(By.CLASS_NAME, "used-percent").text == (
        f"{used['root.q1']:.1f}".rstrip("0").rstrip(".") + " %"
    )
    assert "version 2" in text_of(chromium, "running-version")
    for row in rows:  # live usage and waiting drawn as bars the browser lays out
        for bar in ("td.usage svg.bar", "td.pending svg.pending-bar"):
            assert row.find_element(By.CSS_SELECTOR, bar).size["width"] > 50, bar

    latency = [
        ("root", f"{s.round_id}", s.mean_s)
        for s in service.store.latency_series() if s.mean_s is not None
    ]  # fmt: skip
    assert latency and _points(chromium, "chart-latency") == latency
    usage = [
        (s.usage.queue, f"{s.round_id}", s.usage.used_percent)
        for s in service.store.usage_series() if s.usage.queue != "root"
    ]  # fmt: skip
    assert sorted(_points(chromium, "chart-usage")) == sorted(usage)
    events = chromium.find_elements(By.CSS_SELECTOR, "#chart-latency g.event")
    assert [e.get_attribute("data-label") for e in events] == ["#1 applied"]
    # Proposal 1's own jobs have not all finished: the chart shows its prediction
    # alone, not the later rounds' interval figures as if they were its outcome.
    assert service.store.prediction_errors(1) == []
    assert [r for r in service.store.realized(1) if r.mean_s is not None]  # figures exist
    kinds = [
        (c.get_attribute("data-x"), c.get_attribute("data-kind"), float(c.get_attribute("data-y")))
        for c in chromium.find_elements(By.CSS_SELECTOR, "#chart-predicted circle.pt")
    ]
    assert kinds == [("#1", "predicted", 80.0)]

    for path in ("/", "/proposals/1", "/versions", "/versions/diff?from=1&to=2"):
        chromium.get(server.url + path)
    requested = _requests(chromium)
    assert any(url.endswith("/static/style.css") for url in requested), requested
    network = [url for url in requested if urlsplit(url).scheme in ("http", "https", "ws", "wss")]
    foreign = [url for url in network if not url.startswith(server.url + "/")]
    assert foreign == [], foreign


def test_every_asset_of_every_page_is_our_own(applied: tuple[Service, WebServer]) -> None:
    service, _ = applied
    client = create_app(service).test_client()
    for path in ("/", "/proposals/1", "/versions", "/versions/diff?from=1&to=2", "/login"):
        page = client.get(path).get_data(as_text=True)
        assert "<script" not in page and not re.search(r"\sstyle\s*=", page), path
        for tag, _attribute, url in re.findall(r"<(\w+)[^>]*?\s(src|href)=\"([^\"]*)\"", page):
            parts = urlsplit(url)
            if tag == "a" and not parts.netloc:
                continue
            assert tag == "a" or (not parts.scheme and not parts.netloc), (path, tag, url)
            assert tag != "a" or (parts.scheme in ("http", "https") and 'rel="noreferrer"'), url


def test_a_version_diff_and_a_revert_through_the_review(
    applied: tuple[Service, WebServer], chromium: Any
) -> None:
    service, server = applied
    chromium.get(server.url + "/versions")
    sign_in(chromium, TOKEN)  # back on the versions page
    assert "running now" in text_of(chromium, "versions").splitlines()[1]
    click(chromium, "compare")  # from version 1 to version 2 (the defaults)
    changes = text_of(chromium, "version-changes")
    assert "root.q1 capacity 50 70" in changes and "root.q2 capacity 50 30" in changes
    assert "-    <value>50</value>" in text_of(chromium, "version-diff")

    chromium.get(server.url + "/versions")
    click(chromium, "revert-1-button")
    assert text_of(chromium, "state") == "pending"
    assert "revert to version 1" in text_of(chromium, "standing")
    assert "(unset" not in text_of(chromium, "property-changes")
    assert service.backend.cluster.config.find("root.q1").capacity.percent == 70.0  # type: ignore[attr-defined]
    click(chromium, "approve")  # opens the confirmation
    click(chromium, "confirm")
    assert text_of(chromium, "state") == "applied"
    assert service.backend.cluster.config.find("root.q1").capacity.percent == 50.0  # type: ignore[attr-defined]

    chromium.get(server.url + "/?refresh=off")
    proposals = text_of(chromium, "proposals")
    assert "revert to version 1; running now" in proposals
    assert "replaced by proposal 2" in proposals  # proposal 1 no longer reads plain "applied"
    q1 = chromium.find_element(By.CSS_SELECTOR, '#queue-tree tr[data-queue="root.q1"]')
    assert q1.find_element(By.CLASS_NAME, "guarantee").text.startswith("50 %")
    assert service.store.latest_version().why == "proposal 2: revert to version 1"  # type: ignore[union-attr]


def test_the_demo_review_loop_waits_for_the_operator(tmp_path: Path, chromium: Any) -> None:
    from yarn_adapt.cli.demo import _run

    options = DemoOptions(
        state_dir=tmp_path, review=True, token=TOKEN, port=0, interval_s=0.05, step_s=120.0
    )
    service = build_demo(options, FixedProposer())
    lines: list[str] = []
    stop = threading.Event()
    worker = threading.Thread(
        target=_run, args=(service, options, 2),
        kwargs={"keep_serving": True, "announce": lines.append, "stop_event": stop},
    )  # fmt: skip
    worker.start()
    try:
        waiting = _line(lines, "waits for your review")
        assert any(f"with this run's token: {TOKEN}" in line for line in lines)
        url = re.search(r"(http://127\.0\.0\.1:\d+)/proposals/(\d+)", waiting)
        assert url is not None
        time.sleep(0.3)
        assert service.store.proposal(int(url.group(2))).state is ProposalState.PENDING
        assert service.store.count_proposals(ProposalState.PENDING) == 1  # the rounds wait
        chromium.get(url.group(0))
        sign_in(chromium, TOKEN)
        click(chromium, "approve")  # opens the confirmation
        click(chromium, "confirm")
        assert text_of(chromium, "state") == "applied"
        _line(lines, "rounds done; the page stays")
        chromium.get(url.group(1) + "/?refresh=off")
        q1 = chromium.find_element(By.CSS_SELECTOR, '#queue-tree tr[data-queue="root.q1"]')
        assert q1.find_element(By.CLASS_NAME, "guarantee").text.startswith("70 %")
        refresh = chromium.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]')
        assert not refresh  # paused with ?refresh=off; on by default:
        chromium.get(url.group(1) + "/")
        assert chromium.find_element(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]')
    finally:
        chromium.get("about:blank")  # let go of the server's connections
        stop.set()
        worker.join(timeout=30)
        service.close()
    assert not worker.is_alive()


def _line(lines: list[str], needle: str, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [line for line in lines if needle in line]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no line with {needle!r} in {lines}")
