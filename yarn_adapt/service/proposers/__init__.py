"""The seam between the service and what proposes, what sits behind it, and how its
predictions are checked (docs/configurator.md).

- ``seam``: the ``Proposer`` seam.
- ``choose``: which proposer the service runs, from its settings.
- ``tuner_adapter``: the tuner behind the seam, with task times learned from
  JobHistory (:mod:`yarn_adapt.workload.history_model`).
- ``cilantro_adapter``: the Cilantro proposer (its ``[cilantro]`` table is
  :mod:`yarn_adapt.service.cilantro_settings`, beside the other settings).
- ``planning``: with the guard on, plan on each node's real capacity
  (``OnRealCapacity``), and the one setting the guard may own (``GuardOwned``).
- ``intervals``: each prediction's likely range (``PredictionLedger``) and the
  population it is about (pure).
- ``checking``: a prediction against what its jobs realised (pure).
- ``checks_file``: the checked log ratios, kept across restarts in the state directory.
- ``realized``: each group's realized mean job latency in a window (pure).
- ``evidence``: the jobs behind a proposal, and when to warn about it (pure).
"""
