"""Placers: where a job's RUs go.

Every placer reads the cluster through
:class:`~yarn_adapt.placement.view.PlacementView` and returns a :class:`Placement`
(it never changes the state: committing is the caller's, see
:mod:`yarn_adapt.placement.agents`). The same classes serve the RU cluster model of
``yarn-adapt bench placement`` and the YARN simulator's placement hook.

* :class:`TarcilPlacer` -- quality-aware sampling with a statistical guarantee
  (Tarcil §3-4): admission control sets the sample size ``R``; ``R * m`` free RUs
  are sampled (batch sampling) and the ``m`` best kept, after locality; when even
  those would slow the job down, admission control weighs waiting against placing
  now (see the class). Without admission control (the YARN simulator has no
  per-bucket counters) ``R`` comes from the acceptable share of a first batch of
  samples (sequential estimate). O(R m) per decision, whatever the cluster size.
* :class:`GreedyPlacer` -- the centralised optimum of the same quality: every
  server with a free RU is scored (O(servers)).
* :class:`SamplingPlacer` -- Sparrow-like: 2 samples per RU, the least loaded kept;
  blind to interference.
* :class:`LeastLoadedPlacer` -- every server scanned, the emptiest first.
* :class:`FirstFitPlacer` -- YARN's Capacity Scheduler on heartbeats: servers in
  heartbeat order (a rotating pointer), the first with room takes what it can.

**Locality** (§3.3): ``preferred_servers`` (data locality: their free RUs are
candidates, ranked first), ``preferred_racks`` (sampled inside those racks, ranked
second), then the rest; quality breaks ties within a level. A level is worth
``LEVEL_WEIGHT`` of score, as much as 5% of predicted slowdown: a preferred RU is
passed over only for one that predicts at least 5% less slowdown.
``Locality.SAME_SERVER`` puts all ``m`` RUs on one server, judged by the aggregate
quality of its free RUs (neighbour aggregation); ``Locality.SPREAD`` takes at most
one RU per server.

**Scores.** Tarcil and the greedy optimum rank candidates with the same
:class:`Scorer`: the slowdown the placement predicts for the job and for the
server's occupants first, Tarcil's ``Q`` among equals (``Q`` alone with
``protect=False``).

Modules: ``jobs`` (the job, the outcome, the protocol and the shared opening),
``scoring`` (the scorer), ``tarcil`` (Tarcil's placer), ``baselines`` (the others);
here :func:`make_placer` builds one by name.
"""

from __future__ import annotations

from yarn_adapt.errors import InputError
from yarn_adapt.placement.admission import AdmissionControl
from yarn_adapt.placement.baselines import (
    POLICY_NAMES,
    FirstFitPlacer,
    GreedyPlacer,
    LeastLoadedPlacer,
    SamplingPlacer,
)
from yarn_adapt.placement.jobs import Placer
from yarn_adapt.placement.profiles import ProfileSource
from yarn_adapt.placement.tarcil import TarcilPlacer, TarcilSettings


def make_placer(
    name: str,
    profiles: ProfileSource,
    tarcil: TarcilSettings | None = None,
    admission: AdmissionControl | None = None,
) -> Placer:
    """The placer called ``name`` (one of :data:`POLICY_NAMES`)."""
    if name == "tarcil":
        return TarcilPlacer(profiles, tarcil, admission)
    if name == "greedy":
        return GreedyPlacer(profiles, tarcil.protect if tarcil else True)
    if name == "random":
        return SamplingPlacer(2)
    if name == "least-loaded":
        return LeastLoadedPlacer()
    if name == "yarn":
        return FirstFitPlacer()
    raise InputError(f"unknown placement policy {name!r} (known: {', '.join(POLICY_NAMES)})")
