"""The co-location model's calibration from testbed windows: it recovers a known
interference from windows the model itself produced, the committed calibration is what
the script fits from the committed testbed data, the model loads it by default, and
bad input is a one-line error naming where."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from yarn_adapt.cosim import lra_calibration as calibration
from yarn_adapt.cosim.colocation import NodeModel, lc_p95_ms
from yarn_adapt.cosim.lra_model import CALIBRATION, ClusterModel, calibrated_node
from yarn_adapt.errors import InputError

REPLICAS = {
    ("pricing", 0): (6.0, 20.0),
    ("frontend", 0): (0.5, 10.0),
    ("inventory", 1): (1.0, 20.0),
}


def _windows(interference: float, noise: float, seed: int = 0) -> list[dict[str, Any]]:
    """Testbed windows whose P95s are the model's own at ``interference`` (x noise)."""
    rng = random.Random(seed)
    windows = []
    for index in range(30):
        shares = [0.0, 0.0] if index % 3 == 0 else [rng.uniform(0.2, 0.6), rng.uniform(0.0, 0.5)]
        node_load = [0.0, 0.0]
        for (_, node), (ms, rate) in REPLICAS.items():
            node_load[node] += rate * ms / 1000
        services = []
        for (name, node), (ms, rate) in REPLICAS.items():
            load = rate * ms / 1000
            capacity = (1 - shares[node]) * load / node_load[node]
            model = NodeModel(lc_service_ms=ms, interference=interference, max_latency_factor=1e9)
            p95 = lc_p95_ms(load, capacity, shares[node], model) * math.exp(rng.gauss(0, noise))
            services.append({
                "service": name, "node": node, "requests": int(rate * 8), "rate_rps": rate,
                "cpu_ms_mean": ms, "cpu_ms_median": ms, "self_p50_ms": p95 / 2,
                "self_p95_ms": p95,
            })  # fmt: skip
        name = "alone" if index % 3 == 0 else "off"
        windows.append({"name": name, "batch_cpu_share": shares, "services": services})
    return windows


@pytest.mark.parametrize("truth", [0.0, 0.4, 3.0])
def test_the_fit_recovers_the_interference_the_windows_were_made_with(truth: float) -> None:
    document = calibration.calibrate([("made", {"windows": _windows(truth, noise=0.0)})])
    assert document["interference"] == pytest.approx(truth, abs=1e-3)
    assert document["error"]["contended"]["worst_abs_rel"] < 1e-3
    pricing = next(s for s in document["services"] if s["replica"] == "pricing@0")
    assert pricing["service_ms"] == pytest.approx(6.0)
    assert pricing["service_ms_from_p95"] == pytest.approx(6.0, rel=1e-3)


def test_with_noise_the_fit_is_close_and_its_error_is_reported() -> None:
    document = calibration.calibrate([("made", {"windows": _windows(1.0, noise=0.1, seed=3)})])
    assert document["interference"] == pytest.approx(1.0, abs=0.15)
    error = document["error"]["contended"]
    assert 0.02 < error["log_rmse"] < 0.2
    assert error["log_rmse"] <= document["error"]["contended_former_interference"]["log_rmse"]


def test_the_committed_calibration_is_what_the_script_fits_from_the_committed_data(
    capsys: pytest.CaptureFixture[str],
) -> None:
    committed = json.loads(CALIBRATION.read_text())
    sources = [CALIBRATION.parents[2] / source for source in committed["sources"]]
    assert sources and all(path.is_file() for path in sources)
    assert calibration.main(["fit", *map(str, sources)]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["interference"] == committed["interference"]
    assert fitted["error"] == committed["error"]
    assert fitted["windows"]["contended"] >= 5


def test_the_model_uses_the_committed_calibration_by_default() -> None:
    committed = json.loads(CALIBRATION.read_text())
    assert ClusterModel().node.interference == committed["interference"]
    assert calibrated_node().interference == committed["interference"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"bad\.json: not a co-location calibration"),
        ('{"interference": -1}', r"bad\.json: interference -1\.0 is not a number >= 0"),
        ("{}", r"bad\.json: not a co-location calibration"),
    ],
)
def test_a_broken_calibration_file_is_a_one_line_error(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        calibrated_node(path)
    with pytest.raises(InputError, match=r"missing\.json: cannot read"):
        calibrated_node(tmp_path / "missing.json")


def test_a_result_without_windows_or_with_a_broken_window_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InputError, match=r"old\.json: no 'windows'"):
        calibration.calibrate([("old.json", {"p95_on_ms": 40.0})])
    windows = _windows(0.5, noise=0.0)
    del windows[4]["services"][1]["rate_rps"]
    with pytest.raises(InputError, match=r"r\.json: windows\[4\]: not a testbed window"):
        calibration.calibrate([("r.json", {"windows": windows})])
    broken = tmp_path / "cut.json"
    broken.write_text('{"windows": [')
    assert calibration.main(["fit", str(broken)]) == 2
    assert "cut.json: not JSON" in capsys.readouterr().err


def test_no_alone_window_for_a_replica_is_named() -> None:
    windows = [w for w in _windows(0.5, noise=0.0) if w["name"] != "alone"]
    with pytest.raises(InputError, match=r"no alone window with requests for \['frontend@0'"):
        calibration.calibrate([("r.json", {"windows": windows})])
