"""The tuning round and what it decides with (docs/configurator.md).

- ``rounds``: the round (observe, reconcile, drift, measure, propose, decide, act,
  record), the schedule that repeats it, and the backoff (``TuningLoop``).
- ``gates``: the per-group gates (pure); ``hysteresis``: the cluster-wide ones and the
  verdict on a suggestion (pure).
- ``actuators``: what a round does with a proposal that passed the gates, one actuator
  per mode.
- ``desk``: operator actions on proposals: approve, reject, apply, roll back (the moves
  :mod:`yarn_adapt.service.state.statemachine` allows).
- ``reconcile``: finish or undo the applies a crash (or an error) interrupted.
"""
