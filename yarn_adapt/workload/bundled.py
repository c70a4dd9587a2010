"""The real traces shipped inside the package (see yarn_adapt/data/traces/README.md)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FB_2009 = "FB-2009_samples_24_times_1hr_0.tsv"
GOOGLE_2011 = "google-2011"
TWITTER = "twitter_1476.txt"


def bundled_traces_dir() -> Path:
    """The directory holding the bundled traces (a real path: the package is not zipped)."""
    return Path(str(resources.files("yarn_adapt") / "data" / "traces"))


def bundled_trace(name: str = FB_2009) -> Path:
    return bundled_traces_dir() / name
