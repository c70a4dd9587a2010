"""QoS prediction engine (TopoSch §5.2) and ``InferPreemptedResource()``.

A regression F predicts a latency-critical service's P95 latency from

* ``load``: its request rate,
* ``lc_cpu_millicores``: the CPU it is allotted (its own limit, or the node's CPUs
  when it has none),
* ``batch_cpu_millicores`` / ``batch_memory_mb``: what the co-located batch
  containers use on the node.

Three regressors are offered, as in the paper's Table 3: gradient-boosted trees
(``gbrt``, scikit-learn's ``GradientBoostingRegressor``), ordinary least squares
(``linear``) and ``elasticnet``, each fitted on log latency (tail latency spans
orders of magnitude near overload) and answering in milliseconds;
:func:`compare_models` scores them on held-out samples by RMSE, MAE and R² in
milliseconds. The GBRT's uncertainty is a second GBRT fitted with the quantile loss
at ``upper_quantile`` (0.9); the linear models use their residual spread
(mean + 1.28 σ, in log space).

``InferPreemptedResource()`` (:func:`infer_preempted_resource`) searches reclaim
amounts r = 0, ω, 2ω, … up to what batch uses, and returns the smallest r for which
the *upper* prediction with batch using r less meets ``(1 − ε) · target``, the
paper's F(R + r) → (1 − ε) Q_tgt (the reclaimed CPU goes to the service). If none
does, it returns the largest r with ``met = False``.

Samples come from the agent (each interval with a QoS reading from the service: load
and latency from the service, batch usage from its own cgroup readings; appended to a
JSON-lines file) or, in the benchmark, from the simulated node. Pure decision code:
training and prediction only, no file system (:func:`load_samples` is the edge).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from preemption.model import Amount
from yarn_adapt.errors import TraceError

FEATURES = ("load", "lc_cpu_millicores", "batch_cpu_millicores", "batch_memory_mb")
MODEL_KINDS = ("gbrt", "linear", "elasticnet")


@dataclass(frozen=True)
class QosSample:
    load: float
    lc_cpu_millicores: float
    batch_cpu_millicores: float
    batch_memory_mb: float
    latency_ms: float

    def features(self) -> list[float]:
        return [self.load, self.lc_cpu_millicores, self.batch_cpu_millicores, self.batch_memory_mb]


@dataclass(frozen=True)
class Prediction:
    latency_ms: float
    upper_ms: float


@dataclass(frozen=True)
class Scores:
    rmse: float
    mae: float
    r2: float


@dataclass(frozen=True)
class Inference:
    reclaim: Amount
    predicted_ms: float
    upper_ms: float
    met: bool


class QosModel:
    """A fitted regressor of P95 latency with an upper bound."""

    def __init__(self, kind: str = "gbrt", *, seed: int = 0, upper_quantile: float = 0.9) -> None:
        if kind not in MODEL_KINDS:
            raise ValueError(f"unknown QoS model {kind!r} (known: {', '.join(MODEL_KINDS)})")
        self.kind = kind
        self.seed = seed
        self.upper_quantile = upper_quantile
        self._mean: Any = None
        self._upper: Any = None
        self._spread = 0.0

    @property
    def fitted(self) -> bool:
        return self._mean is not None

    def fit(self, samples: Sequence[QosSample]) -> QosModel:
        """Fit on log latency (tail latency spans orders of magnitude near overload);
        predictions come back in milliseconds."""
        if len(samples) < 10:
            raise ValueError(f"need at least 10 samples to fit a QoS model, got {len(samples)}")
        x, y = _arrays(samples)
        log_y = np.log(np.maximum(y, 1e-3))
        self._mean = _regressor(self.kind, self.seed).fit(x, log_y)
        if self.kind == "gbrt":
            upper = _regressor("gbrt", self.seed, quantile=self.upper_quantile)
            self._upper = upper.fit(x, log_y)
        else:
            residuals = log_y - self._mean.predict(x)
            self._spread = float(np.std(residuals))
        return self

    def predict_many(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self.fitted:
            raise ValueError("the QoS model is not fitted")
        log_mean = np.asarray(self._mean.predict(rows), dtype=float)
        if self._upper is not None:
            log_upper = np.maximum(log_mean, np.asarray(self._upper.predict(rows), dtype=float))
        else:
            log_upper = log_mean + 1.2816 * self._spread
        return np.exp(log_mean), np.exp(log_upper)

    def predict(self, sample: QosSample) -> Prediction:
        mean, upper = self.predict_many(np.array([sample.features()]))
        return Prediction(float(mean[0]), float(upper[0]))


def _regressor(kind: str, seed: int, quantile: float | None = None) -> Any:
    # Imported here: the agent only pays for scikit-learn when a model is configured.
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import ElasticNet, LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "gbrt":
        loss = {"loss": "quantile", "alpha": quantile} if quantile is not None else {}
        return GradientBoostingRegressor(
            n_estimators=200, max_depth=3, learning_rate=0.1, subsample=0.8,
            random_state=seed, **loss,
        )  # fmt: skip
    if kind == "linear":
        return make_pipeline(StandardScaler(), LinearRegression())
    return make_pipeline(StandardScaler(), ElasticNet(alpha=0.1, l1_ratio=0.5, random_state=seed))


def _arrays(samples: Sequence[QosSample]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([s.features() for s in samples], dtype=float)
    y = np.array([s.latency_ms for s in samples], dtype=float)
    return x, y


def compare_models(
    samples: Sequence[QosSample], *, seed: int = 0, test_fraction: float = 0.25
) -> dict[str, Scores]:
    """Table 3: each model fitted on a random split, scored on the held-out part."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(samples))
    cut = int(len(samples) * (1 - test_fraction))
    train = [samples[i] for i in order[:cut]]
    test = [samples[i] for i in order[cut:]]
    x_test, y_test = _arrays(test)
    scores = {}
    for kind in MODEL_KINDS:
        predicted, _ = QosModel(kind, seed=seed).fit(train).predict_many(x_test)
        scores[kind] = _scores(y_test, predicted)
    return scores


