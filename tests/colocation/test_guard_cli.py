"""``yarn-adapt guard status [--json]`` against a running service's page server: the
API's object as it is, or lines an operator reads; the address from ``--config``; a
service that cannot be reached is one line and a non-zero exit."""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner

from tests.colocation.factories import qos, risk
from tests.colocation.test_edges import FixedRisk, NoDemands, rm_node
from tests.service.factories import TOKEN, settings_for
from yarn_adapt.cli import cli, main
from yarn_adapt.colocation.model import RiskReading
from yarn_adapt.colocation.observe import GuardObserver
from yarn_adapt.service.backend import YarnBackend
from yarn_adapt.service.guard.step import parse_agent_report
from yarn_adapt.service.service import Service
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer


def _service(tmp_path: Path) -> Service:
    settings = settings_for(tmp_path, yarn={"rm": ["http://127.0.0.1:1"]},
                            scheduler={"via": "mutation"},
                            colocation={"enabled": True, "mode": "recommend"})  # fmt: skip
    service = Service.build(settings, YarnBackend(settings), _NoProposer(), token=TOKEN)
    assert service.guard is not None
    reading = RiskReading(risk({}, paths={("frontend", "a:1"): 4.0}), (qos(19.0, 20.0, ["a:1"]),))
    guard = service.guard.guard
    guard.observer = GuardObserver(FixedRisk(reading), NoDemands())
    guard.run_round([rm_node("a:1")], 7)  # a cycle's decision, without an RM
    return service


class _NoProposer:
    def propose(self, observed: object, frozen: frozenset[str]) -> None:
        return None


def test_status_prints_the_api_object_or_lines_for_an_operator(tmp_path: Path) -> None:
    service = _service(tmp_path)
    assert service.guard is not None
    said = parse_agent_report({"lines": ["node a:1 at 12:00:00: trusted"]}, time.time())
    service.guard.note_agent_report("a:1", said)
    server = WebServer(create_app(service), "127.0.0.1", 0).start()
    try:
        runner = CliRunner()
        raw = runner.invoke(cli, ["guard", "status", "--url", server.url, "--json"])
        assert raw.exit_code == 0, raw.output
        body = json.loads(raw.output)
        assert (body["mode"], body["policy"]) == ("recommend", "slack")
        assert {"healthy", "period_s", "last_cycle_age_s", "consecutive_failures",
                "failure_budget", "nodes_age_s"} <= set(body["health"])  # fmt: skip
        [app] = body["applications"]
        assert (app["slack_ratio"], app["state"]) == (0.05, "throttle")
        [node] = body["nodes"]
        assert node["paths"][0]["share_ratio"] == 0.2 and node["cycle"] == 7
        text = runner.invoke(cli, ["guard", "status", "--url", server.url])
        assert text.exit_code == 0, text.output
        assert "guard recommend, policy slack: NOT healthy" in text.output  # never cycled
        assert "application frontend: P95 19.0 ms of 20 ms, slack 5%: throttle" in text.output
        assert (
            "node a:1 [throttle]: batch sees 4 vcores / 4096 MB of 4 vcores / 4096 MB -> "
            "3 vcores / 3276 MB (recommended)"
        ) in text.output
        assert "path frontend 4.0 ms (20%) throttle" in text.output
        assert "agent on a:1, reported " in text.output
        assert "\n  node a:1 at 12:00:00: trusted\n" in text.output
        config = tmp_path / "yarn-adapt.toml"
        config.write_text(f"[http]\nport = {server.url.rsplit(':', 1)[1]}\n")
        config.chmod(0o600)
        by_config = runner.invoke(cli, ["guard", "status", "--config", str(config), "--json"])
        assert by_config.exit_code == 0 and json.loads(by_config.output)["mode"] == "recommend"
    finally:
        server.stop()
        service.close()


def test_a_service_that_cannot_be_reached_is_one_line(capsys: object) -> None:
    code = main(["guard", "status", "--url", "http://127.0.0.1:1", "--timeout", "2"])
    assert code == 1
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.strip() == (
        "yarn-adapt: http://127.0.0.1:1/api/guard: the service cannot be reached "
        "(Connection refused)"
    )
