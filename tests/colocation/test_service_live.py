"""The guard inside the service, against the real two-node YARN and a real Redis: a
cycle of the guard's own loop throttles the risky node; the API, the node agents'
endpoint (over a real HTTP server), the overview section and /metrics show it; every
change is in the one audit log; switching the guard off over the API, and stopping
the service, give the node back. And ``serve``'s two loops: the guard keeps acting on
its cadence (the slack policy stepping a node down, then back up) while the
configurator's scheduler file has drifted and while its tuner step fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from preemption.targets import ServiceTarget
from tests.colocation.conftest import write_traces
from tests.service.browser import click_and_wait_for_next_page, sign_in
from tests.service.factories import TOKEN
from tests.service.live import live_service
from tracing.redisconn import RedisConfig
from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.errors import YarnAdaptError
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.service.backend import Observed
from yarn_adapt.service.guard.loop import GuardHealth
from yarn_adapt.service.service import Service
from yarn_adapt.service.state.agent_tokens import AgentTokens
from yarn_adapt.service.state.records import DecisionKind, Suggestion
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer

AGENT_SAYS = ["node at 12:00:00: trusted", "  suppress: batch quota 650m (budget 650m, held)"]


class NothingToPropose:
    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        return None


def test_the_service_runs_the_guard_serves_the_agents_and_gives_the_node_back(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, tmp_path: Path, chromium: Any
) -> None:
    cluster = colocation_cluster
    risky, other = cluster.node_ids()
    write_traces(trace_config, {risky: 60_000, other: 2_000})
    service = live_service(
        cluster, tmp_path, NothingToPropose(),
        scheduler={"via": "mutation", "file": ""},
        tracing={"redis_url": trace_config.url, "prefix": trace_config.prefix,
                 "window_s": 120.0},
        # the paper's rank: this test is about the service around the guard (the slack
        # policy in the service: the test below)
        colocation={"enabled": True, "mode": "auto", "demand": "none",
                    "qos_targets": ["frontend=10"], "policy": "toposch-paper"},
    )  # fmt: skip
    closed = False
    try:
        report = service.run_guard_cycle()  # the guard's own cycle, not the configurator's
        assert report is not None
        assert f"{risky} lower to 1024 MB/1 vcores (done)" in report.summary()  # the floor
        assert not [d for _, d in service.store.decisions(limit=10) if d.kind is DecisionKind.GUARD]
        assert _total(cluster, risky) == (1024, 1)

        client = create_app(service).test_client()
        status = client.get("/api/guard").get_json()
        assert status["mode"] == "auto"
        rows = {row["node"]: row for row in status["nodes"]}
        assert rows[risky]["action"] == "lower" and rows[risky]["risk"] == 1.0
        assert rows[risky]["visible"] == {"memory_mb": 1024, "vcores": 1}
        assert rows[risky]["real"] == {"memory_mb": 4096, "vcores": 4}
        assert "reserve 100%" in rows[risky]["reason"]
        history = client.get(f"/api/guard/nodes/{quote(risky, safe='')}").get_json()
        assert history[0]["result"] == "done"

        page = client.get("/").get_data(as_text=True)
        assert 'id="guard-nodes"' in page and f'data-node="{risky}"' in page
        assert 'id="chart-guard"' in page and f'data-series="risk {risky}"' in page
        metrics = client.get("/metrics").get_data(as_text=True)
        assert f'yarn_adapt_guard_node_risk{{node="{risky}"}} 1.0' in metrics
        assert f'yarn_adapt_guard_node_visible_ratio{{node="{risky}",resource="vcores"}} 0.25' in (
            metrics
        )
        assert 'yarn_adapt_guard_actions_total{action="lower",result="done"} 1.0' in metrics
        audit = client.get("/api/audit").get_json()
        assert any(a["actor"] == "guard" and a["action"] == "guard lower node" for a in audit)

        server = WebServer(create_app(service), "127.0.0.1", 0).start()
        try:
            _agent_endpoint(server.url, risky, AgentTokens(service.store))
            _operator_switches_it_off(chromium, server.url, risky)
        finally:
            server.stop()
        assert _total(cluster, risky) == (4096, 4)  # off gives it back

        auto = client.post("/api/guard/mode", json={"mode": "auto"},
                           headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        assert auto.status_code == 200 and auto.get_json()["restored"] == []
        assert service.guard is not None and service.guard.guard.mode is GuardMode.AUTO
        service.run_guard_cycle()
        assert _total(cluster, risky) == (1024, 1)
        service.close()
        closed = True
        assert _total(cluster, risky) == (4096, 4)  # stop gives it back
    finally:
        if not closed:
            service.close()


def _operator_switches_it_off(driver: Any, base: str, risky: str) -> None:
    """In the browser: the node's row and the chart say it; a signed-in operator sets
    the guard's mode to off."""
    driver.get(base + "/")
    row = driver.find_element(By.CSS_SELECTOR, f'#guard-nodes tr[data-node="{risky}"]')
    assert row.find_element(By.CSS_SELECTOR, "td.risk").text == "1.00"
    assert row.find_element(By.CSS_SELECTOR, "td.visible").text.startswith("1 vcores, 1024 MB")
    risk = driver.find_elements(
        By.CSS_SELECTOR, f'#chart-guard circle.pt[data-series="risk {risky}"]'
    )
    seen = driver.find_elements(
        By.CSS_SELECTOR, f'#chart-guard circle.pt[data-series="visible {risky}"]'
    )
    assert [p.get_attribute("data-y") for p in risk] == ["1.0"]
    assert [p.get_attribute("data-y") for p in seen] == ["0.25"]
    said = row.find_elements(By.CSS_SELECTOR, "td.agent .agent-line")
    assert [line.text for line in said] == [line.strip() for line in AGENT_SAYS]
    assert "reported" in row.find_element(By.CSS_SELECTOR, "td.agent").text
    sign_in(driver, TOKEN)
    driver.get(base + "/")
    Select(driver.find_element(By.CSS_SELECTOR, "#guard-mode-form select")).select_by_value("off")
    # (the shared step: chromedriver may say the old page's node "does not belong to
    # the document" instead of stale while the next page loads)
    click_and_wait_for_next_page(driver, By.CSS_SELECTOR, "#guard-mode-form button")
    assert driver.find_element(By.ID, "guard-mode").text == "off"
    assert "co-location guard: off; 1 node(s) given back" in driver.page_source


