"""``load_trace``: one entry point for every supported trace format, so a bench's
``--trace PATH`` can take any of them."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yarn_adapt.errors import InputError, TraceError
from yarn_adapt.model.workload import Workload
from yarn_adapt.workload._io import open_text
from yarn_adapt.workload.google import load_google
from yarn_adapt.workload.queues import QueueMapping, assign_queues
from yarn_adapt.workload.sls import load_rumen, load_sls
from yarn_adapt.workload.swim import load_swim

FORMATS = ("swim", "google", "sls", "rumen")
_SNIFF_CHARS = 64 * 1024
_RUMEN_KEYS = re.compile(r'"(jobID|mapTasks|reduceTasks)"\s*:')
_SLS_KEYS = re.compile(r'"(job\.tasks|job\.start\.ms|job\.id|num\.nodes|num\.racks)"\s*:')
_SYNTH_KEYS = re.compile(r'"(workloads|job_classes|num_jobs)"\s*:')


def detect_format(path: str | Path) -> str:
    """``swim``, ``google``, ``sls`` or ``rumen``, from the name and the first 64 KB."""
    trace = Path(path)
    if trace.is_dir() or "job_events" in trace.name or "task_events" in trace.name:
        return "google"
    head = _head(trace)
    if head.lstrip().startswith(("{", "[")):
        return _json_format(trace, head)
    first = next((line for line in head.splitlines() if line.strip()), "")
    if len(first.split("\t")) >= 6:
        return "swim"
    if len(first.split(",")) in (8, 13):
        return "google"
    raise TraceError(
        str(trace),
        1,
        "cannot tell the trace format: not a SWIM .tsv (6 or more tab-separated columns), "
        "a Google 2011 CSV or directory, or an SLS / Rumen JSON file",
    )


def load_trace(
    path: str | Path,
    fmt: str | None = None,
    *,
    lenient: bool = False,
    seed: int = 0,
    queues: QueueMapping | None = None,
    **options: Any,
) -> Workload:
    """Load ``path`` in format ``fmt`` (detected when ``None``).

    ``seed`` matters only where the loader draws random numbers (SWIM's priorities
    and duration noise). ``queues`` maps priorities to queues: SWIM and Google use
    it directly (default: the paper's two queues); for SLS and Rumen, which name
    their queues, it replaces the trace's queues when given. Other keyword
    arguments go to the format's loader.
    """
    kind = fmt or detect_format(path)
    if kind == "swim":
        return load_swim(path, lenient=lenient, seed=seed, queues=queues, **options)
    if kind == "google":
        return load_google(path, lenient=lenient, queues=queues, **options)
    loaders: dict[str, Callable[..., Workload]] = {"sls": load_sls, "rumen": load_rumen}
    if kind not in loaders:
        raise InputError(f"unknown trace format {kind!r}: use one of {', '.join(FORMATS)}")
    workload = loaders[kind](path, lenient=lenient, **options)
    return assign_queues(workload, queues) if queues is not None else workload


def _head(path: Path) -> str:
    with open_text(path) as stream:
        try:
            return stream.read(_SNIFF_CHARS)
        except (EOFError, OSError, UnicodeDecodeError) as exc:
            raise TraceError(str(path), 1, f"unreadable: {exc}") from exc


def _json_format(path: Path, head: str) -> str:
    if _RUMEN_KEYS.search(head):
        return "rumen"
    if _SLS_KEYS.search(head):
        return "sls"
    if _SYNTH_KEYS.search(head):
        raise InputError(
            f"{path}: an SLS SYNTH description (distributions, not jobs) is not supported"
        )
    raise TraceError(str(path), 1, "JSON without SLS (job.tasks) or Rumen (jobID, mapTasks) keys")
