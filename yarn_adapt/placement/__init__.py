"""Tarcil placement (Tarcil, SoCC 2015): quality-aware sampling with a statistical
guarantee, admission control and distributed scheduling agents. Pure decision code
(numpy); the RU cluster model and the YARN simulator's hook run it.

Modules: :mod:`~.profiles` (interference profiles, learning, defaults),
:mod:`~.quality` (T_W, U_H, Q), :mod:`~.sampling` (sample size, batch choice),
:mod:`~.state` (RUs, free list, contention), :mod:`~.admission` (LSH buckets, wait
estimate), the placers: :mod:`~.jobs` (a job, its outcome, the protocol),
:mod:`~.scoring` (the scorer), :mod:`~.tarcil`, :mod:`~.baselines`, :mod:`~.policies`
(one by name); :mod:`~.agents` (optimistic concurrency),
:mod:`~.cluster_model` and :mod:`~.workloads` (the bench's world),
:mod:`~.experiment` (one bench run), :mod:`~.sim_hook` (``yarn-adapt sim``).
"""

from yarn_adapt.placement.baselines import POLICY_NAMES
from yarn_adapt.placement.jobs import Locality, Outcome, Placement, PlacementJob, Placer
from yarn_adapt.placement.policies import make_placer
from yarn_adapt.placement.profiles import (
    RESOURCES,
    InterferenceProfile,
    ProbeMeasurement,
    ProfileBook,
    learn_profiles,
)
from yarn_adapt.placement.sampling import SampleSize, paper_examples, sample_size
from yarn_adapt.placement.tarcil import TarcilSettings

__all__ = [
    "POLICY_NAMES",
    "RESOURCES",
    "InterferenceProfile",
    "Locality",
    "Outcome",
    "Placement",
    "PlacementJob",
    "Placer",
    "ProbeMeasurement",
    "ProfileBook",
    "SampleSize",
    "TarcilSettings",
    "learn_profiles",
    "make_placer",
    "paper_examples",
    "sample_size",
]
