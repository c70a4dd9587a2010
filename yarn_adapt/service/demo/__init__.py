"""``yarn-adapt demo``: the service driving a simulated cluster (docs/demo.md).

- ``replay``: the demo itself: builds the service on the simulated cluster, replays
  the bundled trace and judges the run.
- ``simcluster``: the simulated cluster, its backend and ``SimulatedApplier``.
- ``simcoloc``: the demo's co-location half (latency-critical services, the guard,
  simulated node agents).
"""
