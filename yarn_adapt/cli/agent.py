"""``yarn-adapt agent``: the node agent's commands (defined in :mod:`preemption.cli`)."""

from preemption.cli import agent_group

__all__ = ["agent_group"]