def _agent_endpoint(base: str, risky: str, tokens: AgentTokens) -> None:
    url = f"{base}/api/agent/nodes/{quote(risky, safe='')}/reclaim"
    assert requests.get(url, timeout=30).status_code == 401  # the token is required
    operator = {"Authorization": f"Bearer {TOKEN}"}
    assert requests.get(url, headers=operator, timeout=30).status_code == 403  # not this one
    bearer = {"Authorization": f"Bearer {tokens.issue(risky, 'test').token}"}
    reply = requests.get(url, headers=bearer, timeout=30)
    assert reply.status_code == 200
    body = reply.json()
    assert set(body) == {"node", "generation", "reclaim", "ttl_s", "qos"}
    assert body["node"] == risky and isinstance(body["generation"], int)
    assert body["reclaim"] == {"cpu_millicores": 0, "memory_mb": 0}  # no batch runs there
    assert body["ttl_s"] > 0
    assert body["qos"]["service"] == "frontend" and body["qos"]["satisfied"] is False
    unknown = f"{base}/api/agent/nodes/{quote('nowhere:1', safe='')}/reclaim"
    assert requests.get(unknown, headers=bearer, timeout=30).status_code == 403  # not its node
    nowhere = {"Authorization": f"Bearer {tokens.issue('nowhere:1', 'test').token}"}
    assert requests.get(unknown, headers=nowhere, timeout=30).status_code == 404
    # What the node's agent does, sent with its next poll as a real agent sends it.
    agent = ServiceTarget(base, risky, bearer["Authorization"].removeprefix("Bearer "))
    agent.report(AGENT_SAYS)
    assert agent.current().problem is None


def _total(cluster: MiniCluster, node_id: str) -> tuple[int, int]:
    total = cluster.rm_get(f"nodes/{node_id}")["node"]["totalResource"]
    return int(total["memory"]), int(total["vCores"])


# --------------------------------------------------------------------------- two loops


class SwitchableTuner:
    """The service's proposer seam: nothing to propose, or a tuner step that fails."""

    def __init__(self) -> None:
        self.failing = False
        self.failed = 0

    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        if self.failing:
            self.failed += 1
            raise TunerBroke("the tuner cannot model this workload")
        return None


class TunerBroke(YarnAdaptError):
    """What a failing tuner step raises (the round records it and goes on)."""


