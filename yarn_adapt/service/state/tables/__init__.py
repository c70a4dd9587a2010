"""The service database's table families, each a class over
:class:`~yarn_adapt.service.state.database.Database`; :class:`~yarn_adapt.service.state.store.Store`
is all of them over one file.

- ``rounds``: ``rounds`` and ``decisions``;
- ``proposals``: ``proposals``, ``proposal_origin`` and ``audit``, and an apply's start
  and end (they move the proposal);
- ``applies``: ``applies`` and the appliers' ``journal``;
- ``checks``: ``realized`` and ``prediction_errors``;
- ``console``: ``queue_usage``, ``group_latency``, ``versions``, ``run_summary``;
- ``tokens``: ``agent_tokens`` and ``operator_tokens``.
"""
