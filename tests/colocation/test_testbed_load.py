"""The testbed's changing load and its batch mix (issue 25 item 3): the load
generator's steps average the rate over a cycle, and the burner's memory hog and CPU
burner each do their work and end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from yarn_adapt.errors import SettingsError
from yarn_adapt.testbed import burner, loadgen
from yarn_adapt.testbed import options as tb_options


def test_the_steps_are_low_high_low_and_a_burst_averaging_the_rate() -> None:
    cycle = 10.0
    seen = [loadgen.rate_multiple("steps", cycle, t / 10) for t in range(200)]
    assert seen[0] == 0.5 and seen[40] == 1.5 and seen[70] == 0.5 and seen[95] == 2.5
    assert seen[100:] == seen[:100]  # it repeats every cycle
    assert sum(seen[:100]) / 100 == pytest.approx(1.0)
    assert {loadgen.rate_multiple("steady", cycle, t) for t in range(20)} == {1.0}


def test_the_generator_follows_the_steps(tmp_path: Path) -> None:
    """A fake target answers at once; over two cycles the burst's arrivals come about
    five times as fast as the low steps'."""
    out = tmp_path / "latency.jsonl"
    stop = threading.Event()
    cycle = 2.0
    began = time.time()
    loadgen.run(["http://127.0.0.1:9/"], 100.0, 2 * cycle, out, timeout_s=0.05, stop=stop,
                profile="steps", cycle_s=cycle)  # fmt: skip
    arrivals = [json.loads(line)[0] - began for line in out.read_text().splitlines()]
    low = sum(1 for t in arrivals if (t % cycle) / cycle < 0.35) / (0.35 * 2 * cycle)
    burst = sum(1 for t in arrivals if (t % cycle) / cycle >= 0.9) / (0.1 * 2 * cycle)
    assert 2.5 < burst / low < 10, (low, burst)


def test_mix_makes_odd_containers_memory_hogs() -> None:
    assert burner.kind_of("mix", "container_1_0001_01_000003") == "memory"
    assert burner.kind_of("mix", "container_1_0001_01_000004") == "cpu"
    assert burner.kind_of("mix", "") == "cpu"
    assert burner.kind_of("memory", "container_1_0001_01_000004") == "memory"


@pytest.mark.parametrize("container", ["container_1_0001_01_000003", "container_1_0001_01_000002"])
def test_the_burner_does_its_cpu_seconds_either_way_and_exits_0(container: str) -> None:
    env = {**os.environ, "CONTAINER_ID": container}
    done = subprocess.run([sys.executable, burner.__file__, "0.3", "mix"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    wrong = subprocess.run([sys.executable, burner.__file__, "0.1", "disk"],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert wrong.returncode == 2 and "expected cpu, memory or mix" in wrong.stderr


def test_a_wrong_profile_or_mix_is_one_line() -> None:
    found = tb_options.options_from(True, 0, {"load_profile": "steady", "batch_mix": "cpu"})
    assert (found.load_profile, found.batch_mix) == ("steady", "cpu")
    assert tb_options.options_from(True, 0, {}).load_profile == "steps"
    with pytest.raises(SettingsError, match="load_profile=saw: expected one of steady, steps"):
        tb_options.options_from(True, 0, {"load_profile": "saw"})
    with pytest.raises(SettingsError, match="batch_mix=gpu: expected one of cpu, mix"):
        tb_options.options_from(True, 0, {"batch_mix": "gpu"})
