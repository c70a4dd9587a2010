"""``yarn-adapt trace ...`` against a real redis-server: import every sample format,
show a critical path and the risk, one-line errors with exit codes, and the bench."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.tracing.conftest import SAMPLES
from tests.tracing.test_store_ingest import ROOT, make_traces
from tracing.importers import publish
from tracing.redisconn import Keys, RedisConfig, make_client
from tracing.store import TraceStore
from yarn_adapt import bench
from yarn_adapt.cli import main
from yarn_adapt.cli.conventions import json_key_problems
from yarn_adapt.minicluster.redis_server import RedisServer, free_port


@pytest.fixture
def settings_file(tmp_path: Path, store_config: RedisConfig) -> Path:
    path = tmp_path / "yarn-adapt.toml"
    path.write_text(
        f'[tracing]\nredis_url = "{store_config.url}"\nprefix = "{store_config.prefix}"\n'
    )
    return path


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_import_then_critical_path_and_risk(
    settings_file: Path, capsys: pytest.CaptureFixture[str], client: object
) -> None:
    for sample in (
        "otlp.json",
        "jaeger.json",
        "zipkin.json",
        "alibaba-2021.csv",
        "alibaba-2022.csv",
    ):
        code, out, err = run(
            ["trace", "--config", str(settings_file), "import", str(SAMPLES / sample), "--json"],
            capsys,
        )
        assert code == 0, err
        summary = json.loads(out)
        assert summary["spans"] > 0 and summary["traces_stored"] == summary["traces"]
    code, out, _ = run(
        [
            "trace",
            "--config",
            str(settings_file),
            "critical-path",
            "5b8efff798038103d269b633813fc60c",
        ],
        capsys,
    )
    assert code == 0
    assert "end-to-end 100.000 ms" in out and "payment" in out and "46.000 ms" in out
    code, out, _ = run(
        ["trace", "--config", str(settings_file), "critical-path", "T_10000566292", "--json"],
        capsys,
    )
    assert code == 0 and json.loads(out)["service_time_us"] == {"MS_32255": 3000, "MS_45753": 4000}
    code, out, _ = run(
        ["trace", "--config", str(settings_file), "risk", "--window", "36000000000", "--json"],
        capsys,
    )
    assert code == 0
    risk = json.loads(out)
    assert risk["traces"] == 7
    services = {s["service"]: s for s in risk["services"]}
    assert services["payment"]["errors"] == 1 and services["payment"]["apis"]
    assert {n["node"] for n in risk["nodes"]} >= {"node-1", "node-2", "node-3"}
    code, out, _ = run(
        ["trace", "--config", str(settings_file), "risk", "--window", "36000000000"], capsys
    )
    assert code == 0 and "WST ms" in out and "geomean" in out
    code, out, _ = run(
        ["trace", "--config", str(settings_file), "topology", "--window", "36000000000", "--json"],
        capsys,
    )
    calls = {(c["caller"], c["callee"]) for c in json.loads(out)["calls"]}
    assert ("frontend", "payment") in calls


def test_lenient_import_stores_the_good_records(
    settings_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], client: object
) -> None:
    broken = tmp_path / "broken.csv"
    broken.write_text((SAMPLES / "alibaba-2021.csv").read_text() + "9,tx,1,0.1,a,rpc,b,i,soon\n")
    code, _, err = run(["trace", "--config", str(settings_file), "import", str(broken)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"yarn-adapt: {broken}: line 8: rt 'soon'")
    code, out, _ = run(
        ["trace", "--config", str(settings_file), "import", str(broken), "--lenient", "--json"],
        capsys,
    )
    assert code == 0
    summary = json.loads(out)
    assert summary["skipped"] == {"malformed": 1} and summary["traces_stored"] == 2


def test_errors_are_one_line_with_exit_codes(
    settings_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], client: object
) -> None:
    code, _, err = run(["trace", "--config", str(settings_file), "critical-path", "abc"], capsys)
    assert code == 2 and "no stored trace has id" in err and err.count("\n") == 1
    dead = f"redis://127.0.0.1:{free_port()}/0"
    code, _, err = run(["trace", "--redis-url", dead, "risk"], capsys)
    assert code == 3 and err.startswith(f"yarn-adapt: redis {dead}") and err.count("\n") == 1
    bad = tmp_path / "bad.toml"
    bad.write_text("[tracing]\nalpha = 2.0\n")
    code, _, err = run(["trace", "--config", str(bad), "risk"], capsys)
    assert code == 2 and "[tracing] alpha" in err


def test_the_bench_runs_a_small_window(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "trace-risk" in {b.name for b in bench.available()}
    code, out, err = run(
        [
            "bench",
            "trace-risk",
            "--quick",
            "--set",
            "traces=150",  # the quick form on fewer traces than its 3,000
            "--set",
            "repeats=1",
            "--set",
            f"redis_url={redis_server.url}",
        ],
        capsys,
    )
    assert code == 0, err
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["traces"] == 150 and figures["spans"] == figures["spans_exported"]
    assert figures["exporter_dropped"] == 0
    for key in ("ingest_spans_per_s", "analyse_s", "redis_mb", "load_s"):
        assert key in figures
    # the same traces through the OTLP/HTTP receiver, the stream and the worker
    assert figures["otlp_spans_sent"] == figures["spans_exported"]
    assert figures["otlp_spans_stored"] == figures["otlp_spans_sent"]
    assert figures["otlp_spans_rejected"] == 0
    assert figures["otlp_requests"] >= figures["spans"] / figures["otlp_batch_spans"]
    assert figures["otlp_spans_per_s"] > 0 and figures["otlp_receive_spans_per_s"] > 0
    assert figures["otlp_cpu_s"] > 0 and figures["otlp_spans_per_cpu_s"] > 0
    latencies = [figures[f"otlp_request_{q}_s"] for q in ("p50", "p99", "worst")]
    assert 0 < figures["otlp_request_mean_s"] <= latencies[-1] and latencies == sorted(latencies)
    assert figures["otlp_retries"] == 0
    runs = figures["otlp_runs_spans_per_s"]  # the median run's figures, every run's rate
    assert len(runs) == figures["otlp_repeats"] == 3 and runs == sorted(runs)
    assert figures["otlp_worst_spans_per_s"] == runs[0] and figures["otlp_spans_per_s"] == runs[1]
    otlp = {k: v for k, v in figures.items() if k.startswith("otlp_")}
    assert json_key_problems(otlp) == [] and "otlp_spans_per_s" in figures["gap_to_target"]


def test_the_bench_takes_traces_for_scaling_rows(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["bench", "trace-risk", "--set", "repeats=1", "--set", f"redis_url={redis_server.url}"]
    code, out, err = run([*common, "--traces", "40", "--traces", "60,80"], capsys)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split()[0] == "traces"
    assert [line.split()[0] for line in lines[1:-1]] == ["40", "60", "80"]
    assert json.loads(lines[-1])["traces"] == 80  # the JSON describes the last row
    code, _, err = run([*common, "--traces", "40", "--set", "traces=60"], capsys)
    assert code == 2 and "--traces or --set traces=" in err
    code, _, err = run([*common, "--traces", "0"], capsys)
    assert code == 2 and "--set traces=0: expected a comma list of whole numbers >= 1" in err


def test_the_standalone_worker_stores_traces_and_stops_on_sigterm(
    redis_server: RedisServer, store_config: RedisConfig, client: object
) -> None:

    connection = make_client(store_config)
    worker = subprocess.Popen(
        [sys.executable, "-m", "tracing", "ingest", "--redis-url", redis_server.url,
         "--prefix", store_config.prefix, "--quiet-s", "0.1"],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        publish(
            [s for t in make_traces(50) for s in t], connection, Keys(store_config.prefix).stream
        )
        store = TraceStore(connection, store_config)
        deadline = time.monotonic() + 60
        while store.load().columns.n_traces < 50 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.load().columns.n_spans == 150
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    connection.close()


def test_the_tracing_package_never_imports_yarn_adapt() -> None:

    modules = [p.stem for p in (ROOT / "tracing").glob("*.py") if p.stem != "__main__"]
    code = (
        "import sys\n"
        + "".join(f"import tracing.{m}\n" for m in modules if m != "__init__")
        + "import tracing.importers\n"
        + "assert not [m for m in sys.modules if m.startswith('yarn_adapt')], sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
