"""The demo's co-location view in headless Chromium: a demo run (its own loop, page
and guard, the tuner stood in for) shows the application's slack, a service's node
that batch sees less of than it has (visible < real), and that node's agent's report."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from tests.service.factories import FixedProposer
from yarn_adapt.service.demo.replay import DemoOptions, build_demo


def _line(lines: list[str], needle: str, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [line for line in lines if needle in line]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no line with {needle!r} in {lines}")


def _vcores(cell: str) -> int:
    found = re.match(r"(\d+) vcores", cell)
    assert found is not None, cell
    return int(found.group(1))


def test_the_demo_page_shows_the_guard_at_work(tmp_path: Path, chromium: Any) -> None:
    from yarn_adapt.cli.demo import _run

    # one round of 600 simulated s (ten guard cycles): with seed 0 the services' nodes
    # are lowered when it ends
    options = DemoOptions(state_dir=tmp_path, port=0, interval_s=0.05, step_s=600.0)
    service = build_demo(options, FixedProposer())
    lines: list[str] = []
    stop = threading.Event()
    worker = threading.Thread(
        target=_run, args=(service, options, 1),
        kwargs={"keep_serving": True, "announce": lines.append, "stop_event": stop},
    )  # fmt: skip
    worker.start()
    try:
        assert "latency-critical services: frontend on node-0001" in _line(lines, "frontend on")
        url = re.search(r"http://127\.0\.0\.1:\d+", _line(lines, "the operators' page"))
        assert url is not None
        _line(lines, "rounds done; the page stays")
        chromium.get(url.group(0) + "/?refresh=off")
        assert "guard auto" in chromium.find_element(By.ID, "guard-status").text
        assert "cycling every" in chromium.find_element(By.ID, "guard-health").text
        app = chromium.find_element(
            By.CSS_SELECTOR, '#guard-applications tr[data-application="frontend"]'
        )
        assert re.fullmatch(r"-?\d+ %", app.find_element(By.CLASS_NAME, "slack").text)
        assert "/ 25.0 ms" in app.text
        lowered = []
        for row in chromium.find_elements(By.CSS_SELECTOR, "#guard-nodes tbody tr[data-node]"):
            real = _vcores(row.find_element(By.CLASS_NAME, "real").text)
            visible = _vcores(row.find_element(By.CLASS_NAME, "visible").text)
            if visible < real:
                lowered.append(row)
        assert lowered, "no node shows less visible to batch than it has"
        node = lowered[0]
        assert node.get_attribute("data-node") in ("node-0001", "node-0002", "node-0003")
        assert "frontend:" in node.find_element(By.CLASS_NAME, "risk").text  # its path share
        agent = [e.text for e in node.find_elements(By.CSS_SELECTOR, ".agent .agent-line")]
        assert any(line.startswith("squeeze:") for line in agent), agent
        assert any("simulated agent" in line for line in agent)
        assert "reported" in node.find_element(By.CLASS_NAME, "agent").text
    finally:
        chromium.get("about:blank")  # let go of the server's connections
        stop.set()
        worker.join(timeout=60)
        service.close()
    assert not worker.is_alive()
