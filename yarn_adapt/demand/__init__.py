"""Cilantro demand learning and allocation policies (Bhardwaj et al., OSDI '23).

Pure decision code, no I/O:

- :mod:`.utility`: SLO-clipped utilities (linear, quadratic, sqrt) and the
  welfare / fairness / usage metrics;
- :mod:`.learner`: the monotone, Lipschitz-bounded binned performance learner with
  confidence bands, profiled curves, the stated-demand fallback, demand bounds;
- :mod:`.forecast`: the ARMA(1,1) load forecaster with prediction intervals;
- :mod:`.solvers`: exact social / egalitarian welfare solvers and the
  evolutionary / exhaustive references;
- :mod:`.policies`: Cilantro-NJC/SW/EW, the oracles and the §7.1 baselines;
- :mod:`.shared`: those policies splitting one node among the latency-critical
  services that share it (the guard's reservation);
- :mod:`.lra`: the latency-critical applications' learners (CPU and load);
- :mod:`.memory`: their working set against the load, with its upper bound;
- :mod:`.microservices`: the end-to-end policy of §4.2 and its baselines;
- :mod:`.model`: the :class:`~.model.DemandSnapshot` other parts read;
- :mod:`.environment`: the §7.1 cluster-sharing environment the bench runs;
- :mod:`.curves`: performance-curve files and query-arrival traces for the bench.
"""
