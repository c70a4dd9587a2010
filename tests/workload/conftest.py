"""Paths to the real trace samples, and the full shared traces loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yarn_adapt.model.workload import Workload
from yarn_adapt.workload import load_google, load_swim
from yarn_adapt.workload.bundled import bundled_traces_dir

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
    """The real traces: the package's bundled copies, or YARN_ADAPT_TRACES if set."""
    override = os.environ.get("YARN_ADAPT_TRACES")
    root = Path(override) if override else bundled_traces_dir()
    assert (root / FB_2009).is_file(), f"FB-2009 trace missing in {root}"
    assert (root / GOOGLE_PART).is_dir(), f"Google 2011 trace missing in {root}"
    return root


@pytest.fixture(scope="session")
def fb2009(shared_traces: Path) -> Workload:
    return load_swim(shared_traces / FB_2009)


@pytest.fixture(scope="session")
def google_part(shared_traces: Path) -> Workload:
    return load_google(shared_traces / GOOGLE_PART)
