"""``bench adaptive-latency``'s ``--set`` keys, for its SWIM part
(:mod:`yarn_adapt.bench.adaptive`) and its Google part
(:mod:`yarn_adapt.bench.google_cluster`) alike."""

from __future__ import annotations

from yarn_adapt.set_keys import SetSpec, custom, flag, numeric, parse_flag, whole, word

LOAD = 1.0  # the SWIM scenarios' load: jobs arrive as fast as the cluster runs them


def forecast_setting(text: str) -> int:
    """``--set forecast=``: a flag word (``no``: 0, ``yes``: one interval ahead) or
    how many intervals ahead, 1-20; ValueError otherwise."""
    if text.isdigit() and 1 <= int(text) <= 20:
        return int(text)
    return int(parse_flag(text))


class Knobs:
    """adaptive-latency's ``--set`` keys: the SWIM part's, then the Google part's
    (:class:`~yarn_adapt.bench.google_cluster.GoogleSettings` holds their defaults)."""

    part = word("part", ("swim", "google", "both"), None)
    load = numeric("load", LOAD)
    elastic = flag("elastic", False)
    scheduler = word("scheduler", ("capacity", "fair"), None)
    forecast = custom("forecast", forecast_setting, "no, yes or 1-20", 0)
    hindsight = flag("hindsight", False)
    workers = whole("workers", None, low=1, high=64)
    google_groups = whole("google_groups", None, low=1, high=1000)
    google_load = numeric("google_load", None, low=0.01, high=100.0)
    google_nodes = whole("google_nodes", None, low=1, high=100_000)
    google_replicas = whole("google_replicas", None, low=1, high=1000)
    google_interval_min = numeric("google_interval_min", None, low=0.1, high=60.0)


SET_KEYS = SetSpec.of("adaptive-latency", Knobs)
