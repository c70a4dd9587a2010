"""conf/yarn-adapt-ingest.service and conf/redis-yarn-adapt.conf as an operator installs
them: Debian's redis-server starts from the example configuration (password, memory cap,
no persistence), the unit's own command line (its shell line, credentials from
``$CREDENTIALS_DIRECTORY``) runs the ingest worker and the OTLP receiver against it, an
exporter's request with the token is stored and one without is refused, and SIGTERM
ends it cleanly."""

from __future__ import annotations

import configparser
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import requests

from tests.tracing.conftest import one_span_request, unavailable
from tracing.__main__ import parser
from tracing.redisconn import RedisConfig, make_client
from tracing.store import TraceStore
from yarn_adapt.minicluster.redis_server import find_redis_server, free_port

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "conf" / "yarn-adapt-ingest.service"
REDIS_CONF = ROOT / "conf" / "redis-yarn-adapt.conf"
BINARY = "/usr/local/bin/yarn-adapt-tracing"


def unit_service() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(UNIT)
    assert set(unit.sections()) == {"Unit", "Service", "Install"}
    return unit["Service"]


def shell_line() -> str:
    """The shell command of the unit's ExecStart (``/bin/sh -c '...'``)."""
    exec_start = unit_service()["ExecStart"]
    sh, dash_c, line = shlex.split(exec_start)
    assert (sh, dash_c) == ("/bin/sh", "-c")
    return line


def test_the_unit_is_hardened_and_its_command_is_the_ingest_worker_with_the_receiver() -> None:
    service = unit_service()
    assert service["NoNewPrivileges"] == "true" and service["ProtectSystem"] == "strict"
    assert service["CapabilityBoundingSet"] == "" and service["KillSignal"] == "SIGTERM"
    assert service["User"] != "root"
    line = shell_line()
    assert "$CREDENTIALS_DIRECTORY/redis-password" in line  # never on the command line
    argv = shlex.split(line.split(f"exec {BINARY} ", 1)[1])
    args = parser().parse_args(argv)
    assert args.command == "ingest" and args.otlp.endswith(":4318")
    assert args.otlp_token_file == "$CREDENTIALS_DIRECTORY/otlp-token"
    # the unit's binary is the package's console script for that same entry point
    scripts = (ROOT / "pyproject.toml").read_text()
    assert 'yarn-adapt-tracing = "tracing.__main__:main"' in scripts


def test_redis_from_the_example_conf_and_the_units_command_store_an_exporters_spans(
    tmp_path: Path,
) -> None:
    server = find_redis_server()
    if server is None:
        unavailable("redis-server is not installed (tests/setup.sh installs it)")
        return
    password = next(
        line.split()[1] for line in REDIS_CONF.read_text().splitlines()
        if line.startswith("requirepass ")
    )  # fmt: skip
    redis_port, otlp_port = free_port(), free_port()
    redis_log = (tmp_path / "redis.log").open("wb")
    redis_proc = subprocess.Popen(
        [str(server), str(REDIS_CONF), "--port", str(redis_port), "--dir", str(tmp_path),
         "--bind", "127.0.0.1"],
        stdout=redis_log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "otlp-token").write_text("t0ken\n")
    (credentials / "redis-password").write_text(password + "\n")
    line = (
        shell_line()
        .replace(BINARY, f"{shlex.quote(sys.executable)} -m tracing")
        .replace("redis://127.0.0.1:6379/0", f"redis://127.0.0.1:{redis_port}/0")
        .replace("0.0.0.0:4318", f"0.0.0.0:{otlp_port}")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACING_")}
    env.update(CREDENTIALS_DIRECTORY=str(credentials), PYTHONPATH=str(ROOT))
    worker = subprocess.Popen(["/bin/sh", "-c", line], env=env, stderr=subprocess.PIPE)
    client = redis.Redis(port=redis_port, password=password)
    url = f"http://127.0.0.1:{otlp_port}/v1/traces"
    headers = {"Content-Type": "application/x-protobuf"}
    try:
        deadline = time.monotonic() + 60
        while True:  # until both listen
            try:
                reply = requests.post(
                    url, data=one_span_request(), timeout=10,
                    headers={**headers, "Authorization": "Bearer t0ken"},
                )  # fmt: skip
                break
            except requests.ConnectionError:
                assert redis_proc.poll() is None, (tmp_path / "redis.log").read_text()
                assert worker.poll() is None
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert reply.status_code == 200, reply.content
        refused = requests.post(url, data=one_span_request(), headers=headers, timeout=10)
        assert refused.status_code == 401
        config = client.config_get("maxmemory*")
        assert config["maxmemory-policy"] == "noeviction" and int(config["maxmemory"]) > 0
        assert client.config_get("save")["save"] == ""  # no snapshots
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=redis_port, password="wrong").ping()
        stored = RedisConfig(url=f"redis://127.0.0.1:{redis_port}/0", password=password)
        store = TraceStore(make_client(stored), stored)
        while store.load().columns.n_spans < 1 and time.monotonic() < deadline:
            time.sleep(0.2)  # the worker assembles a trace once it was quiet (5 s)
        assert store.load().columns.n_spans == 1
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
        redis_proc.kill()
        redis_proc.wait(timeout=10)
        redis_log.close()
    assert worker.returncode == 0, err
    assert b"OTLP/HTTP receiver listening" in err
