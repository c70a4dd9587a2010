"""The Capacity Scheduler semantics the simulator's core calls:
:mod:`yarn_adapt.semantics.capacity`, re-exported under a name the core imports
relatively, so that its compiled copy (:mod:`yarn_adapt.sim.native_build`) calls a
compiled copy of the same source."""

from yarn_adapt.semantics.capacity import am_limit as am_limit
from yarn_adapt.semantics.capacity import can_assign_to_user as can_assign_to_user
from yarn_adapt.semantics.capacity import child_limit as child_limit
from yarn_adapt.semantics.capacity import effective_capacity as effective_capacity
from yarn_adapt.semantics.capacity import heartbeat_assignments as heartbeat_assignments
from yarn_adapt.semantics.capacity import is_active_user as is_active_user
from yarn_adapt.semantics.capacity import maximum_applications as maximum_applications
from yarn_adapt.semantics.capacity import may_activate as may_activate
from yarn_adapt.semantics.capacity import queue_order_key as queue_order_key
from yarn_adapt.semantics.capacity import round_up as round_up
from yarn_adapt.semantics.capacity import user_am_limit as user_am_limit
from yarn_adapt.semantics.capacity import user_limit as user_limit
