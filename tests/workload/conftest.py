"""Paths to the real trace samples, and the full shared traces loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yarn_adapt.model.workload import Workload
from yarn_adapt.workload import load_google, load_swim

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "workload"
RUMEN_SAMPLE = FIXTURES / "2jobs2min-rumen-jh.json"
SLS_SAMPLE = FIXTURES / "inputsls.json"
SLS_DAG_SAMPLE = FIXTURES / "sls_dag.json"
GOOGLE_SAMPLE = FIXTURES / "google-2011-sample"
FB_FIRST50 = FIXTURES / "FB-2009_samples_24_times_1hr_0_first50jobs.tsv"
FB_2009 = "FB-2009_samples_24_times_1hr_0.tsv"
GOOGLE_PART = "google-2011"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The shared real traces; skipped with the reason when absent, failed on CI."""
    root = Path(os.environ.get("YARN_ADAPT_TRACES", "/work/shared/data/traces"))
    if not (root / FB_2009).is_file() or not (root / GOOGLE_PART).is_dir():
        message = f"shared traces not found in {root} (set YARN_ADAPT_TRACES)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return root


@pytest.fixture(scope="session")
def fb2009(shared_traces: Path) -> Workload:
    return load_swim(shared_traces / FB_2009)


@pytest.fixture(scope="session")
def google_part(shared_traces: Path) -> Workload:
    return load_google(shared_traces / GOOGLE_PART)