def test_the_guard_acts_on_its_cadence_through_drift_and_a_failing_tuner(
    colocation_cluster: MiniCluster, trace_config: RedisConfig, tmp_path: Path
) -> None:
    cluster = colocation_cluster
    risky, other = cluster.node_ids()
    tuner = SwitchableTuner()
    service = live_service(
        cluster, tmp_path, tuner,
        service={"interval_s": 1.0},
        tracing={"redis_url": trace_config.url, "prefix": trace_config.prefix,
                 "window_s": 120.0},
        colocation={"enabled": True, "mode": "auto", "demand": "none", "period_s": 0.5,
                    "qos_targets": ["frontend=65"], "slo_window_s": 5.0,
                    "throttle_settle_s": 1.0, "cooldown_s": 1.0},
    )  # fmt: skip
    stop = threading.Event()
    serving = threading.Thread(target=service.run_forever, args=(stop,), daemon=True)
    try:
        # 1. The configurator's file drifts (edited, never refreshed): its rounds skip.
        text = cluster.read_scheduler_xml()
        cluster.write_scheduler_xml(
            text.replace("<value>40</value>", "<value>20</value>", 1).replace(
                "<value>30</value>", "<value>50</value>", 1
            )
        )
        serving.start()
        _until(lambda: service.loop.status()["drift"], 60, "the configurator to see the drift")
        # frontend's P95 60.7 ms of 65 (slack 7 %: throttle); 60.5 ms of it on the risky
        # node, 0.2 ms on the other (0.3 %: not where its latency goes)
        write_traces(trace_config, {risky: 60_000, other: 200})
        _until(lambda: _total(cluster, risky) == (1024, 1), 90, "the risky node stepped down")
        # (the RM shows a total before the guard has verified and recorded the step)
        _until(lambda: (1024, 1) in _lowered(service, risky), 30, "the step recorded")
        assert service.loop.status()["drift"], "the drift lasted while the guard acted"
        steps = _lowered(service, risky)
        assert steps == [(3072, 3), (2048, 2), (1024, 1)], steps  # 25 % a step, then the floor
        assert _total(cluster, other) == (4096, 4)
        assert {d.kind for _, d in service.store.decisions(limit=50)} >= {DecisionKind.DRIFT}

        # 2. The drift ends (the file as the RM runs it again); now every tuner step
        # fails. Slack comes back: the node grows back.
        cluster.write_scheduler_xml(text)
        _until(lambda: not service.loop.status()["drift"], 60, "the drift to end")
        tuner.failing = True
        _until(lambda: tuner.failed >= 2, 60, "the tuner to fail in two rounds")
        time.sleep(5.5)  # the slow requests leave the 5 s SLO window
        write_traces(trace_config, {risky: 5_000, other: 200})
        _until(lambda: _total(cluster, risky) == (4096, 4), 90, "the risky node grown back")
        assert tuner.failed >= 3
        failed = [d for _, d in service.store.decisions(limit=50) if d.kind is DecisionKind.FAILED]
        assert failed and "the tuner cannot model this workload" in failed[0].reason
        assert service.guard is not None and service.guard.loop is not None
        health = service.guard.loop.health()
        assert health.running and health.consecutive_failures == 0 and health.cycles >= 10
        status = create_app(service).test_client().get("/api/guard").get_json()
        assert status["health"]["healthy"] is True and status["policy"] == "slack"
        assert status["applications"][0]["state"] == "grow"

        # 3. The other way round: every guard cycle fails (a bug in it), the tuner works
        # again; the configurator's rounds go on, and the guard's loop keeps trying.
        tuner.failing = False
        guard = service.guard.guard

        def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("the guard broke")

        guard.run_round = broken  # type: ignore[method-assign]
        _until(lambda: health_of(service).consecutive_failures >= 3, 30, "three failed cycles")
        first = _round_id(service)
        _until(lambda: _round_id(service) >= first + 2, 60, "two more configurator rounds")
        assert service.loop.status()["last_round"]["status"] == "done"  # type: ignore[index]
        assert health_of(service).running and "the guard broke" in health_of(service).last_error
    finally:
        stop.set()
        serving.join(60)
        service.close()
    assert _total(cluster, risky) == (4096, 4) and _total(cluster, other) == (4096, 4)


def health_of(service: Service) -> GuardHealth:
    assert service.guard is not None and service.guard.loop is not None
    return service.guard.loop.health()


def _round_id(service: Service) -> int:
    last = service.loop.status()["last_round"]
    return int(last["id"]) if isinstance(last, dict) else 0


def _lowered(service: Service, node: str) -> list[tuple[int, int]]:
    assert service.guard is not None
    rows = reversed(service.guard.store.history(node, 100))
    return [(r["target_mb"], r["target_vcores"]) for r in rows
            if r["action"] == "lower" and r["result"] == "done"]  # fmt: skip


def _until(check: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
