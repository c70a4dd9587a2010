"""``python -m preemption`` for the tests of the agent's own process (signals, the next
start's restore): no NodeManager runs beside these tests, so the NodeManager's view is
the recorded one (:class:`~tests.preemption.factories.ListedBy`) listing the
containers named first on the command line; everything else is the real command::

    python -m tests.preemption.listed_run CONTAINER[,CONTAINER...] run --config agent.toml
"""

from __future__ import annotations

import os
import sys

from preemption import agent, cli
from preemption.nodemanager import NodeManagerSource
from preemption.procfs import ProcFs
from preemption.settings import AgentSettings

from .factories import ListedBy


def main(argv: list[str]) -> int:
    listed = argv[0].split(",")

    def recorded(settings: AgentSettings, procfs: ProcFs) -> NodeManagerSource:
        return ListedBy(os.getppid(), listed)

    agent.host_nodemanager = recorded  # type: ignore[assignment]
    return cli.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
