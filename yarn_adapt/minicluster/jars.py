"""Locate the Hadoop jars and a Java runtime that can run them.

The jars come from Maven Central through ``tests/hadoop/pom.xml``: ``mvn
dependency:copy-dependencies`` copies every runtime jar into one flat directory in a
per-user cache, so the whole classpath of every daemon, client and container is
``<conf dir>:<lib dir>/*``. Resolution runs once; a stamp holding the pom's digest
marks a complete copy, so editing the pom re-resolves and an interrupted copy is
never mistaken for a finished one. :func:`resolve_maven_jars` does the same for any
pom (the OpenTelemetry Java SDK's, tests/tracing/java/pom.xml).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from yarn_adapt.minicluster.errors import MiniClusterError

POM_ENV = "YARN_ADAPT_HADOOP_POM"
CACHE_ENV = "YARN_ADAPT_CACHE_DIR"
JAVA_ENV = "YARN_ADAPT_JAVA_HOME"
STAMP_NAME = "resolved.sha256"
RESOLVE_TIMEOUT_S = 1800

# Hadoop 3.4 runs on Java 8-21 here; from Java 23 Subject.getSubject() throws,
# which breaks UserGroupInformation, so newer runtimes are skipped.
SUPPORTED_JAVA = range(8, 23)
JVM_SEARCH_DIRS = (Path("/usr/lib/jvm"),)


@dataclass(frozen=True)
class HadoopJars:
    """A complete local copy of the Hadoop runtime jars."""

    version: str
    lib_dir: Path

    @property
    def classpath_glob(self) -> str:
        return f"{self.lib_dir}/*"

    def jar(self, artifact: str) -> Path:
        """The one jar whose file name starts with ``artifact-`` (e.g. a distributed shell)."""
        matches = sorted(self.lib_dir.glob(f"{artifact}-[0-9]*.jar"))
        plain = [m for m in matches if not m.name.endswith("-tests.jar")]
        if not plain:
            raise MiniClusterError(f"{self.lib_dir}: no jar for artifact {artifact}")
        return plain[0]


def default_pom() -> Path:
    """The pom named by ``YARN_ADAPT_HADOOP_POM``, else the source checkout's."""
    override = os.environ.get(POM_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "tests" / "hadoop" / "pom.xml"


def cache_root() -> Path:
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "yarn-adapt"


def hadoop_version(pom: Path) -> str:
    text = _read_pom(pom)
    found = re.search(r"<hadoop\.version>\s*([^<\s]+)\s*</hadoop\.version>", text)
    if found is None:
        raise MiniClusterError(f"{pom}: no <hadoop.version> property")
    return found.group(1)


def resolve_hadoop_jars(pom: Path | None = None, cache: Path | None = None) -> HadoopJars:
    """Return the cached jars for ``pom``, copying them from Maven first if needed."""
    pom = pom or default_pom()
    version = hadoop_version(pom)
    home = (cache or cache_root()) / f"hadoop-{version}"
    return HadoopJars(version=version, lib_dir=resolve_maven_jars(pom, home))


def resolve_maven_jars(pom: Path, home: Path | None = None) -> Path:
    """The runtime jars of ``pom`` in one directory, ``<home>/lib``, copied from Maven
    first unless the stamp there holds the pom's digest. ``home``: by default the
    cache's folder named after the pom's own ``artifactId``."""
    text = _read_pom(pom)
    home = home or cache_root() / _artifact_id(pom, text)
    lib_dir = home / "lib"
    digest = hashlib.sha256(text.encode()).hexdigest()
    stamp = home / STAMP_NAME
    if _stamp_matches(stamp, digest):
        return lib_dir
    home.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(home / ".lock"):
        if not _stamp_matches(stamp, digest):
            _copy_dependencies(pom, lib_dir)
            stamp.write_text(digest + "\n")
    return lib_dir


def _read_pom(pom: Path) -> str:
    try:
        return pom.read_text()
    except OSError as exc:
        hint = f"; set {POM_ENV}" if pom == default_pom() else ""
        raise MiniClusterError(f"{pom}: cannot read the pom ({exc.strerror}){hint}") from exc


def _artifact_id(pom: Path, text: str) -> str:
    """The project's ``artifactId``: the first one outside ``<parent>``."""
    found = re.search(r"<artifactId>\s*([\w.-]+)\s*</artifactId>", _PARENT.sub("", text))
    if found is None:
        raise MiniClusterError(f"{pom}: no <artifactId>")
    return found.group(1)


_PARENT = re.compile(r"<parent>.*?</parent>|<!--.*?-->", re.DOTALL)


def _stamp_matches(stamp: Path, digest: str) -> bool:
    return stamp.is_file() and stamp.read_text().strip() == digest


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _copy_dependencies(pom: Path, lib_dir: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MiniClusterError("mvn not found on PATH; run tests/setup.sh or install Maven")
    staging = lib_dir.with_name(lib_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom), "dependency:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    env = {**os.environ, "JAVA_HOME": str(find_java_home())}
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=RESOLVE_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise MiniClusterError(
            f"{pom}: mvn dependency:copy-dependencies failed (exit {done.returncode}): "
            + _last_error_line(done.stdout + done.stderr)
        )
    shutil.rmtree(lib_dir, ignore_errors=True)
    staging.rename(lib_dir)
    (lib_dir.parent / "resolve-seconds").write_text(f"{time.monotonic() - started:.1f}\n")


def _last_error_line(output: str) -> str:
    """Maven's first non-empty ``[ERROR]`` line, which names what failed."""
    errors = [line.partition("[ERROR]")[2].strip() for line in output.splitlines()]
    found = [error for error in errors if error]
    return (found or output.strip().splitlines()[-1:] or ["no output"])[0]


# --------------------------------------------------------------------------- java


def java_major(java_home: Path) -> int | None:
    """The feature version of the JDK at ``java_home``, or None if it is not one."""
    release = java_home / "release"
    if not (java_home / "bin" / "java").is_file() or not release.is_file():
        return None
    found = re.search(r'^JAVA_VERSION="(\d+)(?:\.(\d+))?', release.read_text(), re.MULTILINE)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def find_java_home() -> Path:
    """A JDK Hadoop 3.4 runs on: $YARN_ADAPT_JAVA_HOME, $JAVA_HOME, then /usr/lib/jvm."""
    for candidate in _java_candidates():
        if java_major(candidate) in SUPPORTED_JAVA:
            return candidate
    raise MiniClusterError(
        f"no Java {SUPPORTED_JAVA.start}-{SUPPORTED_JAVA.stop - 1} found; set {JAVA_ENV}"
    )


def _java_candidates() -> Iterator[Path]:
    for name in (JAVA_ENV, "JAVA_HOME"):
        value = os.environ.get(name)
        if value:
            yield Path(value)
    on_path = shutil.which("java")
    if on_path:
        yield Path(on_path).resolve().parents[1]
    for root in JVM_SEARCH_DIRS:
        if root.is_dir():
            # Prefer 17 (what the harness is tested on), then the rest newest first.
            yield from sorted(root.iterdir(), key=lambda p: ("17" not in p.name, p.name))
