"""What a power cut or a second process must not break, observed directly: the
order of fsync and rename in every durable write (a power cut cannot be produced,
so the calls are recorded), the CLI journal's fsyncs and a torn last line, backups
as exact bytes, and the apply lock that lives beside the target file."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from yarn_adapt.cli import main
from yarn_adapt.errors import ApplyInProgress
from yarn_adapt.yarn.apply import (
    ApplySettings,
    ApplyStep,
    FileApplier,
    JournalEntry,
    JsonlJournal,
    RefreshCommand,
    unfinished,
)
from yarn_adapt.yarn.apply.backup import BackupStore, sha256_bytes
from yarn_adapt.yarn.apply.lock import ApplyLock
from yarn_adapt.yarn.confxml import parse_capacity_xml
from yarn_adapt.yarn.http import HttpSettings
from yarn_adapt.yarn.rm import ResourceManagerClient
from yarn_adapt.yarn.schedconf.xmlio import remove_stale_temporaries, write_bytes_atomically

LATIN1 = (
    '<?xml version="1.0" encoding="ISO-8859-1"?>\n'
    "<!-- réglé à la main par l'équipe données -->\n"
    "<configuration>\n"
    "  <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>\n"
    "  <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>50</value></property>\n"
    "  <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>50</value></property>\n"
    "</configuration>\n"
).encode("iso-8859-1")


@pytest.fixture
def syscalls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every fsync (by the path its descriptor names) and rename, in order."""
    calls: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", str(Path(f"/proc/self/fd/{fd}").readlink())))
        real_fsync(fd)

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        calls.append(("rename", f"{os.fspath(source)} -> {os.fspath(target)}"))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    yield calls


def test_an_atomic_write_fsyncs_the_file_renames_then_fsyncs_the_directory(
    tmp_path: Path, syscalls: list[tuple[str, str]]
) -> None:
    target = tmp_path / "capacity-scheduler.xml"
    target.write_bytes(b"old")
    target.chmod(0o640)

    write_bytes_atomically(target, LATIN1)

    [(first, temporary), (second, rename), (third, directory)] = syscalls
    assert (first, second, third) == ("fsync", "rename", "fsync")
    assert Path(temporary).parent == tmp_path
    assert Path(temporary).name.startswith(".capacity-scheduler.xml.yarn-adapt-tmp-")
    assert rename == f"{temporary} -> {target}"
    assert directory == str(tmp_path)
    assert target.read_bytes() == LATIN1
    assert target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["capacity-scheduler.xml"]


def test_what_a_crash_mid_write_leaves_is_removed_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "capacity-scheduler.xml"
    target.write_bytes(LATIN1)
    left = tmp_path / ".capacity-scheduler.xml.yarn-adapt-tmp-k3j2h1"
    left.write_bytes(LATIN1[:40])  # a crash between the temporary file and the rename
    with ApplyLock.beside(target):
        assert remove_stale_temporaries(target) == [left]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".capacity-scheduler.xml.yarn-adapt.lock",
        "capacity-scheduler.xml",
    ]


def test_a_backup_is_the_exact_bytes_fsynced_with_its_directory(
    tmp_path: Path, syscalls: list[tuple[str, str]]
) -> None:
    source = tmp_path / "capacity-scheduler.xml"
    source.write_bytes(LATIN1)
    backup = BackupStore(tmp_path / "backups").save(source, LATIN1)
    assert backup.read_bytes() == LATIN1
    assert sha256_bytes(backup.read_bytes()) == sha256_bytes(source.read_bytes())
    assert syscalls == [("fsync", str(backup)), ("fsync", str(tmp_path / "backups"))]


def test_the_cli_journal_fsyncs_every_entry_and_its_directory_once(
    tmp_path: Path, syscalls: list[tuple[str, str]]
) -> None:
    journal = JsonlJournal(tmp_path / "state" / "apply-journal.jsonl")
    journal.record(JournalEntry("a1", ApplyStep.PLANNED, "file+RefreshCommand", "/x"))
    journal.record(JournalEntry("a1", ApplyStep.BACKED_UP, "file+RefreshCommand", "/x"))
    assert syscalls == [
        ("fsync", str(journal.path)),
        ("fsync", str(journal.path.parent)),
        ("fsync", str(journal.path)),
    ]


