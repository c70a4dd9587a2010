"""The co-location guard inside the service: built from ``[colocation]``, run on its own
clock by :class:`GuardLoop` (every ``period_s``, in its own thread, apart from the
configurator's round), recorded in the service's database and audit log, exported as
Prometheus metrics.

:class:`GuardStep` wraps :class:`~yarn_adapt.colocation.guard.ColocationGuard` (the
same class the testbed runs) with what only the service has: the RM the backend
already talks to, the trace store named in ``[tracing]``, the SQLite store
(:class:`GuardStore`, its own tables beside the configurator's), the registry and the
loop.

The loop reads the nodes from the :class:`~yarn_adapt.colocation.nodes.NodeCache` it
shares with the configurator's observe (refreshed at most once a period). Its health
-- the last cycle's time and duration, consecutive failures, the nodes' age -- is in
``GET /api/guard`` (``health``) and the metrics. A cycle that fails (the RM cannot be
read, the journal is damaged, a bug) is logged and counted; after ``failure_budget``
failures in a row every node is given back (and the audit log says why), and the
loop keeps trying. The configurator's failures (drift, a failing tuner, a skipped
round) never reach the guard, and the guard's never reach the configurator.

Decisions are recorded per node when they change (action, target, result, state, mode)
and at least every ``RECORD_EVERY_S`` while they hold; rows older than
``KEEP_ROWS_S`` are deleted.

Modules: ``build`` (from the settings to a ``GuardStep``), ``step`` (one cycle and its
views), ``loop`` (the guard's own clock and health), ``records`` (``GuardStore`` and the
audit recorder), ``metrics`` (the Prometheus collector).
"""
