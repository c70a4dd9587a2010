"""The Fair Scheduler semantics the simulator's core calls:
:mod:`yarn_adapt.semantics.fair`, re-exported under a name the core imports
relatively, so that its compiled copy (:mod:`yarn_adapt.sim.native_build`) calls a
compiled copy of the same source."""

from yarn_adapt.semantics.fair import can_app_be_runnable as can_app_be_runnable
from yarn_adapt.semantics.fair import drf_app_key as drf_app_key
from yarn_adapt.semantics.fair import drf_key as drf_key
from yarn_adapt.semantics.fair import fair_share_key as fair_share_key
from yarn_adapt.semantics.fair import fair_shares as fair_shares
from yarn_adapt.semantics.fair import fits_max_share as fits_max_share
from yarn_adapt.semantics.fair import heartbeat_assignments as heartbeat_assignments
from yarn_adapt.semantics.fair import keep_assigning as keep_assigning
from yarn_adapt.semantics.fair import max_am_share_allows as max_am_share_allows
