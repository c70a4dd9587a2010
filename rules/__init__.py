"""The job-latency comparator of AdaptiveConfig: which candidate scheduler
configuration gives the lowest job latency for a job mix (docs/configurator.md, "The
comparator"). The rules decide what the scheduler's mechanism is; numeric kernels
compute what it does. Pure decision code.

- ``comparator``: the entry point (``Comparator.choose``).
- ``compiler``: a candidate's categorical facts (``Signature``) to a ``Mechanism``,
  cached per signature; ``rulebook``: the rules as data, one durable-rules ruleset per
  activation group; ``mechanism``: the chosen kernels and their bindings.
- Algorithm 1, split by concern: ``engine`` (state, event loop, jobs, containers),
  ``granting`` (who gets the next container; the path record), ``heartbeats`` (node
  timing), ``kernelset`` (kernels made once, queues, fair shares), ``judging`` (a
  configuration against a kept path), ``paths`` (the decisions, as named tuples),
  ``state`` (slotted inner-loop state); ``evaluation`` (the comparator's one call
  into them: follow a kept path or run the mix); ``native`` (that call on the
  mypyc-compiled copy of these modules, when it is built).
- ``kernels``: the allocation, ordering, constraint and estimation kernels and
  ``VALUE_SOURCES``; ``algorithm2``: Algorithm 2 kept literally.
- ``inputs`` (the comparator's inputs), ``mixes`` (a workload to a job mix with
  predicted durations), ``uncertainty`` (what the comparator samples), ``decision``
  (which candidate to pick over the samples).
"""
