"""The guard inside the service, against the real two-node YARN and a real Redis: a
round of the service's loop throttles the risky node; the API, the node agents'
endpoint (over a real HTTP server), the overview section and /metrics show it; every
change is in the one audit log; switching the guard off over the API, and stopping
the service, give the node back."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.colocation.conftest import write_traces
from tests.service.browser import sign_in
from tests.service.factories import TOKEN
from tests.service.live import live_service
from tracing.redisconn import RedisConfig
from yarn_adapt.colocation.model import GuardMode
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.service.agent_tokens import AgentTokens
from yarn_adapt.service.backend import Observed
from yarn_adapt.service.records import DecisionKind, Suggestion
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer


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
        colocation={"enabled": True, "mode": "auto", "demand": "none",
                    "qos_targets": ["frontend=10"]},
    )  # fmt: skip
    closed = False
    try:
        service.loop.run_round()
        (guard,) = [d for _, d in service.store.decisions(limit=10) if d.kind is DecisionKind.GUARD]
        assert f"{risky} lower to 1024 MB/1 vcores (done)" in guard.reason  # the floor
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
        service.loop.run_round()
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
    sign_in(driver, TOKEN)
    driver.get(base + "/")
    Select(driver.find_element(By.CSS_SELECTOR, "#guard-mode-form select")).select_by_value("off")
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, "#guard-mode-form button").click()
    WebDriverWait(driver, 30).until(expected_conditions.staleness_of(old))
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


def _total(cluster: MiniCluster, node_id: str) -> tuple[int, int]:
    total = cluster.rm_get(f"nodes/{node_id}")["node"]["totalResource"]
    return int(total["memory"]), int(total["vCores"])
