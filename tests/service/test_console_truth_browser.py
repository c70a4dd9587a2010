"""The console tells one truth, in headless Chromium over a real HTTP server (issue 29):
the overview's chart and the proposal's page show the same realised figure for the
same proposal, the demo's judgement of its run is on the page, approve / reject /
roll back take a confirmation step that keeps the operator's reason, and no rendered
text -- tooltips included -- says more than 120 seconds as raw seconds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.service.browser import click, sign_in, text_of
from tests.service.factories import TOKEN, FixedProposer
from yarn_adapt.service.demo.replay import DemoOptions, build_demo, note_round, run_summary
from yarn_adapt.service.service import Service
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer

ROUNDS = 4
RAW_SECONDS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?s\b")


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, WebServer]]:
    """The demo with a stand-in tuner predicting 21 m 2 s -> 9 m 4 s: proposal 1
    applied at the first round on the 2 jobs then in progress, checked once they
    finished, then the run judged as the demo judges it at its end."""
    state = tmp_path_factory.mktemp("demo")
    options = DemoOptions(state_dir=state, serve=False, step_s=900.0, rounds=ROUNDS, token=TOKEN)
    service = build_demo(options, FixedProposer(before_s=1262.1, after_s=543.8))
    for _ in range(ROUNDS):
        note_round(service, service.loop.run_round())
    assert service.store.proposal(1).state == "applied"
    assert service.store.prediction_errors(1), "proposal 1's jobs have not all finished"
    run_summary(service, options, ROUNDS)
    server = WebServer(create_app(service), "127.0.0.1", 0).start()
    try:
        yield service, server
    finally:
        server.stop()
        service.close()


def test_the_chart_and_the_page_show_the_same_realised_figure(
    judged: tuple[Service, WebServer], chromium: Any
) -> None:
    service, server = judged
    [checked] = service.store.prediction_errors(1)
    chromium.get(server.url + "/?refresh=off")
    points = {
        (c.get_attribute("data-x"), c.get_attribute("data-kind")): float(c.get_attribute("data-y"))
        for c in chromium.find_elements(By.CSS_SELECTOR, "#chart-predicted circle.pt")
    }
    assert points[("#1", "predicted")] == pytest.approx(543.8)
    on_chart = points[("#1", "realised")]
    assert on_chart == pytest.approx(checked.realised_s)
    chromium.get(server.url + "/proposals/1")
    cell = chromium.find_element(By.CSS_SELECTOR, '#predictions tr[data-group="root"] td.checked')
    assert float(cell.get_attribute("data-realised-s")) == pytest.approx(on_chart)
    assert cell.text.startswith(f"{_words(on_chart)} realised by its")
    assert "9 m 4 s predicted for the proposed configuration" in cell.text


def test_the_demos_judgement_is_on_the_page(
    judged: tuple[Service, WebServer], chromium: Any
) -> None:
    service, server = judged
    stored = service.store.run_summary()
    assert stored is not None
    summary = stored[1]
    chromium.get(server.url + "/?refresh=off")
    run = chromium.find_element(By.ID, "run-summary")
    assert run.get_attribute("data-complete") == "yes"
    assert text_of(chromium, "run-tuned") == _words(summary["realised_latency_tuned_s"])
    assert text_of(chromium, "run-static") == _words(summary["realised_latency_static_s"])
    assert f"The {summary['realised_jobs']} jobs submitted over" in text_of(chromium, "run-latency")
    assert "proposal 1 predicted 9 m 4 s" in text_of(chromium, "run-proposals")


def test_rolling_back_takes_a_confirmation_and_keeps_the_reason(
    judged: tuple[Service, WebServer], chromium: Any
) -> None:
    service, server = judged
    chromium.get(server.url + "/proposals/1")
    sign_in(chromium, TOKEN)
    click(chromium, "rollback")  # opens the confirmation: nothing happens yet
    assert service.store.proposal(1).state == "applied"
    assert "makes the RM run" in text_of(chromium, "what-happens")
    assert "root.q1 capacity 70 50" in text_of(chromium, "confirm-changes")
    chromium.find_element(By.ID, "reason").send_keys("q2 starves since the change")
    click(chromium, "confirm")
    assert (
        "Proposal 1 rolled back: the configuration it replaced runs again." in chromium.page_source
    )
    assert service.store.proposal(1).state == "rolled-back"
    assert "because “q2 starves since the change”" in chromium.find_element(
        By.ID, "audit"
    ).get_attribute("textContent")


@pytest.mark.parametrize(
    "path",
    ["/?refresh=off", "/proposals/1", "/proposals/1/confirm/reject", "/versions",
     "/versions/diff?from=1&to=2"],
)  # fmt: skip
def test_no_rendered_text_says_long_durations_in_raw_seconds(
    judged: tuple[Service, WebServer], chromium: Any, path: str
) -> None:
    _, server = judged
    chromium.get(server.url + path)
    # everything a person can read, the charts' hover text (<title>) included
    text = chromium.execute_script("return document.documentElement.textContent")
    raw = [m.group(0) for m in RAW_SECONDS.finditer(text) if float(m.group(1)) > 120]
    assert raw == [], path


def _words(seconds: float) -> str:
    from yarn_adapt.durations import duration

    return duration(seconds)
