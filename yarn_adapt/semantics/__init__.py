"""Scheduler semantics as YARN 3.4 computes them: one source of truth for the
simulator (:mod:`yarn_adapt.sim`) and the comparator (:mod:`rules`).

Pure arithmetic on plain numbers (memory in MiB, vcores, counts), no state: each
function is one of YARN's decisions, and its docstring names the Hadoop class and
method it follows (Hadoop 3.4.3, ``hadoop-yarn-server-resourcemanager``).

* :mod:`.capacity` -- the Capacity Scheduler: queue order
  (PriorityUtilizationQueueOrderingPolicy), the user limit
  (UsersManager.computeUserLimit, LeafQueue.canAssignToUser) and who counts as an
  active user (AppSchedulingInfo.updatePendingResources), the AM limits
  (AbstractLeafQueue.calculateAndGetAMResourceLimitPerPartition,
  getUserAMResourceLimitPerPartition, activateApplications), a child's limit
  (ParentQueue.getResourceLimitsOfChild), maximum-applications, containers per
  heartbeat (CapacityScheduler.canAllocateMore).
* :mod:`.fair` -- the Fair Scheduler: instantaneous fair shares
  (ComputeFairShares.computeSharesInternal), the AM share (FSLeafQueue.canRunAppAM),
  the order of queues and apps (FairSharePolicy.FairShareComparator,
  DominantResourceFairnessPolicy.DominantResourceFairnessComparator2 with its DRF
  min-share check on the dominant resource, FifoPolicy), maxResources
  (FSQueue.fitsInMaxShare), maxRunningApps (MaxRunningAppsEnforcer), assignmultiple
  (FairScheduler.shouldContinueAssigning).

The simulator's core calls them through ``yarn_adapt/sim/semantics_capacity.py`` and
``semantics_fair.py``; its compiled copy compiles these sources with it, so keep
them mypyc-compilable (plain functions on numbers and tuples).
"""
