"""Where a mini cluster keeps its files, and which ports it listens on."""

from __future__ import annotations

import socket
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"


@dataclass(frozen=True)
class ClusterLayout:
    """The directory tree of one cluster; everything it writes stays under ``root``."""

    root: Path

    @property
    def conf_dir(self) -> Path:
        return self.root / "conf"

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def home_dir(self) -> Path:
        """``user.home`` of every JVM, so distributed shell keeps its staging files here."""
        return self.root / "home"

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    @property
    def staging_dir(self) -> Path:
        return self.root / "staging"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def security_dir(self) -> Path:
        """The KDC's files, the keytab, krb5.conf and the TLS material of a secured cluster."""
        return self.root / "security"

    @property
    def yarn_script(self) -> Path:
        return self.bin_dir / "yarn"

    @property
    def admin_marker(self) -> Path:
        """Touched by ``bin/yarn`` whenever an admin command may have changed the RM."""
        return self.state_dir / "admin-commands-ran"

    def nodemanager_dir(self, index: int) -> Path:
        return self.root / f"nm-{index}"

    def create(self) -> None:
        for path in (self.conf_dir, self.bin_dir, self.logs_dir, self.home_dir, self.tmp_dir,
                     self.staging_dir, self.state_dir, self.security_dir):  # fmt: skip
            path.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Ports:
    """The fixed ports of the RM and the JobHistory Server (NodeManagers bind port 0)."""

    rm_client: int
    rm_scheduler: int
    rm_tracker: int
    rm_admin: int
    rm_web: int
    jhs_client: int
    jhs_web: int
    jhs_admin: int

    @classmethod
    def pick(cls) -> Ports:
        """Ports the kernel hands out as free right now.

        All sockets are held open together so no two of them collide; another process
        may still grab one before the daemon binds it, which start() handles by
        retrying with fresh ports.
        """
        with ExitStack() as stack:
            sockets = [stack.enter_context(socket.socket()) for _ in range(8)]
            for sock in sockets:
                sock.bind((HOST, 0))
            return cls(*(sock.getsockname()[1] for sock in sockets))

    def address(self, name: str) -> str:
        port: int = getattr(self, name)
        return f"{HOST}:{port}"


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` distinct ports free right now (see :meth:`Ports.pick` for the race)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((HOST, 0))
        return tuple(sock.getsockname()[1] for sock in sockets)