def test_a_torn_last_journal_line_is_ignored_then_cut_before_the_next_entry(
    tmp_path: Path,
) -> None:
    journal = JsonlJournal(tmp_path / "apply-journal.jsonl")
    entry = JournalEntry("a1", ApplyStep.WRITTEN, "file+RefreshCommand", "/x", old_sha256="o")
    journal.record(entry)
    with journal.path.open("ab") as stream:  # what a crash in the middle of an append leaves
        stream.write(b'{"apply_id": "a1", "step": "activ')
    assert [e.step for e in journal.entries()] == [ApplyStep.WRITTEN]

    journal.record(JournalEntry("a1", ApplyStep.ACTIVATED, "file+RefreshCommand", "/x"))

    assert [e.step for e in journal.entries()] == [ApplyStep.WRITTEN, ApplyStep.ACTIVATED]
    assert unfinished(journal)[0].step is ApplyStep.ACTIVATED
    assert journal.entries()[0].old_sha256 == "o"


# --------------------------------------------------------------------------- the lock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from yarn_adapt.yarn.apply.lock import ApplyLock
    with ApplyLock.beside(Path(sys.argv[1])):
        print("locked", flush=True)
        time.sleep(60)
    """
)


def test_the_apply_lock_beside_the_file_excludes_a_process_with_another_state_dir(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    target = conf / "capacity-scheduler.xml"
    target.write_bytes(LATIN1)
    linked = tmp_path / "linked.xml"
    linked.symlink_to(target)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(linked)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        # Another process (the service, say) with its own state directory, through
        # the real path: it must not even ask the RM.
        with ResourceManagerClient("http://127.0.0.1:9", HttpSettings(retries=0)) as nowhere:
            applier = FileApplier(
                target,
                nowhere,
                RefreshCommand(("false",)),
                ApplySettings(state_dir=tmp_path / "service-state"),
            )
            desired = parse_capacity_xml(LATIN1).config
            with pytest.raises(ApplyInProgress) as held:
                applier.apply(desired)
        lock = conf / ".capacity-scheduler.xml.yarn-adapt.lock"
        assert str(lock) in str(held.value) and f"pid {holder.pid}" in str(held.value)
        assert target.read_bytes() == LATIN1
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    with ApplyLock.beside(target):  # released when its holder died
        pass


def test_cli_apply_refuses_to_start_over_an_interrupted_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "capacity-scheduler.xml"
    target.write_bytes(LATIN1)
    state = tmp_path / "state"
    JsonlJournal(state / "apply-journal.jsonl").record(
        JournalEntry("a1", ApplyStep.WRITTEN, "file+RefreshCommand", str(target))
    )
    argv = ["apply", str(target), "--target", str(target), "--state-dir", str(state)]
    assert main([*argv, "--rm", "http://127.0.0.1:9", "--retries", "0"]) == 4
    assert capsys.readouterr().err == (
        f"yarn-adapt: {target}: apply a1 was interrupted after written; run yarn-adapt "
        f"recover --state-dir {state} first; nothing was changed\n"
    )
    assert target.read_bytes() == LATIN1


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_an_atomic_write_keeps_the_files_owner_group_and_mode(tmp_path: Path) -> None:
    """A root-run service replacing yarn's file must leave it yarn's: an RM running
    as ``yarn`` reads it, and a later rollback writes it, as before."""
    target = tmp_path / "capacity-scheduler.xml"
    target.write_bytes(b"old")
    os.chown(target, 1000, 1000)
    target.chmod(0o640)

    write_bytes_atomically(target, LATIN1)

    after = target.stat()
    assert (after.st_uid, after.st_gid, after.st_mode & 0o7777) == (1000, 1000, 0o640)
    assert target.read_bytes() == LATIN1


@pytest.mark.skipif(os.geteuid() != 0, reason="running a writer as nobody needs root")
def test_a_writer_that_cannot_keep_the_owner_changes_nothing() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as name:  # pytest's tmp_path is root's 0700
        _refused_as_nobody(Path(name))


def _refused_as_nobody(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    target = tmp_path / "fair-scheduler.xml"
    target.write_bytes(b"old")
    os.chown(target, 1000, 1000)
    target.chmod(0o666)  # writable by anyone, but only root or uid 1000 may own it
    code = (
        "import os, sys\n"
        "from yarn_adapt.errors import ConfigFileError\n"
        "from yarn_adapt.yarn.schedconf.xmlio import write_bytes_atomically\n"
        "os.setgroups([]); os.setgid(65534); os.setuid(65534)  # imports first: /root is 0700\n"
        "try:\n"
        f"    write_bytes_atomically({str(target)!r}, b'new')\n"
        "except ConfigFileError as exc:\n"
        "    print(exc.one_line()); sys.exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "cannot keep its owner 1000:1000" in done.stdout
    assert target.read_bytes() == b"old"
    assert (target.stat().st_uid, target.stat().st_gid) == (1000, 1000)
    assert list(tmp_path.iterdir()) == [target]  # no temporary left behind
