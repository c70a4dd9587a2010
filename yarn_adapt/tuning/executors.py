"""Where group optimizers run: inline, a local process pool, or a Dask cluster.

Every choice is a :class:`concurrent.futures.Executor`, named by a spec string (the
``--executor`` option):

* ``serial`` — inline, in this process (tests, debugging, one-core machines);
* ``process`` or ``process:N`` — a local process pool of N workers (default: one per
  core). Workers run BLAS/OpenMP single-threaded so N workers use N cores, not N x
  cores;
* ``dask://HOST:PORT`` — the workers of a running Dask distributed scheduler. Dask is
  an optional extra (``pip install 'yarn-adapt[dask]'``).

:func:`map_in_chunks` hands work over in a few large chunks instead of one task per
item: a group search is milliseconds, a round trip to a worker is not much less.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, TypeVar, cast

from yarn_adapt.errors import SettingsError

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

DEFAULT_CONNECT_TIMEOUT_S = 5.0
_DASK_URL = re.compile(r"^dask://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})/?$")
_PROCESS = re.compile(r"^process(?::(?P<workers>\d+))?$")


class ExecutorSpecError(SettingsError):
    """The ``--executor`` value is malformed, or names something not installed."""


class ExecutorUnavailable(SettingsError, ConnectionError):
    """The ``--executor`` address did not answer."""


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed ``--executor`` value."""

    kind: Literal["serial", "process", "dask"]
    workers: int | None = None
    address: str | None = None

    def __str__(self) -> str:
        if self.kind == "dask":
            return f"dask://{self.address}"
        return self.kind if self.workers is None else f"{self.kind}:{self.workers}"


def parse_executor_spec(text: str | None) -> ExecutorSpec:
    """``None`` means the local process pool."""
    value = (text or "process").strip()
    if value == "serial":
        return ExecutorSpec("serial", workers=1)
    if match := _PROCESS.match(value):
        return ExecutorSpec("process", workers=_positive_workers(match["workers"], value))
    if match := _DASK_URL.match(value):
        return ExecutorSpec("dask", address=f"{match['host']}:{_port(match['port'], value)}")
    raise ExecutorSpecError(
        f"--executor {value!r}: expected 'serial', 'process', 'process:N' or 'dask://HOST:PORT'"
    )


def _positive_workers(text: str | None, value: str) -> int | None:
    if text is None:
        return None
    if int(text) < 1:
        raise ExecutorSpecError(f"--executor {value!r}: the worker count must be at least 1")
    return int(text)


def _port(text: str, value: str) -> int:
    if not 0 < int(text) < 65536:
        raise ExecutorSpecError(f"--executor {value!r}: port {text} is not in 1-65535")
    return int(text)


@dataclass(frozen=True)
class ExecutorHandle:
    """An open executor and how many tasks it runs at once."""

    executor: Executor
    workers: int
    spec: ExecutorSpec


@contextmanager
def open_executor(
    spec: str | ExecutorSpec | None = None,
    *,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> Iterator[ExecutorHandle]:
    """Open the executor ``spec`` names; close it (never the Dask cluster) on exit."""
    parsed = spec if isinstance(spec, ExecutorSpec) else parse_executor_spec(spec)
    if parsed.kind == "serial":
        yield ExecutorHandle(SerialExecutor(), 1, parsed)
    elif parsed.kind == "process":
        workers = parsed.workers or os.cpu_count() or 1
        with _process_pool(workers) as pool:
            yield ExecutorHandle(pool, workers, parsed)
    else:
        with _dask_executor(parsed, connect_timeout_s) as (executor, workers):
            yield ExecutorHandle(executor, workers, parsed)


class SerialExecutor(Executor):
    """Runs each call at submission, in this process."""

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        future: Future[R] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the caller sees it from future.result()
            future.set_exception(exc)
        return future


@contextmanager
def _process_pool(workers: int) -> Iterator[Executor]:
    pool = ProcessPoolExecutor(max_workers=workers, initializer=limit_native_threads)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


_THREAD_LIMITS: list[Any] = []


def limit_native_threads() -> None:
    """Keep BLAS/OpenMP pools to one thread in this (worker) process."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    if not _THREAD_LIMITS:  # a Dask worker may be asked more than once
        _THREAD_LIMITS.append(threadpool_limits(limits=1))


@contextmanager
def _dask_executor(spec: ExecutorSpec, timeout_s: float) -> Iterator[tuple[Executor, int]]:
    client = _dask_client(spec, timeout_s)
    try:
        client.run(limit_native_threads)
        workers = max(1, sum(client.nthreads().values()))
        yield client.get_executor(pure=False), workers
    finally:
        client.close()


def _dask_client(spec: ExecutorSpec, timeout_s: float) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:
        raise ExecutorSpecError(
            f"--executor {spec}: dask is not installed (pip install 'yarn-adapt[dask]')"
        ) from exc
    try:
        return Client(  # type: ignore[no-untyped-call]
            f"tcp://{spec.address}", timeout=timeout_s, set_as_default=False
        )
    except (OSError, TimeoutError) as exc:
        raise ExecutorUnavailable(
            f"--executor {spec}: no Dask scheduler answered within {timeout_s:g} s"
        ) from exc


def map_in_chunks(
    handle: ExecutorHandle,
    fn: Callable[[T], R],
    items: Sequence[T],
    chunks_per_worker: int = 2,
    weights: Sequence[float] | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[R]:
    """``[fn(item) for item in items]`` on the executor, in a few chunks, in order.

    With ``weights`` (an estimate of each item's cost) the chunks are balanced by
    longest-processing-time-first: the heaviest item goes to the lightest chunk, and
    the heaviest chunks are submitted first so no worker is left with a big one at
    the end. ``on_done(n)`` hears how many items are finished as each chunk ends."""
    if not items:
        return []
    chunks = min(len(items), handle.workers * chunks_per_worker)
    if weights is None:
        size = math.ceil(len(items) / chunks)
        parts = [list(range(i, min(i + size, len(items)))) for i in range(0, len(items), size)]
    else:
        parts = _balanced(weights, chunks)
    futures = {
        handle.executor.submit(_apply_all, fn, [items[i] for i in part]): part for part in parts
    }
    results: list[R | None] = [None] * len(items)
    finished = 0
    for future in as_completed(futures):
        part = futures[future]
        for index, result in zip(part, future.result(), strict=True):
            results[index] = result
        finished += len(part)
        if on_done is not None:
            on_done(finished)
    return cast("list[R]", results)


def _balanced(weights: Sequence[float], chunks: int) -> list[list[int]]:
    """Indices split into ``chunks`` parts of similar total weight, heaviest first."""
    loads = [(0.0, c) for c in range(chunks)]
    parts: list[list[int]] = [[] for _ in range(chunks)]
    for index in sorted(range(len(weights)), key=lambda i: -weights[i]):
        load, chunk = heapq.heappop(loads)
        parts[chunk].append(index)
        heapq.heappush(loads, (load + weights[index], chunk))
    totals = {chunk: load for load, chunk in loads}
    return [parts[c] for c in sorted(totals, key=lambda c: -totals[c]) if parts[c]]


def _apply_all(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    return [fn(item) for item in items]
