"""The OTLP receiver in a process of its own, as ``python -m tracing ingest --otlp``
and ``yarn-adapt serve`` run it.

In the ingest worker's process the two took turns on one interpreter lock: decoding a
request (about 6 µs a span) and assembling it (about 3 µs) could not overlap, which
held the pair to about 70,000 spans a second on two cores. Apart, each has a core.

The parent starts the receiver with :func:`receiving` and talks to it over one pipe:
the child answers ``ready`` with its URL (or the one-line reason it could not listen),
then ``stats`` on request, and stops on ``stop`` or when the pipe closes (so a parent
killed outright takes its receiver with it). The child's log records go to the
parent's handlers. A receiver process that dies is started again on the same port,
once a second at most, and each death is logged with its exit code.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import logging.handlers
import math
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from tracing.errors import ReceiverError
from tracing.redisconn import RedisConfig, make_client

if TYPE_CHECKING:  # protobuf is imported where a receiver runs, not by its settings
    from tracing.receiver import ReceiverConfig, ReceiverStats

log = logging.getLogger("tracing.receiver")
START_TIMEOUT_S = 30.0  # a spawned interpreter importing protobuf on a busy node
STOP_TIMEOUT_S = 10.0
RESTART_DELAY_S = 1.0
RECEIVER_PROCESSES = 2
"""The receiver's processes unless told: one interpreter decodes about 120,000 spans a
second (bench trace-risk); two let a burst use two cores."""

_CONTEXT = multiprocessing.get_context("spawn")  # no copy of the parent's threads


def _serve(
    redis_config: RedisConfig,
    stream: str,
    config: ReceiverConfig,
    pipe: Connection,
    records: Any,
    level: int,
) -> None:
    """The child: listen, say so, answer the parent until it says stop or goes away."""
    from tracing.receiver import OtlpReceiver, ReceiverServer

    faulthandler.register(signal.SIGUSR1)  # its threads' stacks, when it does not stop
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(records)]
    root.setLevel(level)
    client = make_client(redis_config, retries=0)
    try:
        server = ReceiverServer(OtlpReceiver(client, stream, config)).start()
    except ReceiverError as exc:
        pipe.send(("error", str(exc)))
        client.close()
        return
    pipe.send(("ready", server.url, server.port))
    try:
        while (message := _next(pipe)) != "stop":
            if message == "stats":
                pipe.send(server.receiver.stats())
    finally:
        server.stop()
        client.close()


def _next(pipe: Connection) -> str:
    try:
        return str(pipe.recv())
    except (EOFError, OSError):
        return "stop"  # the parent is gone


class ReceiverProcess:
    """One receiver child and its pipe; :meth:`start` raises ReceiverError when the
    child cannot listen (the child's own message)."""

    def __init__(self, redis_config: RedisConfig, stream: str, config: ReceiverConfig) -> None:
        self.redis_config, self.stream, self.config = redis_config, stream, config
        self._records: Any = _CONTEXT.Queue()
        self._listener = logging.handlers.QueueListener(
            self._records, _Forward(), respect_handler_level=False
        )
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ended = threading.Event()  # the watcher saw the child end after stop()
        self._process: Any = None
        self._pipe: Connection | None = None
        self.url = ""
        self.port = config.port
        self.restarts = 0

    def start(self) -> ReceiverProcess:
        self._listener.start()
        try:
            self._spawn()
        except BaseException:
            self._listener.stop()
            raise
        threading.Thread(target=self._watch, name="otlp-receiver-watch", daemon=True).start()
        return self

    @property
    def pid(self) -> int:
        """The receiver process's (it changes when the receiver is started again)."""
        return int(self._process.pid)

    def stats(self) -> ReceiverStats:
        """The child's counters (since it last started)."""
        with self._lock:
            assert self._pipe is not None
            self._pipe.send("stats")
            stats: ReceiverStats = self._pipe.recv()
            return stats

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            process, pipe = self._process, self._pipe
            if pipe is not None:
                with contextlib.suppress(OSError):  # the child is already gone
                    pipe.send("stop")
        if process is not None and not self._ended.wait(STOP_TIMEOUT_S):
            log.error(
                "the OTLP receiver process did not stop in %.0f s; its stacks are on its "
                "standard error; killing it", STOP_TIMEOUT_S,
            )  # fmt: skip
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGUSR1)
                time.sleep(1.0)
                process.kill()
            self._ended.wait(STOP_TIMEOUT_S)
        for each in {pipe, self._pipe}:  # and a child's started meanwhile
            if each is not None:
                each.close()
        self._listener.stop()
        self._records.close()
        self._records.join_thread()

    def _spawn(self) -> None:
        parent_end, child_end = _CONTEXT.Pipe()
        config = replace(self.config, port=self.port)
        process = _CONTEXT.Process(
            target=_serve,
            args=(self.redis_config, self.stream, config, child_end, self._records,
                  min(logging.getLogger().getEffectiveLevel(), log.getEffectiveLevel())),
            name="otlp-receiver",
            daemon=True,
        )  # fmt: skip
        process.start()
        child_end.close()
        answer = _first_answer(parent_end, process)
        if answer[0] != "ready":
            process.join(STOP_TIMEOUT_S)
            parent_end.close()
            raise ReceiverError(answer[1])
        self.url, self.port = answer[1], answer[2]
        with self._lock:
            self._process, self._pipe = process, parent_end
        if self._stopping.is_set():  # stop() came while this one was starting
            parent_end.send("stop")

    def _watch(self) -> None:
        """The one thread that waits for (and reaps) the child: it starts it again
        whenever it dies while the receiver should run, and says when it ended."""
        while True:
            process = self._process
            process.join()
            if self._stopping.wait(RESTART_DELAY_S):  # at once when stop() came
                self._ended.set()
                return
            log.error(
                "the OTLP receiver process exited (code %s); starting it again on port %d",
                process.exitcode, self.port,
            )  # fmt: skip
            try:
                self._spawn()
                self.restarts += 1
            except ReceiverError as exc:
                log.error("the OTLP receiver could not start again: %s", exc)


