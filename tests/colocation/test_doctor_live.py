"""``yarn-adapt doctor`` against the real mini YARN, a real redis-server (512 MB cap,
noeviction) and the service's real page server: each piece missing in turn -- no agent
report, no traces of a latency-critical service, a wrong RM address, Redis stopped --
and everything in place. The guard's write is really tried: a POST of the node's own
total, which the RM takes ("with the same resource" in its log) and which leaves the
node as it was; with the queue cap, the scheduler-conf API's admin check."""

from __future__ import annotations

import getpass
import json
import time
from pathlib import Path

import pytest

from preemption.targets import ServiceTarget
from tests.colocation.conftest import write_traces
from tests.service.live import live_service
from tests.tracing.conftest import start_server
from tracing.redisconn import RedisConfig
from yarn_adapt.cli import main
from yarn_adapt.minicluster import MiniCluster
from yarn_adapt.service.backend import Observed
from yarn_adapt.service.state.agent_tokens import AgentTokens
from yarn_adapt.service.state.records import Suggestion
from yarn_adapt.service.web.app import create_app
from yarn_adapt.service.web.server import WebServer

PIECES = ["ResourceManager", "Redis", "traces", "node agents", "clocks"]


class NothingToPropose:
    def propose(self, observed: Observed, frozen: frozenset[str]) -> Suggestion | None:
        return None


def doctor(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, str]]:
    """The exit code and each piece's line (its label, then the rest)."""
    code = main(["doctor", "--config", str(config)])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == PIECES, lines
    return code, {line.split(":")[0]: line.split(": ", 1)[1] for line in lines}


