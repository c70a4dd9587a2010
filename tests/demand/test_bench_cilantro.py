"""``yarn-adapt bench cilantro`` end to end (tiny), on an unseen trace and a
curves file: the JSON keys the issue names."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from yarn_adapt.bench import BenchOptions, run_and_print
from yarn_adapt.demand.curves import curves_csv
from yarn_adapt.demand.environment import synthetic_job_types

POLICIES = {
    "resource-fair", "oracle-njc", "oracle-sw", "oracle-ew", "cilantro-njc", "cilantro-sw",
    "cilantro-ew", "evoalg-sw", "evoalg-ew", "greedy-ew", "epsilon-greedy", "miad", "parties",
    "quasar",
}  # fmt: skip


def test_the_bench_reports_every_policy_ratio_and_the_strategy_check(tmp_path: Path) -> None:
    trace = tmp_path / "arrivals.txt"
    minutes = np.arange(400)
    trace.write_text("\n".join(f"{100 + 30 * np.sin(m / 40):.2f}" for m in minutes), "utf-8")
    curves = tmp_path / "curves.csv"
    curves.write_text(curves_csv(synthetic_job_types()), "utf-8")
    extra = {"rounds": "6", "solver_problems": "1", "evo_iterations": "20", "curves": str(curves)}
    out = io.StringIO()
    run_and_print("cilantro", BenchOptions(quick=True, trace=trace, seed=2, extra=extra), out)
    figures = json.loads(out.getvalue().strip().splitlines()[-1])
    assert figures["bench"] == "cilantro"
    assert set(figures["policies"]) == POLICIES
    for values in figures["policies"].values():
        assert {"sw", "ew", "njc", "usage", "alloc_ms", "alloc_cpu_ms"} <= set(values)
        assert 0.0 <= values["ew"] <= values["sw"] <= 1.0
    for key in ("njc_vs_oracle", "sw_vs_oracle", "ew_vs_oracle"):
        assert figures[key] > 0
    assert figures["curves"] == str(curves) and figures["trace"] == str(trace)
    assert set(figures["solver_cpu_ms"]) == set(figures["solver_ms"]) == {"sw", "ew"}
    assert figures["solver_vs_evolutionary"]["sw"] >= 1.0
    assert figures["solver_vs_evolutionary"]["ew"] >= 1.0
    proofness = figures["strategy_proofness"]
    assert proofness["job"] == "db16"
    for name in ("cilantro-njc", "cilantro-sw", "cilantro-ew"):
        assert {"truthful", "over_x2", "under_x0.5", "lying_pays"} <= set(proofness[name])
