"""The command line's conventions as data, and a check that walks every command
(docs/CLI.md says the same in words; ``tests/cli/test_conventions.py`` runs the check,
so a command added later is held to them too).

1. **One meaning per option name.** :data:`MEANINGS` fixes the metavar (what the value
   is) of every shared name: ``--config`` is yarn-adapt's TOML and nothing else,
   a scheduler XML is ``--scheduler-file``, an RM address is ``--rm URL`` (host:port
   accepted), ``--min-improvement`` a fraction with one default.
2. **Seconds everywhere.** An option whose name ends in a time word
   (:data:`TIME_WORDS`) takes ``SECONDS``; no name or help speaks of minutes, hours
   or milliseconds.
3. **``--json`` wherever the output is data**: every command has it except those in
   :data:`NOT_DATA` (which say why).
4. **Long work reports progress** on stderr (N/M and ETA) and takes ``--quiet``: the
   commands in :data:`LONG_WORK`.
5. The root has ``--version``.
6. **JSON keys carry their unit** (:func:`json_key_problems`, docs/CLI.md): a
   number that is not a whole count ends in its unit (:data:`JSON_UNITS`: ``_s``
   seconds, ``_epoch_s`` Unix time, ``_percent`` 0-100, ``_ratio`` a fraction 0-1,
   ``_coverage`` the share of stated ranges that held, ...) or is a score named in
   :data:`JSON_SCORES`; no unit sits in the middle of a key. ``tests/cli/test_json_keys.py``
   walks every ``--json`` output.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import click

SECONDS = "SECONDS"


@dataclass(frozen=True)
class Meaning:
    metavar: str | None  # None: click's own (INTEGER for an int)
    what: str
    default: object = None  # checked when not None


MEANINGS: dict[str, Meaning] = {
    "--config": Meaning("TOML", "yarn-adapt's settings file (conf/yarn-adapt.toml)"),
    "--scheduler-file": Meaning("XML", "a capacity-scheduler.xml or Fair allocation file"),
    "--running": Meaning("XML", "the scheduler file the RM runs now"),
    "--target": Meaning("XML", "the scheduler file the RM reads, which an apply rewrites"),
    "--rm": Meaning("URL", "an RM web address: http(s)://host:port or host:port"),
    "--history": Meaning("URL", "the JobHistory web address"),
    "--interval": Meaning(SECONDS, "the tuning interval"),
    "--min-improvement": Meaning("FRACTION", "the gain a group needs (0.05 = 5 %)", 0.05),
    "--seed": Meaning(None, "the random seed, 0 everywhere", 0),
}

TIME_WORDS = frozenset(
    {"interval", "window", "timeout", "at", "pace", "step", "delay", "period", "duration",
     "until", "cooldown", "wait", "age", "horizon", "after", "every", "backoff"}
)  # fmt: skip
"""An option named ``--...-<word>`` (or ``--<word>``) with one of these words is a
duration (or a moment), given in seconds."""

OTHER_UNITS = re.compile(r"\b(minutes?|mins?|hours?|hrs?|milliseconds?|millis|ms)\b", re.I)
OTHER_UNIT_SUFFIXES = frozenset({"min", "mins", "minutes", "hour", "hours", "h", "ms", "millis"})

NOT_DATA: dict[str, str] = {
    "serve": "runs the service (--once prints its round as JSON)",
    "demo": "a tour; its last line is a JSON summary",
    "agent run": "runs the node agent until stopped (logs on stderr, figures on /metrics)",
    "agent restore": "restores the limits a previous agent run left and says which",
}
"""Commands whose output is not data, by path (``config diff``), with the reason."""

LONG_WORK = frozenset({"bench", "propose", "demo"})
"""Commands that can run for minutes: they report progress and take --quiet."""


def walk(command: click.Command, path: str = "") -> Iterator[tuple[str, click.Command]]:
    """Every leaf command with its path (``config validate``)."""
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, f"{path} {name}".strip())
    else:
        yield path, command


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


def _long_names(option: click.Option) -> list[str]:
    return [o for o in option.opts if o.startswith("--")]


def violations(root: click.Group) -> list[str]:
    """Every way a command breaks the conventions, one line each."""
    found: list[str] = []
    if not any("--version" in _long_names(o) for o in _options(root)):
        found.append("yarn-adapt: no --version")
    for path, command in walk(root):
        found += _check_command(path, command)
    return found


def _check_command(path: str, command: click.Command) -> list[str]:
    found = []
    names = {n for o in _options(command) for n in _long_names(o)}
    if "--json" not in names and path.split(" ")[0] not in NOT_DATA and path not in NOT_DATA:
        found.append(f"{path}: prints data but has no --json")
    if path.split(" ")[0] in LONG_WORK and "--quiet" not in names:
        found.append(f"{path}: long work without --quiet")
    for option in _options(command):
        found += _check_option(path, option)
    return found


def _check_option(path: str, option: click.Option) -> list[str]:
    found = []
    metavar = option.metavar
    for name in _long_names(option):
        meaning = MEANINGS.get(name)
        if meaning is not None and metavar != meaning.metavar:
            found.append(
                f"{path} {name}: metavar {metavar!r}, but {name} is {meaning.what} "
                f"({meaning.metavar})"
            )
        if (
            meaning is not None
            and meaning.default is not None
            and option.default != meaning.default
        ):
            found.append(f"{path} {name}: default {option.default!r}, expected {meaning.default!r}")
        if name.rsplit("-", 1)[-1] in TIME_WORDS and not option.is_flag and metavar != SECONDS:
            found.append(f"{path} {name}: a time, so its metavar must be {SECONDS}")
        if name.rsplit("-", 1)[-1] in OTHER_UNIT_SUFFIXES:
            found.append(f"{path} {name}: a unit other than seconds in the name")
    if not option.is_flag and option.help and OTHER_UNITS.search(option.help):
        found.append(f"{path} {'/'.join(option.opts)}: help speaks of a unit other than seconds")
    return found


# --------------------------------------------------------------------------- JSON keys

JSON_UNITS = (
    "_s", "_epoch_s", "_ms", "_us", "_percent", "_ratio", "_coverage", "_mb", "_bytes",
    "_per_s", "_factor", "_vcores", "_cores", "_millicores",
)  # fmt: skip
"""How a key names the unit of its number (a request's latency may be ``_ms`` or
``_us``; everything about jobs, rounds and configurations is in seconds)."""

JSON_SCORES = frozenset(
    {"alpha", "risk", "raw", "normalized", "wsp", "wfp", "share", "weight", "v", "error"}
)
"""Dimensionless scores known by name (TopoSch's risk terms, a Fair weight)."""

_MID_UNIT = re.compile(r"_(ms|us|sec|secs|seconds|minutes|hours)_")
_BAD_SUFFIX = re.compile(r"_(sec|secs|seconds|min|mins|minutes|h|hours|millis|msec)$")


def json_key_problems(value: object, where: str = "") -> list[str]:
    """Every key of ``value`` (a parsed JSON document) that breaks the rule, by path."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}"
            found += _key_problems(str(key), item, path)
            found += json_key_problems(item, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += json_key_problems(item, f"{where}[{index}]")
    return found


def _key_problems(key: str, item: object, path: str) -> list[str]:
    numbers = _numbers(item)
    if not numbers:
        return []
    if _MID_UNIT.search(key) or _BAD_SUFFIX.search(key):
        return [f"{path}: a unit in the middle of the key, or one other than {JSON_UNITS}"]
    fractional = any(not float(n).is_integer() for n in numbers)
    plural = key.endswith(tuple(f"{unit}s" for unit in JSON_UNITS if not unit.endswith("s")))
    if fractional and not (key.endswith(JSON_UNITS) or plural) and key not in JSON_SCORES:
        return [f"{path}: {numbers[0]!r} is no whole count: the key must end in its unit"]
    return []


def _numbers(item: object) -> list[float]:
    if isinstance(item, bool):
        return []
    if isinstance(item, int | float):
        return [float(item)]
    if (
        isinstance(item, list)
        and item
        and all(isinstance(n, int | float) and not isinstance(n, bool) for n in item)
    ):
        return [float(n) for n in item]
    return []
