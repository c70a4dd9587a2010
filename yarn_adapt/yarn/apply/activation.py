"""How the RM is told to take a new scheduler file.

The Capacity Scheduler re-reads capacity-scheduler.xml on ``yarn rmadmin
-refreshQueues`` (AdminService.refreshQueues -> scheduler.reinitialize); the Fair
Scheduler reloads its allocation file by itself within 10-15 s of a change
(AllocationFileLoaderService: checked every 10 s, reloaded once 5 s old).
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

DEFAULT_REFRESH_COMMAND = ("yarn", "rmadmin", "-refreshQueues")


class ActivationFailed(Exception):
    """The RM refused to take the file; the message is the RM's own, on one line."""


class Activation(Protocol):
    def describe(self) -> str: ...

    def activate(self) -> None: ...


@dataclass(frozen=True)
class RefreshCommand:
    """Run the configured refresh command; a non-zero exit is a refusal."""

    argv: Sequence[str] = DEFAULT_REFRESH_COMMAND
    timeout_s: float = 120.0

    def describe(self) -> str:
        return "run " + " ".join(self.argv)

    def activate(self) -> None:
        try:
            done = subprocess.run(
                list(self.argv), capture_output=True, text=True, timeout=self.timeout_s, check=False
            )
        except FileNotFoundError as exc:
            raise ActivationFailed(f"refresh command not found: {self.argv[0]}") from exc
        except subprocess.TimeoutExpired as exc:
            raise ActivationFailed(f"refresh command timed out after {self.timeout_s:g} s") from exc
        if done.returncode != 0:
            raise ActivationFailed(refusal_message(done.stderr or done.stdout, done.returncode))


def refusal_message(output: str, returncode: int) -> str:
    """The RM's reason from rmadmin's output: the first line naming an exception,
    without Java's stack frames."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    meaningful = [line for line in lines if not line.startswith("at ") and "WARN" not in line]
    reason = next((line for line in meaningful if "Exception" in line), None)
    reason = reason or (meaningful[-1] if meaningful else "no output")
    return f"exit {returncode}: {reason}"


@dataclass(frozen=True)
class WaitForReload:
    """The scheduler reloads the file itself; verification does the waiting."""

    def describe(self) -> str:
        return "wait for the Fair Scheduler to reload the allocation file (10-15 s)"

    def activate(self) -> None:
        return None


def activation_named(applier: str, refresh_command: Sequence[str]) -> Activation:
    """The activation a journaled file applier (``file+<Activation>``) used."""
    if applier.endswith(WaitForReload.__name__):
        return WaitForReload()
    return RefreshCommand(tuple(refresh_command))
