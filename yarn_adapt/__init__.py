"""yarn-adapt: a Hadoop YARN cluster that tunes itself (docs/ARCHITECTURE.md).

Data flows one way, observe -> model -> decide -> act -> record, and the packages are
layered the same way (``tests/test_layering.py`` holds the layers):

- at the bottom: ``errors`` (the one error tree), ``durations``, ``progress``,
  ``set_keys`` (the one ``--set`` parser), ``tomlsettings`` (the one TOML reader),
  ``model/`` (the domain's frozen types);
- ``semantics/`` (YARN's scheduler decisions as pure functions), ``yarn/`` (the YARN
  edge: HTTP, RM and JobHistory clients, scheduler files, appliers), ``sim/`` (the
  YARN simulator), ``workload/`` (traces and task times), ``minicluster/`` (a real
  Hadoop cluster on 127.0.0.1 for tests and benches);
- ``tuning/`` (AdaptiveConfig's tuner), ``demand/`` (Cilantro), ``colocation/`` (the
  co-location guard), ``cosim/`` (the co-location simulators), ``placement/`` (Tarcil);
- ``service/`` (the long-running service, its store and its web page), ``doctor/``,
  ``testbed/``, ``bench/`` (the benchmarks) and ``cli/`` (the commands) on top.

Beside it: ``rules`` (the comparator), ``tracing`` (request traces and risk) and
``preemption`` (the node agent).
"""
