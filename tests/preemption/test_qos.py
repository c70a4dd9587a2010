"""The QoS prediction engine: Table 3's comparison and InferPreemptedResource()."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from preemption.qos import (
    MODEL_KINDS,
    QosModel,
    QosSample,
    compare_models,
    infer_preempted_resource,
    load_samples,
    sample_line,
)
from preemption.settings import MODEL_KINDS as SETTINGS_MODEL_KINDS
from yarn_adapt.cosim.colocation import NodeModel, lc_p95_ms, profile_samples
from yarn_adapt.errors import TraceError

MODEL = NodeModel()
LOADS = [1800.0, 2400.0, 3000.0, 4100.0]


@pytest.fixture(scope="module")
def samples() -> list[QosSample]:
    return profile_samples(MODEL, LOADS, count=200, seed=3)


@pytest.fixture(scope="module")
def gbrt(samples: list[QosSample]) -> QosModel:
    return QosModel("gbrt", seed=3).fit(samples)


def test_gbrt_predicts_the_queueing_latency_better_than_the_linear_baselines(
    samples: list[QosSample],
) -> None:
    scores = compare_models(samples, seed=3)
    assert set(scores) == {"gbrt", "linear", "elasticnet"}
    # As in the paper's Table 3: the trees have the smallest error and the best R².
    assert scores["gbrt"].rmse < scores["linear"].rmse
    assert scores["gbrt"].rmse < scores["elasticnet"].rmse
    assert scores["gbrt"].mae < 0.8 * min(scores["linear"].mae, scores["elasticnet"].mae)
    assert scores["gbrt"].r2 > max(scores["linear"].r2, scores["elasticnet"].r2)


def test_the_upper_bound_is_above_the_mean(gbrt: QosModel, samples: list[QosSample]) -> None:
    predictions = [gbrt.predict(s) for s in samples[:50]]
    assert all(p.upper_ms >= p.latency_ms for p in predictions)


def state(load_cores: float, batch_cores: float) -> QosSample:
    capacity = MODEL.cores - batch_cores
    latency = lc_p95_ms(load_cores, capacity, batch_cores / MODEL.cores, MODEL)
    return QosSample(load_cores, capacity * 1000, batch_cores * 1000, 12 * 2048, latency)


def test_infer_asks_nothing_when_the_target_is_met_and_more_as_the_load_rises(
    gbrt: QosModel,
) -> None:
    quiet = infer_preempted_resource(gbrt, state(3.0, 8.0), 20.0, step_millicores=250)
    assert quiet.reclaim.cpu_millicores == 0 and quiet.met
    busy = infer_preempted_resource(gbrt, state(6.0, 9.0), 20.0, step_millicores=250)
    busier = infer_preempted_resource(gbrt, state(6.8, 9.0), 20.0, step_millicores=250)
    assert 0 < busy.reclaim.cpu_millicores <= busier.reclaim.cpu_millicores
    assert busy.met and busy.upper_ms <= 0.95 * 20.0
    # The answer really meets the target in the model it was learnt from.
    freed = busy.reclaim.cpu_millicores / 1000
    assert lc_p95_ms(6.0, MODEL.cores - 9.0 + freed, (9.0 - freed) / MODEL.cores, MODEL) <= 20.0


def test_infer_gives_back_when_the_load_falls(gbrt: QosModel) -> None:
    calm = infer_preempted_resource(
        gbrt, state(2.5, 6.0), 20.0, step_millicores=250, min_reclaim_millicores=-2000
    )
    assert calm.reclaim.cpu_millicores < 0


def test_an_unmeetable_target_says_so(gbrt: QosModel) -> None:
    # No reclaim brings the P95 below the service time itself.
    hopeless = infer_preempted_resource(
        gbrt, state(6.0, 9.0), MODEL.lc_service_ms, step_millicores=500
    )
    assert not hopeless.met
    assert hopeless.reclaim.cpu_millicores == 9000  # everything batch uses


def test_the_sample_log_round_trips_and_a_broken_line_names_file_and_line(
    tmp_path: Path, samples: list[QosSample]
) -> None:
    log = tmp_path / "samples.jsonl"
    log.write_text("\n".join(sample_line(s) for s in samples[:3]) + "\n")
    assert load_samples(log) == samples[:3]
    log.write_text(sample_line(samples[0]) + '\n{"load": 1}\n')
    with pytest.raises(TraceError, match=r"samples.jsonl:2: not a QoS sample"):
        load_samples(log)


def test_models_need_enough_samples_and_known_kinds(samples: list[QosSample]) -> None:
    with pytest.raises(ValueError, match="at least 10 samples"):
        QosModel("gbrt").fit(samples[:5])
    with pytest.raises(ValueError, match="unknown QoS model"):
        QosModel("knn")
    assert SETTINGS_MODEL_KINDS == MODEL_KINDS
    assert replace(samples[0], latency_ms=1.0).latency_ms == 1.0
