"""Executors: the ``--executor`` values, chunking, and a Dask scheduler that cannot be
reached (the tuner's answers on each executor: ``tests/tuning/test_tuner.py``)."""

from __future__ import annotations

import socket
import sys

import pytest

from yarn_adapt.errors import SettingsError
from yarn_adapt.tuning.executors import (
    ExecutorHandle,
    ExecutorSpec,
    ExecutorSpecError,
    ExecutorUnavailable,
    SerialExecutor,
    map_in_chunks,
    open_executor,
    parse_executor_spec,
)


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        (None, ExecutorSpec("process")),
        ("process", ExecutorSpec("process")),
        ("process:3", ExecutorSpec("process", workers=3)),
        ("serial", ExecutorSpec("serial", workers=1)),
        ("dask://scheduler.example:8786", ExecutorSpec("dask", address="scheduler.example:8786")),
        ("dask://10.0.0.7:8786/", ExecutorSpec("dask", address="10.0.0.7:8786")),
        ("dask://[::1]:8786", ExecutorSpec("dask", address="[::1]:8786")),
    ],
)
def test_executor_specs(text: str | None, spec: ExecutorSpec) -> None:
    assert parse_executor_spec(text) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "dask://host",
            "--executor 'dask://host': expected 'serial', 'process', 'process:N' or "
            "'dask://HOST:PORT'",
        ),
        ("dask://host:0", "--executor 'dask://host:0': port 0 is not in 1-65535"),
        ("dask://host:70000", "--executor 'dask://host:70000': port 70000 is not in 1-65535"),
        ("process:0", "--executor 'process:0': the worker count must be at least 1"),
        ("tcp://host:8786", None),
        ("threads", None),
    ],
)
def test_bad_executor_specs_are_one_line_settings_errors(text: str, message: str | None) -> None:
    with pytest.raises(ExecutorSpecError) as raised:
        parse_executor_spec(text)
    assert isinstance(raised.value, SettingsError)
    assert "\n" not in str(raised.value)
    if message is not None:
        assert str(raised.value) == message


def test_serial_executor_hands_back_results_and_errors() -> None:
    executor = SerialExecutor()
    assert executor.submit(divmod, 7, 2).result() == (3, 1)
    with pytest.raises(ZeroDivisionError):
        executor.submit(divmod, 1, 0).result()


def test_chunks_keep_the_order() -> None:
    with open_executor("process:2") as handle:
        assert map_in_chunks(handle, abs, list(range(-25, 0))) == list(range(25, 0, -1))
        assert map_in_chunks(handle, abs, []) == []


def test_chunks_report_how_many_items_are_done() -> None:
    heard: list[int] = []
    with open_executor("process:2") as handle:
        got = map_in_chunks(handle, abs, list(range(-25, 0)), on_done=heard.append)
    assert got == list(range(25, 0, -1))
    assert heard == sorted(heard) and heard[-1] == 25 and len(heard) == 4  # 2 workers x 2


def test_an_unreachable_scheduler_is_one_clear_line() -> None:
    pytest.importorskip("distributed")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        pytest.raises(ExecutorUnavailable) as raised,
        open_executor(f"dask://127.0.0.1:{port}", connect_timeout_s=1.0),
    ):
        pass
    assert raised.value.one_line() == (
        f"--executor dask://127.0.0.1:{port}: no Dask scheduler answered within 1 s"
    )


def test_dask_missing_is_named_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # what an absent package looks like
    with pytest.raises(ExecutorSpecError) as raised, open_executor("dask://127.0.0.1:8786"):
        pass
    assert str(raised.value) == (
        "--executor dask://127.0.0.1:8786: dask is not installed (pip install 'yarn-adapt[dask]')"
    )


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_weighted_chunks_keep_the_order_and_balance_the_load(workers: int) -> None:
    weights = [float(w) for w in (50, 1, 1, 1, 30, 2, 2, 20, 5, 5, 5, 1)]
    handle = ExecutorHandle(RecordingExecutor(), workers, ExecutorSpec("serial"))
    results = map_in_chunks(handle, float, weights, chunks_per_worker=1, weights=weights)
    assert results == weights
    loads = [sum(chunk) for chunk in handle.executor.chunks]  # type: ignore[attr-defined]
    assert len(loads) == min(workers, len(weights))
    assert loads == sorted(loads, reverse=True)  # heaviest chunk first
    assert max(loads) - min(loads) <= max(weights[1:])  # LPT: within one item of even


class RecordingExecutor(SerialExecutor):
    """Runs inline and remembers the chunks it was handed."""

    def __init__(self) -> None:
        self.chunks: list[list[float]] = []

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.chunks.append(list(args[1]))
        return super().submit(fn, *args, **kwargs)
