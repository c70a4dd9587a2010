"""The OTLP receiver in a process of its own (:mod:`tracing.receiver_process`): it
answers and writes the stream from there, says why when it cannot listen, is started
again when it dies, and does not outlive a parent killed outright."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
import requests

from tests.tracing.conftest import one_span_request
from tracing.errors import ReceiverError
from tracing.receiver import ReceiverConfig
from tracing.receiver_process import RECEIVER_PROCESSES, ReceiverGroup, receiving
from tracing.redisconn import Keys, RedisConfig

PROTOBUF = {"Content-Type": "application/x-protobuf"}
ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = ReceiverConfig(host="127.0.0.1", port=0)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def emptied_stream(store_config: RedisConfig, client: redis.Redis) -> str:
    stream = Keys(store_config.prefix).stream
    client.delete(stream)
    return stream


def wait_for(probe: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s"
        time.sleep(0.05)


def test_the_child_answers_writes_the_stream_counts_and_ends_with_the_block(
    store_config: RedisConfig, client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    stream = emptied_stream(store_config, client)
    with caplog.at_level(logging.INFO, logger="tracing.receiver"):
        with receiving(store_config, stream, LOOPBACK, processes=1) as receiver:
            [child] = receiver.pids
            assert child != os.getpid()
            answer = requests.post(
                receiver.url, data=one_span_request(), headers=PROTOBUF, timeout=10
            )
            assert answer.status_code == 200
            assert client.xlen(stream) == 1
            assert receiver.stats().spans_accepted == 1
        assert not alive(child)
    # the child's own log line, handled by this process's loggers
    assert any(f"listening on {receiver.url}" in r.getMessage() for r in caplog.records)


def test_a_port_taken_is_one_line_naming_the_address(store_config: RedisConfig) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = ReceiverConfig(host="127.0.0.1", port=port)
        with pytest.raises(ReceiverError) as refused, receiving(store_config, "s", config):
            pass
    message = str(refused.value)
    assert f"127.0.0.1:{port}" in message and "\n" not in message


def test_a_receiver_that_dies_is_started_again_on_its_port_and_says_so(
    store_config: RedisConfig, client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    stream = emptied_stream(store_config, client)
    with receiving(store_config, stream, LOOPBACK, processes=1) as receiver:
        [first], url = receiver.pids, receiver.url
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: receiver.restarts == 1, 30)
        assert receiver.pids != [first] and receiver.url == url
        answer = requests.post(url, data=one_span_request(), headers=PROTOBUF, timeout=10)
        assert answer.status_code == 200 and client.xlen(stream) == 1
    died = [r.getMessage() for r in caplog.records if "exited" in r.getMessage()]
    assert died == [
        f"the OTLP receiver process exited (code -9); starting it again on port {receiver.port}"
    ]


PARENT = """
import sys, time
from tracing.receiver import ReceiverConfig
from tracing.receiver_process import RECEIVER_PROCESSES, ReceiverGroup, receiving
from tracing.redisconn import RedisConfig
with receiving(RedisConfig(url=sys.argv[1]), "s", ReceiverConfig(host="127.0.0.1", port=0)) as r:
    print(*r.pids, flush=True)
    time.sleep(300)
"""


def test_a_parent_killed_outright_takes_its_receiver_with_it(store_config: RedisConfig) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, store_config.url],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert parent.stdout is not None
        children = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(children) == RECEIVER_PROCESSES and all(map(alive, children))
        parent.kill()
        parent.wait(10)
        wait_for(lambda: not any(map(alive, children)), 15)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        if parent.stdout is not None:
            parent.stdout.close()


def test_processes_share_the_address_the_limits_and_count_together(
    store_config: RedisConfig, client: redis.Redis
) -> None:
    stream = emptied_stream(store_config, client)
    config = ReceiverConfig(host="127.0.0.1", port=0, max_spans_per_s=1000, max_connections=9)
    group = ReceiverGroup(store_config, stream, config, 2)
    assert (group.config.max_spans_per_s, group.config.max_connections) == (500, 5)
    with receiving(store_config, stream, config, processes=2) as receivers:
        assert len(set(receivers.pids)) == 2
        for _ in range(24):  # a new connection each: the kernel spreads them
            answer = requests.post(
                receivers.url, data=one_span_request(), headers={**PROTOBUF, "Connection": "close"},
                timeout=10,
            )  # fmt: skip
            assert answer.status_code == 200
        each = [member.stats().answers.get(200, 0) for member in receivers.members]
        assert sum(each) == 24 and min(each) > 0, each
        assert receivers.stats().spans_accepted == 24 == client.xlen(stream)


def test_no_processes_is_refused(store_config: RedisConfig) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ReceiverGroup(store_config, "s", ReceiverConfig(host="127.0.0.1", port=0), 0)