def _first_answer(pipe: Connection, process: Any) -> tuple[Any, ...]:
    if pipe.poll(START_TIMEOUT_S):
        try:
            answer: tuple[Any, ...] = pipe.recv()
            return answer
        except EOFError:
            pass
    if process.is_alive():
        process.kill()
    process.join()
    return ("error", f"the OTLP receiver process did not start (exit code {process.exitcode})")


class _Forward(logging.Handler):
    """The child's records, handled by the parent's loggers as if logged here."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


class ReceiverGroup:
    """``processes`` receiver processes on one address (SO_REUSEPORT: the kernel spreads
    the exporters' connections over them), each with an equal share of the rate limit
    and of the connections; counted together."""

    def __init__(
        self, redis_config: RedisConfig, stream: str, config: ReceiverConfig, processes: int
    ) -> None:
        if processes < 1:
            raise ValueError(f"receiver processes must be at least 1, got {processes}")
        self.redis_config, self.stream, self.processes = redis_config, stream, processes
        self.config = replace(
            config,
            reuse_port=processes > 1,
            max_spans_per_s=config.max_spans_per_s / processes,
            max_connections=max(1, math.ceil(config.max_connections / processes)),
        )
        self.members: list[ReceiverProcess] = []

    def start(self) -> ReceiverGroup:
        try:
            first = ReceiverProcess(self.redis_config, self.stream, self.config).start()
            self.members.append(first)
            bound = replace(self.config, port=first.port)  # port 0: the one the first got
            for _ in range(self.processes - 1):
                self.members.append(ReceiverProcess(self.redis_config, self.stream, bound).start())
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def url(self) -> str:
        return self.members[0].url

    @property
    def port(self) -> int:
        return self.members[0].port

    @property
    def pids(self) -> list[int]:
        return [member.pid for member in self.members]

    @property
    def restarts(self) -> int:
        return sum(member.restarts for member in self.members)

    def stats(self) -> ReceiverStats:
        """Every process's counters, added up."""
        from tracing.receiver import ReceiverStats

        each = [member.stats() for member in self.members]
        answers: Counter[int] = Counter()
        for stats in each:
            answers.update(stats.answers)
        return ReceiverStats(
            answers=dict(answers),
            spans_accepted=sum(stats.spans_accepted for stats in each),
            spans_rejected=sum(stats.spans_rejected for stats in each),
            entries_written=sum(stats.entries_written for stats in each),
        )

    def stop(self) -> None:
        for member in self.members:
            member.stop()


@contextmanager
def receiving(
    redis_config: RedisConfig,
    stream: str,
    config: ReceiverConfig,
    processes: int = RECEIVER_PROCESSES,
) -> Iterator[ReceiverGroup]:
    """The receiver answering on ``config``'s address, in ``processes`` processes of its
    own, while the block runs, writing to ``stream``. Its Redis clients do not retry:
    the exporters do, and a request must not sit in back-off. (Refuses an exposed
    address first: :func:`~tracing.receiver.exposure_problem`, raised as a ValueError.)"""
    from tracing.receiver import exposure_problem

    problem = exposure_problem(config)
    if problem:
        raise ValueError(problem)
    receivers = ReceiverGroup(redis_config, stream, config, processes).start()
    try:
        yield receivers
    finally:
        receivers.stop()
