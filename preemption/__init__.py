"""The node agent (``yarn-adapt agent``, ``python -m preemption``): isolation of batch
containers in cgroups and their gradual reclaim, TopoSch's Algorithm 2
(docs/colocation.md, "The node agent"). It imports nothing of the service: only
``yarn_adapt.errors``, the YARN HTTP seam and the model types it returns.

Decide (pure):
    ``model`` (frozen ``Amount``, ``BatchTask``, ``TaskSample``, ``ReclaimTarget``,
    container ids), ``strategies`` (GetKPreemptedTasks: RB, LTF, NTF, NLTF, LP, Kill),
    ``reclaim`` (Algorithm 2 as a state machine: ``decide(state, observation,
    settings)`` returns the next state and ``SetLimit`` / ``Kill`` / ``Blacklist``
    actions), ``aliveness``, ``classify`` (container -> application -> batch or not),
    ``qos`` (the QoS prediction engine and ``InferPreemptedResource()``; numpy and
    scikit-learn loaded only when used), ``isolation`` (batch's weight, the suppress
    formula and its steps, memory pressure, the memory eviction's conditions),
    ``cgroups/caps`` (where the isolation caps and Algorithm 2's squeeze combine: the
    stricter of the two).
Observe:
    ``nodemanager`` (the one trusted process, verified every interval, and the
    containers it lists), ``discovery`` (their LCE cgroups, or their processes below the
    NodeManager), ``procfs``, ``nodestat`` (``/proc/stat`` and ``/proc/meminfo``),
    ``yarnedge`` (RM application facts, the NM's container list, MapReduce progress
    through the AM, a finished attempt's from JobHistory, the kill), ``targets`` (the
    service's reclaim requests, or a standalone target).
Act:
    ``cgroups/`` (``base`` the backend interface and shared rules, ``v1``, ``v2``,
    ``files`` the one cgroupfs seam with the error mapping, ``dryrun``, ``procfile``),
    ``adopt`` (agent-owned cgroups for containers without one), ``pinned`` (a process
    moved by pid only if the pid still names it), ``statefile`` (the journal written
    before every change, and ``restore``), ``lazyfree`` (a replaced or removed file let
    go by a background thread), ``node`` (``NodeReclaimer``: one interval of observe ->
    decide -> act, shared with the simulator), ``isolator`` (``NodeIsolator``: the
    isolation loop's observe and act).
Around them:
    ``agent`` (the loop), ``settings`` (TOML), ``metrics`` (Prometheus), ``status`` (the
    status file and ``agent status``), ``cli`` (the ``agent`` commands), ``errors``.
"""
