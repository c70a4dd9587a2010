"""The checked predictions' log ratios, kept across restarts of the service.

The likely ranges are calibrated on how earlier predictions fared
(:mod:`yarn_adapt.service.proposers.intervals`). Kept only in memory, a restart would send the
ranges back to the wide prior and throw away what the checks had taught. So the
tuner's proposer keeps the latest :data:`~yarn_adapt.service.proposers.intervals.WINDOW` log
ratios in ``prediction-checks.json`` in the state directory, replaced atomically after
each round that checked something, and starts from them.

A file that cannot be read (damaged, another format) is set aside as
``prediction-checks.json.damaged`` and said in one log line naming the file and what
is wrong; the ranges then start from the prior. Nothing is trusted that cannot be
read, and nothing is deleted. A file that cannot be written is logged and the round
goes on: the calibration still holds in memory.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path

from yarn_adapt.errors import ConfigFileError
from yarn_adapt.service.proposers.intervals import WINDOW
from yarn_adapt.yarn.schedconf.xmlio import write_bytes_atomically

log = logging.getLogger(__name__)

FILE_NAME = "prediction-checks.json"
FORMAT_VERSION = 1


def checks_path(state_dir: Path) -> Path:
    return state_dir / FILE_NAME


def load_log_ratios(path: Path) -> tuple[float, ...]:
    """The log ratios ``path`` keeps (none when it does not exist or was set aside)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except OSError as exc:
        log.warning("%s: cannot read the checked predictions (%s); ranges start from the prior",
                    path, exc.strerror or exc)  # fmt: skip
        return ()
    try:
        return _parsed(text)
    except ValueError as exc:
        _set_aside(path, str(exc))
        return ()


def _parsed(text: str) -> tuple[float, ...]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a version {FORMAT_VERSION} record of checked predictions")
    ratios = document.get("log_ratios")
    if not isinstance(ratios, list):
        raise ValueError("log_ratios is not a list")
    for index, ratio in enumerate(ratios):
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
            raise ValueError(f"log_ratios[{index}] is not a number")
        if not math.isfinite(ratio):
            raise ValueError(f"log_ratios[{index}] is not finite")
    return tuple(float(r) for r in ratios[-WINDOW:])


def _set_aside(path: Path, problem: str) -> None:
    aside = path.with_name(path.name + ".damaged")
    try:
        path.replace(aside)
    except OSError as exc:
        log.warning("%s: %s, and it cannot be set aside (%s); ranges start from the prior",
                    path, problem, exc.strerror or exc)  # fmt: skip
        return
    log.warning("%s: %s; set aside as %s, ranges start from the prior", path, problem, aside.name)


def save_log_ratios(path: Path, ratios: Sequence[float]) -> None:
    """Keep the latest ``ratios`` in ``path`` (atomically; a failure is logged)."""
    document = {"version": FORMAT_VERSION, "log_ratios": [round(r, 6) for r in ratios[-WINDOW:]]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(path, (json.dumps(document) + "\n").encode("utf-8"))
    except (OSError, ConfigFileError) as exc:
        log.warning("%s: cannot keep the checked predictions (%s); they hold until a restart",
                    path, exc)  # fmt: skip
