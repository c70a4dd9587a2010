"""``yarn-adapt bench sim-fidelity``: each app's latency on a real YARN mini cluster
against the simulator's (issue 3 item 4).

Each scenario is data: a scheduler, its queue configuration as the XML text YARN
reads, and distributed-shell ``sleep`` apps (submit offset, queue, containers,
seconds, container size). The bench runs every scenario on a real mini cluster (one
cluster per scheduler kind; before each scenario the ResourceManager is restarted on
the scenario's file), reads each app's submit, AM-launch and finish times from the
RM REST API and its AM grant and containers from the RM and NM logs, then replays
the same apps -- submitted when the RM says they were -- in the simulator, under the
same XML (parsed by :mod:`yarn_adapt.yarn.confxml`) and the node sizes the RM
reports. YARN's fixed overheads and the simulator options that mirror YARN come from
:mod:`yarn_adapt.sim.calibration`: the recorded measurement, or with ``--set
calibrate=true`` a fresh one on a separate calibration scenario run first (never one
of the evaluated scenarios; nothing is fitted per scenario).

Apps are submitted through the RM REST API with the distributed shell's own
ApplicationMaster (:class:`RestSubmitter`): a client JVM per app (``--set
submit=client``, the harness's ``submit_sleep_app``) submits seconds late and takes
the host's two cores from the AMs starting beside it.

Per app: relative error = |sim latency - real latency| / real latency. Figures:
``median_rel_err``, ``p90_rel_err`` over all apps, ``scenarios``, and the error split
into *wait* (submit -> AM container granted) and *run* (the rest): mean signed
(``wait_bias_s``, ``run_bias_s``) and median absolute wait error in seconds.
Per scenario, ``agrees``: the
simulator agrees with the real RM when the median of its apps' relative errors is
<= 0.20 and none exceeds 0.50 (``scenarios_agree``, ``scenarios_disagree``).
Scenarios: the 8 of :data:`SCENARIOS` (pinned by the simulator's golden tests) and
the 6 of :data:`SEMANTICS_SCENARIOS` (issue 14: user limits with apps of several
users, AM-limited queues, Fair/DRF with vcore-bound containers, Fair user limits).
``--quick``: one scenario per scheduler. ``--trace PATH``: scenarios built from the
first jobs of a trace of any supported format (:func:`scenarios_from_trace`; ``--set
apps_per_scenario=N``). ``--set keep_going=true`` reports the scenarios that ran when
one fails. A cluster that cannot start is a :class:`MiniClusterError` (one line).

Modules: ``scenarios`` (the scenarios as data, and from a trace), ``real`` (a run on
the real mini cluster), ``logs`` (grants and containers from YARN's logs), ``compare``
(the simulator's replay and the figures), ``bench`` (the registered bench).
"""
