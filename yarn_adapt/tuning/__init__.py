"""The search: one tuning pass of AdaptiveConfig (docs/configurator.md, "The tuner").
Pure decision code, except ``executors``, which only chooses where work runs.

- ``tuner``: one tuning pass, as the service and ``propose`` use it, the only tuning
  path; it runs each triggered group's search and curve; ``settings``: its
  ``TunerSettings``; ``group_tuning``: one triggered group's search (``GroupTuning``,
  the ``GroupWork`` an executor runs, a Capacity group's ``AppLimits``).
- ``state``: what the tuner sees: the jobs in progress from a simulator or a snapshot,
  the triggered groups, each group's job mix and share of the cluster;
  ``snapshot_state``: an RM snapshot's jobs in progress, shaped from JobHistory.
- ``space``: a group's space as a quantized grid (the paper's candidate sets
  ``paper_space``, ``table2_space``; ``covering_percentages``); ``search``: Recursive
  Random Search with early stopping, coarse-to-fine refinement, and exhaustive search,
  each returning its best distinct points.
- ``group_optimizer``: best latency per resource level (one search at a reference
  level re-scored at the others, or a search per level); ``split``: the cluster level,
  Algorithm 3's pool and bounds, each group re-decided at the level it was given;
  ``cluster_dp``: Algorithm 3, a max-plus DP.
- ``hindsight``: the hindsight static, the best static point over the recent history
  replayed in the simulator; ``candidates``: which of the running configuration, the
  search's best and the hindsight static a group takes, and why.
- ``proposal``: ``GroupDecision``, ``Proposal`` and ``finish_proposal``, every
  proposer's common end (YARN's validation, groups YARN would refuse left as they run,
  the diff with a reason per change).
- ``bridge``: a configuration to comparator inputs (a candidate's inputs made directly;
  whole-container candidate keys); ``apply``: settings and ratios back into a
  configuration, ``groups_of``.
- ``executors``: serial, process pool, Dask; ``paper``: the §4.2–4.4 set-ups the benches
  share; ``cli_support``: text and XML for ``propose``.
"""