def write_config(path: Path, **tables: dict[str, object]) -> Path:
    text = ""
    for table, values in tables.items():
        text += f"[{table}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_the_doctor_finds_each_missing_piece(
    capacity_memory_cluster: MiniCluster,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "YARN_ADAPT_REDIS_PASSWORD"):
        monkeypatch.delenv(variable, raising=False)
    cluster = capacity_memory_cluster
    [node] = cluster.node_ids()
    total_before = cluster.rm_get(f"nodes/{node}")["node"]["totalResource"]
    redis = start_server(tmp_path / "redis", maxmemory_mb=512)
    traces = RedisConfig(url=redis.url, prefix="doctor")
    tracing = {"redis_url": redis.url, "prefix": "doctor"}
    # reports younger than 10 m count (the default, three guard periods, is 15 s: more
    # than the doctor's runs may take between the report and the last run on this host)
    colocation = {"enabled": True, "mode": "recommend", "demand": "none",
                  "qos_targets": ["frontend=100"], "reclaim_ttl_s": 600.0}  # fmt: skip
    service = live_service(cluster, tmp_path, NothingToPropose(),
                           scheduler={"via": "mutation", "file": ""}, tracing=tracing,
                           colocation=colocation)  # fmt: skip
    server = WebServer(create_app(service), "127.0.0.1", 0).start()
    try:
        tables: dict[str, dict[str, object]] = {
            "state": {"dir": str(tmp_path / "state")},  # the service's: its guard's lock
            "yarn": {"rm": [cluster.rm_url], "user": getpass.getuser(), "retries": 0},
            "scheduler": {"via": "mutation"},
            "tracing": tracing,
            "http": {"port": int(server.url.rsplit(":", 1)[1])},
            "colocation": colocation,
        }
        config = write_config(tmp_path / "doctor.toml", **tables)
        write_traces(traces, {node: 2_000}, traces=5)  # frontend's requests, just now

        # 1. No agent reports yet: only that piece is wrong.
        code, said = doctor(config, capsys)
        assert code == 1
        assert said["node agents"].startswith(f"no report from {node} (service {server.url}")
        assert "Fix: start the node agent there" in said["node agents"]
        assert said["ResourceManager"] == (
            f"ok: {cluster.rm_url} (active); {getpass.getuser()} may call updateNodeResource "
            f"(node {node}'s own total {total_before['memory']} MB / "
            f"{total_before['vCores']} vcores sent back, overcommit timeout -1: unchanged)"
        )
        assert said["Redis"].startswith(f"ok: {redis.url}: ")
        assert "MB used of maxmemory 512 MB (noeviction)" in said["Redis"]
        assert said["traces"].startswith("ok: newest trace of frontend ")
        assert said["clocks"].startswith("ok: the RM's clock within ")  # its Date header
        assert "Redis's clock within " in said["clocks"]

        # 2. The node's agent reports (through the service's API, as an agent does).
        token = AgentTokens(service.store).issue(node, "doctor test").token
        agent = ServiceTarget(server.url, node, token)
        agent.report([f"node {node} at 12:00:00: trusted", "  nothing to squeeze"])
        assert agent.current().problem is None
        code, said = doctor(config, capsys)
        assert code == 0, said
        assert all(line.startswith("ok: ") for line in said.values()), said
        assert said["node agents"].startswith(f"ok: {node} reporting, the oldest report ")
        assert main(["doctor", "--config", str(config), "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert document["ok"] is True
        assert [p["status"] for p in document["pieces"]] == ["ok"] * 5

        # 3. A latency-critical service that sends no traces.
        checkout = dict(colocation, qos_targets=["frontend=100", "checkout=80"])
        with_checkout = write_config(
            tmp_path / "checkout.toml", **{**tables, "colocation": checkout}
        )
        code, said = doctor(with_checkout, capsys)
        assert code == 1
        assert said["traces"].startswith("no trace of checkout in the last 5 m (the store's "
                                         "newest trace of any service ended ")  # fmt: skip
        assert "does checkout send its spans" in said["traces"]
        assert [piece for piece, line in said.items() if not line.startswith("ok")] == ["traces"]

        # 4. With the queue cap: the scheduler-conf API's admin check instead.
        capped = dict(colocation, actuator="queue-cap", batch_queue="root.default")
        with_cap = write_config(tmp_path / "cap.toml", **{**tables, "colocation": capped})
        code, said = doctor(with_cap, capsys)
        assert code == 0, said
        assert said["ResourceManager"] == (
            f"ok: {cluster.rm_url} (active); {getpass.getuser()} may change the scheduler "
            f"configuration ({cluster.rm_url}/ws/v1/cluster/scheduler-conf)"
        )

        # 5. A wrong RM address: what needs the RM is skipped, the rest still checked.
        wrong_rm = dict(tables["yarn"], rm=["http://127.0.0.1:1"])
        with_wrong_rm = write_config(tmp_path / "wrong-rm.toml", **{**tables, "yarn": wrong_rm})
        code, said = doctor(with_wrong_rm, capsys)
        assert code == 1
        assert said["ResourceManager"].startswith(
            "cannot reach the ResourceManager: no ResourceManager answered: http://127.0.0.1:1 "
            "unreachable"
        )
        assert said["node agents"] == "skipped: RM unreachable"
        assert said["Redis"].startswith("ok: ") and said["traces"].startswith("ok: ")
        assert "the RM's clock not checked: RM unreachable" in said["clocks"]

        # 6. Redis stopped.
        redis.kill()
        code, said = doctor(config, capsys)
        assert code == 1
        assert said["Redis"].startswith(f"cannot reach Redis: redis {redis.url}: ")
        assert "Fix: start Redis" in said["Redis"]
        assert said["traces"] == "skipped: Redis unreachable"
        assert said["ResourceManager"].startswith("ok: ") and said["node agents"].startswith("ok")
    finally:
        server.stop()
        service.close()
        redis.kill()
    # Every updateNodeResource the doctor sent was a no-op: the RM took it, said so, and
    # the node's total is what it was.
    assert cluster.rm_get(f"nodes/{node}")["node"]["totalResource"] == total_before
    assert _rm_logged("with the same resource", cluster)


def _rm_logged(text: str, cluster: MiniCluster, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(text in path.read_text(errors="replace") for path in cluster.log_paths()):
            return True
        time.sleep(0.5)
    return False
