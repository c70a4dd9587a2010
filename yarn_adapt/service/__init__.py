"""The configurator service (``yarn-adapt serve``): the tuning loop, its store and its
page, and the co-location guard's loop beside it (docs/configurator.md,
docs/operations.md).

- ``service``: wires everything together; ``runner``: the token, the web server and
  signals; ``settings``: reads and checks the TOML settings.
- ``loop``: the rounds (observe, reconcile, drift, measure, propose, decide, act,
  record) and the backoff.
- ``backend``: the ``ClusterBackend`` seam and ``YarnBackend``; ``simcluster``: the
  simulated backend and ``SimulatedApplier``.
- ``proposer``: the ``Proposer`` seam; ``proposers``: which one the service runs;
  ``tuner_adapter``: the tuner behind it, with task times learned from JobHistory
  (:mod:`yarn_adapt.workload.history_model`); ``cilantro_adapter`` and ``cilantro_settings``: the
  Cilantro proposer; ``planning``: with the guard on, plan on each node's real capacity
  (``OnRealCapacity``), and the one setting the guard may own (``GuardOwned``).
- ``hysteresis`` and ``gates``: the gates (pure); ``actuators``: one actuator per mode;
  ``desk``: approve, reject, apply, roll back; ``statemachine``: the proposal states;
  ``reconcile``: recovery of interrupted applies.
- ``intervals`` (likely ranges, ``PredictionLedger``), ``checking`` (a prediction
  against what its jobs realised), ``checks_file`` (the checked log-ratios kept across
  restarts), ``realized`` (interval figures).
- ``store``: the SQLite store and ``SqliteJournal``; ``records``: its frozen records;
  ``metrics``: the Prometheus metrics; ``agent_tokens``: the node agents' tokens.
- ``series``, ``usage``, ``versions``, ``evidence``: what the page records and shows;
  ``xmltext``: scheduler text and the unified XML diff.
- ``web/``: the Flask API and pages (``app``), credentials (``access``, ``auth``,
  ``operators``, ``throttle``), views, the console's sections and charts, the guard's
  routes, the waitress server.
- ``guard``: the co-location guard's loop (its thread, health, error budget, store,
  metrics); ``guard_client``: asking a running service for ``/api/guard``; ``ingest``:
  the trace ingest worker and OTLP receiver inside ``serve``.
- ``demo`` and ``simcoloc``: the demo and its co-location half (docs/demo.md).
"""
