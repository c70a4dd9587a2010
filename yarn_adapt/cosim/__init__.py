"""The co-location simulation: latency-critical services beside batch work on
simulated nodes, for the co-location benches, the demo and the model's calibration.

It sits above the YARN simulator (:mod:`yarn_adapt.sim`) and the co-location
decisions it exercises (:mod:`yarn_adapt.colocation`, :mod:`preemption`), which is
why it is a package of its own: :mod:`yarn_adapt.sim` stays the YARN simulator alone.

* :mod:`~yarn_adapt.cosim.colocation` — one node: batch tasks beside a service, the
  preemption agent's own reclaimer acting on simulated cgroups; the service's P95
  from queueing and interference (``lc_p95_ms``).
* :mod:`~yarn_adapt.cosim.lra_model` — a cluster of such nodes running a traced
  application (TopoSch's evaluation, §6): risk from the traces, the guard's and the
  paper's policies side by side.
* :mod:`~yarn_adapt.cosim.service_guard` — the yarn-adapt service's own guard round
  and node agents' targets inside that cluster (the bench's ``yarn-adapt`` row).
* :mod:`~yarn_adapt.cosim.interference` — the per-core interference model: batch's
  runnable threads, CFS weights and memory hogs per core inflate a service's service
  time, which then queues; :mod:`~yarn_adapt.cosim.core_calibration` fits it to
  testbed sweeps (:mod:`yarn_adapt.testbed.sweep`) and scores held-out windows.
* :mod:`~yarn_adapt.cosim.toposch` — TopoSch's Algorithm 1, the batch placement pass.
* :mod:`~yarn_adapt.cosim.lc_services` — the demo's services: their latency from the
  batch on their nodes, and the traces they would send.
"""
