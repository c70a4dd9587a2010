"""The operators' page in headless Chromium over a real HTTP server (waitress),
against the simulated cluster; the live test does the same against the mini YARN."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.service.browser import click, open_first_proposal, sign_in, text_of
from tests.service.factories import TOKEN, sim_service
from yarn_adapt.service.service import Service
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Service, WebServer]]:
    service = sim_service(tmp_path)
    service.loop.run_round()
    server = WebServer(create_app(service), "127.0.0.1", 0).start()
    try:
        yield service, server
    finally:
        server.stop()
        service.close()


def test_an_operator_reads_the_diff_signs_in_and_approves(
    served: tuple[Service, WebServer], chromium: Any
) -> None:
    service, server = served
    open_first_proposal(chromium, server.url)
    assert text_of(chromium, "state") == "pending"
    chromium.find_element(By.CSS_SELECTOR, "#xml-diff-details summary").click()  # unfold
    diff = text_of(chromium, "xml-diff")
    assert "-    <value>50</value>" in diff and "+    <value>70</value>" in diff
    assert "root.q1" in text_of(chromium, "property-changes")
    assert text_of(chromium, "cluster-after") == "1 m 20 s"

    sign_in(chromium, TOKEN)  # returns to the proposal
    click(chromium, "approve")  # opens the confirmation
    click(chromium, "confirm")

    assert text_of(chromium, "state") == "applied"
    assert "applied" in text_of(chromium, "proposal-applies")
    assert service.store.count_applies(1, "apply") == 1
    assert service.backend.cluster.config.find("root.q1").capacity.percent == 70.0  # type: ignore[attr-defined]
