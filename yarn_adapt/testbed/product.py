"""The product as the testbed runs it: ``yarn-adapt serve`` (the guard, its ingest worker,
the agents' reclaim route, the page and the API) from ``conf/testbed/yarn-adapt.toml``,
and the node agents' settings from ``conf/testbed/yarn-adapt-agent.toml``.

The examples are what an operator of the testbed's nodes would write; a run sets only
what it picks afresh (addresses, ports, the state directory, the node's identity, the
QoS target it measured) with :func:`settings_file`. :class:`ServiceProcess` is one
``serve`` process: the testbed switches its guard's mode over the API as an operator
does (``POST /api/guard/mode``), reads ``GET /api/guard`` for what it did, and issues
each node's agent token with ``yarn-adapt agent-token issue``.
"""

from __future__ import annotations

import json
import logging
import secrets
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests

from yarn_adapt.minicluster.errors import MiniClusterError
from yarn_adapt.minicluster.processes import ManagedProcess, launch, marked_env

log = logging.getLogger(__name__)

PACKAGE_PARENT = Path(__file__).resolve().parents[2]
EXAMPLES = PACKAGE_PARENT / "conf" / "testbed"
SERVICE_EXAMPLE = EXAMPLES / "yarn-adapt.toml"
AGENT_EXAMPLE = EXAMPLES / "yarn-adapt-agent.toml"
ADMIN_TOKEN_ENV = "YARN_ADAPT_TOKEN"

Tables = dict[str, dict[str, Any]]
Overrides = Mapping[str, Mapping[str, Any]]


def load_example(path: Path) -> Tables:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise MiniClusterError(f"{path}: the testbed's example settings: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise MiniClusterError(f"{path}: {exc}") from exc


def merged(example: Mapping[str, Mapping[str, Any]], overrides: Overrides) -> Tables:
    """``example`` with each table's keys of ``overrides`` set (tables added as needed)."""
    tables = {name: dict(body) for name, body in example.items()}
    for name, body in overrides.items():
        tables.setdefault(name, {}).update(body)
    return tables


def toml_text(tables: Mapping[str, Mapping[str, Any]]) -> str:
    return "".join(_table(name, body) for name, body in tables.items())


def settings_file(example: Path, overrides: Overrides, target: Path) -> Path:
    """Write ``example`` with ``overrides`` to ``target``."""
    return write_settings(merged(load_example(example), overrides), target)


def write_settings(tables: Mapping[str, Mapping[str, Any]], target: Path) -> Path:
    """``tables`` as TOML at ``target`` (mode 600: it may name tokens)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(toml_text(tables))
    target.chmod(0o600)
    return target


def _table(name: str, body: Mapping[str, Any]) -> str:
    lines = [f"[{name}]"]
    for key, value in body.items():
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n\n"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return json.dumps(str(value))  # a TOML basic string


def yarn_adapt_command(*args: str) -> list[str]:
    """``yarn-adapt ARGS`` with this interpreter (the package it runs from)."""
    return [sys.executable, "-m", "yarn_adapt", *args]


class ServiceProcess:
    """One ``yarn-adapt serve`` of the testbed: started from ``config``, its page and API
    on ``url``; its admin token the testbed's own (in the environment)."""

    def __init__(self, config: Path, port: int, cluster_root: Path, work_dir: Path) -> None:
        self.config = config
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.token = secrets.token_urlsafe(24)
        self._cluster_root = cluster_root
        self._work_dir = work_dir
        self._process: ManagedProcess | None = None
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {self.token}"
        self.starts = 0

    def _env(self) -> dict[str, str]:
        return marked_env(
            self._cluster_root, {"PYTHONPATH": str(PACKAGE_PARENT), ADMIN_TOKEN_ENV: self.token}
        )

    def start(self, timeout_s: float = 90.0) -> None:
        """Start ``serve`` and wait until its guard answers on the API."""
        self.starts += 1
        log_path = self._work_dir / f"serve-{self.starts}.log"
        command = yarn_adapt_command("serve", "--config", str(self.config))
        self._process = launch("serve", command, log_path, self._env(), cwd=self._work_dir)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self._process.alive():
                raise MiniClusterError(f"yarn-adapt serve exited at start: see {log_path}")
            if self._answers():
                return
            time.sleep(0.25)
        raise MiniClusterError(f"yarn-adapt serve did not answer within {timeout_s:.0f} s")

    def _answers(self) -> bool:
        try:
            reply = self._session.get(f"{self.url}/api/guard", timeout=2.0)
        except requests.RequestException:
            return False
        return reply.status_code == 200

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def status(self) -> dict[str, Any] | None:
        """``GET /api/guard`` (None when it does not answer)."""
        try:
            reply = self._session.get(f"{self.url}/api/guard", timeout=5.0)
        except requests.RequestException:
            return None
        return reply.json() if reply.status_code == 200 else None

    def set_mode(self, mode: str) -> None:
        reply = self._session.post(f"{self.url}/api/guard/mode", json={"mode": mode}, timeout=30.0)
        if reply.status_code != 200:
            raise MiniClusterError(f"guard mode {mode}: HTTP {reply.status_code}: {reply.text}")

    def agent_token(self, node_id: str) -> str:
        """A new agent token for ``node_id`` (``yarn-adapt agent-token issue --rotate``)."""
        command = yarn_adapt_command("agent-token", "issue", node_id, "--rotate", "--json",
                                     "--config", str(self.config))  # fmt: skip
        done = subprocess.run(command, env=self._env(), capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        if done.returncode != 0:
            raise MiniClusterError(f"agent-token issue {node_id}: {done.stderr.strip()}")
        return str(json.loads(done.stdout.strip().splitlines()[-1])["token"])

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM (the guard gives every node back), then wait; its exit code."""
        if self._process is None:
            return None
        process, self._process = self._process, None
        try:
            process.popen.send_signal(signal.SIGTERM)
            return process.popen.wait(timeout=timeout_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            log.warning("yarn-adapt serve did not stop within %.0f s: killed", timeout_s)
            process.kill_group()
            return None

    def close(self) -> None:
        self.stop()
        self._session.close()
