"""The act side toward YARN: appliers that change the cluster and prove the change.

Every applier is idempotent (nothing to do when the target already says it), takes
the one apply lock, journals each step, verifies what the RM reports, and restores the
previous state when the RM refuses or does not report the change.

- :class:`FileApplier` with :class:`RefreshCommand` -- capacity-scheduler.xml + refreshQueues
- :class:`FileApplier` with :class:`WaitForReload` -- fair-scheduler.xml reload
- :class:`MutationApplier` -- PUT /scheduler-conf (mutable configuration store)
- :class:`NodeResourceApplier` -- POST /nodes/{id}/resource
- :class:`DryRun` -- wraps any of them: plans, never acts
"""

from yarn_adapt.yarn.apply.activation import (
    DEFAULT_REFRESH_COMMAND,
    Activation,
    ActivationFailed,
    RefreshCommand,
    WaitForReload,
    activation_named,
)
from yarn_adapt.yarn.apply.base import (
    Applier,
    ApplyOutcome,
    ApplyPlan,
    ApplyResult,
    ApplySettings,
    DryRun,
    SchedulerReader,
    new_apply_id,
)
from yarn_adapt.yarn.apply.expectations import mismatches
from yarn_adapt.yarn.apply.file_applier import FileApplier
from yarn_adapt.yarn.apply.journal import (
    ApplyHistory,
    ApplyJournal,
    ApplyStep,
    ApplyTrail,
    JournalEntry,
    JsonlJournal,
    MemoryJournal,
    histories,
    interrupted,
    unfinished,
)
from yarn_adapt.yarn.apply.lock import ApplyLock
from yarn_adapt.yarn.apply.mutation_applier import (
    MutationApplier,
    config_from_properties,
    running_document,
)
from yarn_adapt.yarn.apply.node_resource import NodeResourceApplier, NodeResourceTarget
from yarn_adapt.yarn.apply.polling import PollSettings

__all__ = [
    "DEFAULT_REFRESH_COMMAND",
    "Activation",
    "ActivationFailed",
    "Applier",
    "ApplyHistory",
    "ApplyJournal",
    "ApplyLock",
    "ApplyOutcome",
    "ApplyPlan",
    "ApplyResult",
    "ApplySettings",
    "ApplyStep",
    "ApplyTrail",
    "DryRun",
    "FileApplier",
    "JournalEntry",
    "JsonlJournal",
    "MemoryJournal",
    "MutationApplier",
    "NodeResourceApplier",
    "NodeResourceTarget",
    "PollSettings",
    "RefreshCommand",
    "SchedulerReader",
    "WaitForReload",
    "activation_named",
    "config_from_properties",
    "histories",
    "interrupted",
    "mismatches",
    "new_apply_id",
    "running_document",
    "unfinished",
]
