"""The per-core interference model: each term inflates the service time, the
queueing follows it, and the committed fit is read or refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yarn_adapt.cosim.interference import (
    CoreInterference,
    CorePressure,
    contended_p95_ms,
    load_core_interference,
    queueing_p95_ms,
)
from yarn_adapt.errors import InputError

MODEL = CoreInterference(cpu=0.6, presence=0.05, memory=0.4)


def test_without_batch_it_is_the_queueing_alone() -> None:
    alone = queueing_p95_ms(3.0, 50.0, 1.0, ceiling_ms=300.0)
    assert contended_p95_ms(3.0, 50.0, 1.0, CorePressure(), MODEL) == pytest.approx(alone)
    assert alone > 3.0  # rho 0.15 queues a little


@pytest.mark.parametrize(
    "pressure",
    [CorePressure(weighted=1.0), CorePressure(threads=2.0), CorePressure(hogs=0.5)],
)
def test_each_term_slows_the_service(pressure: CorePressure) -> None:
    assert contended_p95_ms(3.0, 50.0, 1.0, pressure, MODEL) > contended_p95_ms(
        3.0, 50.0, 1.0, CorePressure(), MODEL
    )


def test_contention_raises_utilisation_not_only_the_service_time() -> None:
    pressure = CorePressure(weighted=2.0)
    inflation = MODEL.inflation(pressure)
    light = contended_p95_ms(3.0, 1.0, 1.0, pressure, MODEL) / queueing_p95_ms(
        3.0, 1.0, 1.0, ceiling_ms=1e9
    )
    heavy = contended_p95_ms(3.0, 150.0, 1.0, pressure, MODEL) / queueing_p95_ms(
        3.0, 150.0, 1.0, ceiling_ms=1e9
    )
    assert light == pytest.approx(inflation, rel=0.03)  # barely any queue at 1/s
    assert heavy > 1.5 * inflation  # the queue grows with the slower service


def test_a_saturated_service_is_at_the_ceiling() -> None:
    p95 = contended_p95_ms(3.0, 200.0, 1.0, CorePressure(weighted=4.0), MODEL, ceiling_factor=50)
    assert p95 == pytest.approx(150.0)


def test_per_core_scales_with_cores_not_with_a_node_wide_share() -> None:
    # one batch thread on a 16-core node is 1/16 of a thread per core
    one = CorePressure(weighted=1 / 16, threads=1 / 16)
    assert MODEL.inflation(one) < 1.05


def test_the_committed_fit_is_read_and_a_broken_one_refused(tmp_path: Path) -> None:
    read = load_core_interference()
    assert read.cpu >= 0 and read.presence >= 0 and read.memory >= 0
    broken = tmp_path / "core.json"
    broken.write_text(json.dumps({"coefficients": {"cpu": 1.0}}))
    with pytest.raises(InputError, match=r"core.json: not a per-core interference fit"):
        load_core_interference(broken)
    broken.write_text(json.dumps({"coefficients": {"cpu": -1, "presence": 0, "memory": 0}}))
    with pytest.raises(InputError, match=r"cpu -1.0 is not a number >= 0"):
        load_core_interference(broken)
    with pytest.raises(InputError, match=r"missing.json: cannot read"):
        load_core_interference(tmp_path / "missing.json")
