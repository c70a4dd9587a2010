"""A real redis-server on 127.0.0.1 for tests and benchmarks (Debian's
``/usr/bin/redis-server``; ``tests/setup.sh`` installs it).

Its data, configuration and log live in one directory; the port is picked free at
start and kept across restarts, so clients reconnect to the same URL::

    with RedisServer(tmp_path, appendonly=True) as server:
        client = redis.Redis.from_url(server.url)
        server.restart(kill=True)   # SIGKILL, then start again from the AOF
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from yarn_adapt.minicluster.errors import MiniClusterError

BINARY_ENV = "YARN_ADAPT_REDIS_SERVER"


def find_redis_server() -> str | None:
    """``$YARN_ADAPT_REDIS_SERVER``, else ``redis-server`` on PATH, else Debian's path."""
    configured = os.environ.get(BINARY_ENV)
    if configured:
        return configured if Path(configured).is_file() else None
    found = shutil.which("redis-server")
    if found:
        return found
    return "/usr/bin/redis-server" if Path("/usr/bin/redis-server").is_file() else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    def __init__(
        self,
        directory: Path,
        *,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        maxmemory_mb: int = 0,
    ) -> None:
        self.directory = Path(directory)
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.maxmemory_mb = maxmemory_mb
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def start(self) -> RedisServer:
        binary = find_redis_server()
        if binary is None:
            raise MiniClusterError("redis-server not found (tests/setup.sh installs it)")
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        conf = self.directory / "redis.conf"
        conf.write_text(self._config())
        self._process = subprocess.Popen(
            [binary, str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            cwd=self.directory,
            start_new_session=True,
        )
        self._wait_ready()
        return self

    def _config(self) -> str:
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.directory}",
            f"logfile {self.log_path}",
            'save ""',
            f"appendonly {'yes' if self.appendonly else 'no'}",
            f"appendfsync {self.appendfsync}",
            "daemonize no",
            "protected-mode yes",
        ]
        if self.maxmemory_mb:
            lines.append(f"maxmemory {self.maxmemory_mb}mb")
        return "\n".join(lines) + "\n"

    def _wait_ready(self, timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        client = self.client()
        try:
            while time.monotonic() < deadline:
                if self._process is not None and self._process.poll() is not None:
                    raise MiniClusterError(f"redis-server exited at start: {self.log_tail()}")
                with contextlib.suppress(redis.ConnectionError, redis.BusyLoadingError):
                    if client.ping():
                        return
                time.sleep(0.02)
        finally:
            client.close()
        self.kill()
        raise MiniClusterError(f"redis-server did not answer within {timeout_s}s")

    def client(self) -> redis.Redis:
        """An admin client; no retries of its own (SHUTDOWN must not be retried)."""
        return redis.Redis(
            host="127.0.0.1", port=self.port, socket_timeout=5, retry=Retry(NoBackoff(), 0)
        )

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """SHUTDOWN (the AOF is flushed), or SIGKILL if that does not end it."""
        if not self.running():
            return
        assert self._process is not None
        with contextlib.suppress(redis.RedisError):
            self.client().shutdown(nosave=True)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=10)

    def restart(self, *, kill: bool = False) -> None:
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def used_memory(self) -> int:
        client = self.client()
        try:
            return int(client.info("memory")["used_memory"])
        finally:
            client.close()

    def log_tail(self, lines: int = 10) -> str:
        try:
            return " | ".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()
