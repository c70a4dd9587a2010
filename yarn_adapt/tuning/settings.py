"""The tuner's settings (:class:`TunerSettings`), apart from the tuner so that the
state and the cluster split can name them without importing it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rules.comparator import POINT_ESTIMATE, Uncertainty
from yarn_adapt.errors import SettingsError
from yarn_adapt.tuning.group_optimizer import (
    LEVEL_FLAT,
    RESCORED,
    LevelSearch,
)
from yarn_adapt.tuning.search import RRSSettings, Strategy
from yarn_adapt.tuning.space import ConfigSpace, SpaceSettings


@dataclass(frozen=True, kw_only=True)
class TunerSettings:
    """``interval_s``: the tuning interval (§4.4: 2 minutes works as well as 1);
    ``space``: how each group's space is quantized; ``spaces``: explicit spaces per
    group parent (overrides ``space``); ``rrs``: RRS parameters for spaces larger than
    RRS would sample; ``min_improvement``: the predicted gain a group needs before
    its configuration changes; ``uncertainty``: compare on the expected latency
    over the task-time model's error; ``levels``: resource levels per group for the
    cluster-level DP; ``am_containers``: jobs have ApplicationMasters (MapReduce);
    ``fair_assign_multiple``: yarn-site's ``yarn.scheduler.fair.assignmultiple``;
    ``forecast``: also count on the next interval bringing what the last one did
    (the recent submissions again, one interval later) -- a configuration that
    starves a queue that is idle this instant but busy every interval is then not
    chosen; ``forecast_intervals``: how many intervals ahead (the recent
    submissions again at 1, 2, ... intervals on). The service does not forecast
    (what it predicts must be checkable on the jobs that realise); ``bench
    adaptive-latency --set forecast=yes`` measures it. The cluster-level curves:
    ``level_search`` ``reference`` searches each group once, at its current
    resources, and re-scores its ``rescored`` best candidates (1: the best alone) at
    the other levels, from the lowest up, dropping those more than ``rescore_margin``
    worse than a level's best (``None``: none) -- or, with ``level_flat`` (the
    default), the lowest and highest levels first, then the middle of every span
    whose ends differ by more than that fraction (flat spans' inner levels are left
    off the curve); ``full`` searches every level
    (:mod:`yarn_adapt.tuning.group_optimizer`). ``canonical``: candidates the engine
    cannot tell apart in whole containers are scored once
    (:func:`yarn_adapt.tuning.bridge.canonical_key`). RRS stops after an iteration
    that found nothing better (``rrs.patience``). ``strategy``: how a group's space
    is searched (:func:`yarn_adapt.tuning.search.search`); ``refine`` (coarse lattice,
    then a pattern search) only changes spaces with ordered dimensions finer than its
    coarse lattice -- the others are searched as ``auto`` would. ``app_headroom``:
    a Capacity leaf must admit this many times the group's jobs there (at least two
    more) under ``maximum-applications`` (:class:`AppLimits`); 1.0 is YARN's own
    rule, no fewer than the jobs in view.

    The hindsight static (:mod:`yarn_adapt.tuning.hindsight`): with ``hindsight``,
    the jobs submitted in the last ``hindsight_window_s`` (``TuningState.history``)
    are replayed in the simulator under up to ``hindsight_points`` static
    configurations of the group's space; the best is a candidate the tuner leaves
    only for one predicted at least ``hindsight_gain`` (or ``min_improvement``, the
    larger) better on the jobs in progress and the horizon. The horizon: with
    ``forecast``, candidates are scored over ``forecast_intervals`` forecast
    intervals (:attr:`horizon_intervals`), re-planned every interval; the stated
    predictions (``GroupDecision.before_s`` / ``after_s``) stay those of the jobs in
    progress, the forecast jobs' part stated apart."""

    interval_s: float = 120.0
    space: SpaceSettings = field(default_factory=SpaceSettings)
    spaces: Mapping[str, ConfigSpace] = field(default_factory=dict)
    rrs: RRSSettings = field(default_factory=lambda: RRSSettings(patience=1))
    min_improvement: float = 0.02
    uncertainty: Uncertainty = POINT_ESTIMATE
    levels: int = 16
    level_search: LevelSearch = LevelSearch.REFERENCE
    rescored: int = RESCORED
    rescore_margin: float | None = 0.05
    level_flat: float | None = LEVEL_FLAT
    canonical: bool = True
    strategy: Strategy = "refine"
    am_containers: bool = True
    fair_assign_multiple: bool | None = None
    forecast: bool = False
    forecast_intervals: int = 1
    app_headroom: float = 2.0
    hindsight: bool = False
    hindsight_window_s: float = 3600.0
    hindsight_points: int = 81
    hindsight_gain: float = 0.05
    seed: int = 0

    @property
    def horizon_intervals(self) -> int:
        """Forecast intervals the candidates are scored over (0: the jobs in progress
        alone)."""
        return self.forecast_intervals if self.forecast else 0

    def __post_init__(self) -> None:
        if not self.app_headroom >= 1.0:
            raise SettingsError(f"app_headroom {self.app_headroom}: want at least 1.0")
        if self.forecast_intervals < 1:
            raise SettingsError(f"forecast_intervals {self.forecast_intervals}: want at least 1")
        if self.hindsight_points < 1:
            raise SettingsError(f"hindsight_points {self.hindsight_points}: want at least 1")
        if not self.hindsight_window_s > 0:
            raise SettingsError(f"hindsight_window_s {self.hindsight_window_s}: want above 0")
