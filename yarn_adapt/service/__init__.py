"""The configurator service (``yarn-adapt serve``): the tuning loop, its store and its
page, and the co-location guard's loop beside it (docs/configurator.md,
docs/operations.md).

At the package root, what everything here reads or wires:

- ``service``: wires everything together; ``runner``: the token, the web server and
  signals; ``settings``: reads and checks the TOML settings (``cilantro_settings``:
  its ``[cilantro]`` table).
- ``backend``: the ``ClusterBackend`` seam and ``YarnBackend``.
- ``metrics``: the Prometheus metrics; ``xmltext``: scheduler text and the unified
  XML diff.
- ``guard``: the co-location guard's loop (its thread, health, error budget, store,
  metrics); ``guard_client``: asking a running service for ``/api/guard``; ``ingest``:
  the trace ingest worker and OTLP receiver inside ``serve``.

By role, one subpackage each (each ``__init__`` maps its modules):

- ``loop/``: the round and its schedule (``rounds``), the gates (``gates``,
  ``hysteresis``), one actuator per mode (``actuators``), approve, reject, apply, roll
  back (``desk``), recovery of interrupted applies (``reconcile``).
- ``state/``: what is kept: the SQLite file (``sqlitefile``), the store
  (``store``), its frozen records (``records``), the proposal states it enforces
  (``statemachine``), what the page records and shows (``series``, ``usage``,
  ``versions``), the node agents' tokens (``agent_tokens``).
- ``proposers/``: the ``Proposer`` seam (``seam``), which one the service runs
  (``choose``), the tuner and Cilantro behind it (``tuner_adapter``,
  ``cilantro_adapter``), planning on real capacity
  (``planning``), and the predictions' ranges and checks (``intervals``, ``checking``,
  ``realized``, ``evidence``; ``checks_file``: the checked log-ratios kept across
  restarts).
- ``demo/``: the demo (``replay``), its simulated cluster (``simcluster``) and its
  co-location half (``simcoloc``) (docs/demo.md).
- ``web/``: the Flask API and pages (``app``), credentials (``access``, ``auth``,
  ``operators``, ``throttle``), views, the console's sections and charts, the guard's
  routes, the waitress server.
"""
