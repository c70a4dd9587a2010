"""The live co-location testbed (``yarn-adapt testbed``, ``yarn-adapt bench testbed``):
a latency-critical application beside CPU-burning batch work on a real two-node YARN
on one host, each NodeManager pinned to its own CPU and seeing that machine, with the
product's guard (``yarn-adapt serve``) and node agents (``yarn-adapt agent run``)
switched off and on.

- ``run``: :class:`~yarn_adapt.testbed.run.Testbed`, the set-up and the measurement;
- ``options``: its options and ``--set`` keys; ``results``: what a run measured, its
  JSON;
- ``product``: ``serve`` and the agents' settings from ``conf/testbed/``;
- ``agents``: the agent processes, their stop and its restore check;
- ``yarncgroups``: YARN's CPU weights for the containers;
- ``cluster``, ``services``, ``loadgen``, ``burner``, ``usage``: the testbed's YARN,
  the traced application, its load, the batch work, the CPU measures.
"""