def _scores(actual: np.ndarray, predicted: np.ndarray) -> Scores:
    errors = predicted - actual
    total = float(np.sum((actual - actual.mean()) ** 2))
    r2 = 1.0 - float(np.sum(errors**2)) / total if total > 0 else 0.0
    return Scores(
        rmse=float(math.sqrt(np.mean(errors**2))), mae=float(np.mean(np.abs(errors))), r2=r2
    )


def infer_preempted_resource(
    model: QosModel,
    now: QosSample,
    target_ms: float,
    *,
    step_millicores: int,
    epsilon: float = 0.05,
    max_reclaim_millicores: int | None = None,
    min_reclaim_millicores: int = 0,
) -> Inference:
    """The smallest CPU reclaim the model predicts (upper bound) meets the target.

    ``min_reclaim_millicores`` below zero also considers giving CPU back to batch
    (the load fell): the answer is then the largest give-back that still meets the
    target, as a negative reclaim."""
    if step_millicores <= 0:
        raise ValueError("step_millicores must be positive")
    ceiling = int(
        now.batch_cpu_millicores if max_reclaim_millicores is None else max_reclaim_millicores
    )
    start = min(min_reclaim_millicores, 0)
    amounts = np.arange(start, max(ceiling, 0) + 1, step_millicores)
    rows = np.array(
        [[now.load, now.lc_cpu_millicores + r, now.batch_cpu_millicores - r, now.batch_memory_mb]
         for r in amounts],
        dtype=float,
    )  # fmt: skip
    mean, upper = model.predict_many(rows)
    goal = (1.0 - epsilon) * target_ms
    meeting = np.nonzero(upper <= goal)[0]
    index = int(meeting[0]) if len(meeting) else len(amounts) - 1
    return Inference(
        reclaim=Amount(int(amounts[index]), 0),
        predicted_ms=float(mean[index]),
        upper_ms=float(upper[index]),
        met=bool(len(meeting)),
    )


# ----------------------------------------------------------------- the sample log (edge)


def load_samples(path: Path) -> list[QosSample]:
    """The agent's JSON-lines sample log; a broken line names ``file:line``."""
    samples = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            samples.append(QosSample(**{key: float(raw[key]) for key in (*FEATURES, "latency_ms")}))
        except (ValueError, KeyError, TypeError) as exc:
            raise TraceError(str(path), number, f"not a QoS sample: {exc}") from exc
    return samples


def sample_line(sample: QosSample) -> str:
    return json.dumps(asdict(sample), sort_keys=True)
