#!/usr/bin/env bash
# Install what the yarn-adapt test suite needs on a fresh Debian/Ubuntu machine:
#   - a JDK Hadoop 3.4 runs on (17) and Maven, for the real-YARN mini cluster
#   - redis-server, chromium and chromium-driver, for the tracing and web-page tests
#   - libkrb5-dev and gcc (python-gssapi of the kerberos extra builds against MIT
#     Kerberos) and krb5-user (kinit/klist), for the Kerberized mini cluster tests
#   - the package itself with its test extras (pip install -e '.[test]')
#   - a C compiler and Python's headers, and the simulator's compiled core built from
#     the current sources (python -m yarn_adapt.sim.native --if-stale)
#   - the Hadoop jars of tests/hadoop/pom.xml, resolved once into ~/.cache/yarn-adapt
#   - the OpenTelemetry Java SDK's jars of tests/tracing/java/pom.xml, likewise
#   - the cgroup2 mount remounted with favordynmods (moves of processes between cgroups
#     then skip the kernel's RCU wait; see favour_dynamic_cgroup_moves)
#
# Idempotent: anything already present is left alone, so a second run takes seconds.
# Quiet on success; on failure it prints the failing step's output and exits non-zero.
# Run as root, or as a user with sudo. Environment:
#   PYTHON=python3.11   the interpreter to install into (default: python3)
#   SKIP_APT=1          do not touch system packages (e.g. in a prepared image)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
log="$(mktemp -t yarn-adapt-setup.XXXXXX)"
trap 'rm -f "$log"' EXIT

quietly() {
  # Run "$@" with its output in $log; show the output only if it fails.
  local what="$1"
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "tests/setup.sh: $what failed:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "tests/setup.sh: need root (or sudo) to run: $*" >&2
    exit 1
  fi
}

java_ok() {
  # A JDK 11..21 with javac is what Maven and the Hadoop 3.4 daemons need.
  local dir
  for dir in /usr/lib/jvm/*; do
    [ -x "$dir/bin/javac" ] || continue
    case "$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$dir/release" 2>/dev/null)" in
      11 | 17 | 21) return 0 ;;
    esac
  done
  return 1
}

missing_packages() {
  local wanted=(redis-server chromium chromium-driver)
  wanted+=(libkrb5-dev krb5-user gcc)
  command -v mvn >/dev/null 2>&1 || wanted+=(maven)
  java_ok || wanted+=(openjdk-17-jdk-headless)
  python_headers_ok || wanted+=(python3-dev)
  local package
  for package in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
      || echo "$package"
  done
}

python_headers_ok() {
  "$python" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}

install_system_packages() {
  [ "${SKIP_APT:-}" = 1 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "tests/setup.sh: no apt-get; install by hand: $*" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  quietly "apt-get update" as_root apt-get update -q
  quietly "apt-get install $*" as_root apt-get install -y -q --no-install-recommends "$@"
}

install_python_package() {
  # Skipped while pyproject.toml and the interpreter are the ones last installed for.
  local stamp_dir="${XDG_CACHE_HOME:-$HOME/.cache}/yarn-adapt"
  local key
  key="$(cat "$repo/pyproject.toml" <(command -v "$python") <(echo "$repo") | sha256sum | cut -c1-16)"
  [ -f "$stamp_dir/pip-$key" ] && "$python" -c "import yarn_adapt" 2>/dev/null && return 0
  quietly "pip install -e '.[test]'" \
    "$python" -m pip install --disable-pip-version-check -q -e "$repo[test]"
  mkdir -p "$stamp_dir"
  touch "$stamp_dir/pip-$key"
}

favour_dynamic_cgroup_moves() {
  # Each cgroup.procs write waits for an RCU grace period unless a cgroup hierarchy is
  # mounted with favordynmods (Linux 6.0+; the lock is global, so one mount is enough).
  # On a host whose CPUs are starved that wait took over 30 s and held the node agent's
  # tick in the kernel (docs/flakes.md); operators get the same advice
  # (docs/colocation.md, section 5). Left alone where the kernel has no such option.
  local mount_point
  grep -qE '^[^ ]+ [^ ]+ cgroup2? [^ ]*favordynmods' /proc/mounts && return 0
  mount_point="$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)"
  [ -n "$mount_point" ] || return 0
  as_root mount -o remount,favordynmods "$mount_point" 2>/dev/null \
    || echo "tests/setup.sh: this kernel has no favordynmods; cgroup moves may wait on RCU" >&2
}

main() {
  local missing
  missing="$(missing_packages | tr '\n' ' ')"
  if [ -n "${missing// /}" ]; then
    # shellcheck disable=SC2086  # one word per package
    install_system_packages $missing
  fi
  install_python_package
  favour_dynamic_cgroup_moves
  quietly "compiling the simulator's core (python -m yarn_adapt.sim.native)" \
    "$python" -m yarn_adapt.sim.native --if-stale
  quietly "resolving the Hadoop jars (tests/hadoop/pom.xml)" \
    "$python" -c "from yarn_adapt.minicluster import resolve_hadoop_jars; resolve_hadoop_jars()"
  quietly "resolving the OpenTelemetry Java SDK's jars (tests/tracing/java/pom.xml)" \
    "$python" -c "import sys, pathlib, yarn_adapt.minicluster.jars as jars
jars.resolve_maven_jars(pathlib.Path(sys.argv[1]))" "$repo/tests/tracing/java/pom.xml"
}

main
