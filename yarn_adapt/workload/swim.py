"""SWIM Facebook traces (FB-2009_*.tsv, FB-2010_*.tsv) -> Workload.

A row is ``job id, submit s, gap s, map input bytes, shuffle bytes, reduce output
bytes`` (tab-separated, no header; extra columns such as input paths are ignored).
Task counts follow SWIM's replay generator (workloadSuite/GenerateReplayScript.java,
SWIMProjectUCB/SWIM) rule for rule:

* bytes are scaled by ``target machines / original machines`` (Java long division);
* input is floored at the payload of a 64 MB SequenceFile (57,303,500 B), shuffle
  and output at 1 KB;
* maps = ceil(input / partition payload), one partition file of
  ``sequence_file_payload(block size)`` bytes per map;
* reduces = round((shuffle + output) / bytes per reduce), at least 1, and if that
  exceeds the target cluster's machines it becomes ``machines // 5``.

The trace has no durations; :class:`SwimDurationModel` turns the bytes each task of
the replay moves into seconds (constants and their sources are in its docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from yarn_adapt.errors import InputError, TraceError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.resources import Resources
from yarn_adapt.model.workload import JobFeatures, JobSpec, TaskSpec, Workload
from yarn_adapt.workload._io import MalformedRows, numbered_lines
from yarn_adapt.workload.queues import BEST_EFFORT_PRIORITIES, QueueMapping

MIB = 1 << 20
MB = 1_000_000
SWIM_MIN_SHUFFLE_OUTPUT_BYTES = 1024
FB_2009_MACHINES = 600
FB_2010_MACHINES = 3000
_Number = TypeVar("_Number", int, float)

# SequenceFile layout SWIM assumes (GenerateReplayScript.java, after Hadoop's
# SequenceFile.Writer): 96 B header, 100 B usable per record serialized as 116 B, and
# a 20 B sync marker after every >= 2000 B of records.
_SEQ_HEADER = 96
_SEQ_RECORD_USABLE = 100
_SEQ_RECORD_SERIALIZED = 116
_SEQ_MARKER = 20
_SEQ_RECORDS_PER_MARKER = math.ceil(2000 / _SEQ_RECORD_SERIALIZED)
_SEQ_MARKER_SPACING = _SEQ_RECORDS_PER_MARKER * _SEQ_RECORD_SERIALIZED


def _sequence_file_size(records: int) -> int:
    body = _SEQ_HEADER + records * _SEQ_RECORD_SERIALIZED
    return body + (body // _SEQ_MARKER_SPACING) * _SEQ_MARKER


def sequence_file_payload(block_bytes: int) -> int:
    """Usable bytes of the largest SequenceFile that fits in one HDFS block (SWIM's
    ``maxSeqFile``): 57,303,500 for a 64 MiB block."""
    spacing = float(_SEQ_MARKER_SPACING)
    estimate = (block_bytes - _SEQ_HEADER - _SEQ_MARKER * _SEQ_HEADER / spacing) * spacing
    records = math.ceil(estimate / (spacing + _SEQ_MARKER) / _SEQ_RECORD_SERIALIZED)
    while _sequence_file_size(records) > block_bytes:
        records -= 1
    return records * _SEQ_RECORD_USABLE


SWIM_MIN_INPUT_BYTES = sequence_file_payload(64 * MIB)


@dataclass(frozen=True)
class SwimReplaySettings:
    """GenerateReplayScript's arguments. Defaults replay the trace unscaled on its
    original cluster with 64 MiB blocks and 64 MiB of shuffle+output per reduce (the
    values of SWIM's own example scripts, workloadSuite/scriptsTest)."""

    original_machines: int = FB_2009_MACHINES
    target_machines: int | None = None
    hdfs_block_bytes: int = 64 * MIB
    bytes_per_reduce: int = 64 * MIB
    # AdaptiveConfig §4.2: "each container has 1 CPU core and 2 GB memory".
    task_resources: Resources = field(default_factory=lambda: Resources(2048, 1))
    # A row whose replay would run more tasks is refused (a malformed row): the
    # FB-2009 sample's largest job has 131,777 maps; 10**18 input bytes would be
    # 17 billion. The whole trace may hold at most max_tasks_per_trace tasks.
    max_tasks_per_job: int = 1_000_000
    max_tasks_per_trace: int = 50_000_000

    def __post_init__(self) -> None:
        if self.original_machines <= 0 or self.machines <= 0:
            raise InputError("SWIM cluster sizes must be positive")
        if self.hdfs_block_bytes < 4096 or self.bytes_per_reduce <= 0:
            raise InputError("SWIM block size must be >= 4096 B and bytes per reduce > 0")
        if self.max_tasks_per_job <= 0 or self.max_tasks_per_trace <= 0:
            raise InputError("SWIM task limits must be positive")

    @property
    def machines(self) -> int:
        """Machines of the cluster the replay targets."""
        return self.original_machines if self.target_machines is None else self.target_machines

    @property
    def partition_bytes(self) -> int:
        return sequence_file_payload(self.hdfs_block_bytes)

    @classmethod
    def for_trace(cls, path: Path, **overrides: object) -> SwimReplaySettings:
        """Settings whose original cluster size matches the trace named by ``path``
        (FB-2010: 3,000 machines; otherwise FB-2009's 600)."""
        machines = FB_2010_MACHINES if "FB-2010" in path.name else FB_2009_MACHINES
        return cls(original_machines=machines, **overrides)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SwimShape:
    """What the SWIM replay of one trace row runs: task counts and the bytes each
    task moves (WorkGen gives each map a whole partition and scales its output by
    shuffle/input; each reduce's output by output/shuffle)."""

    maps: int
    reduces: int
    map_input_bytes: float
    map_output_bytes: float
    reduce_input_bytes: float
    reduce_output_bytes: float


def swim_shape(
    input_bytes: int, shuffle_bytes: int, output_bytes: int, settings: SwimReplaySettings
) -> SwimShape:
    """Task counts and per-task bytes of one row, exactly as GenerateReplayScript does."""
    scaled = [
        b * settings.machines // settings.original_machines
        for b in (input_bytes, shuffle_bytes, output_bytes)
    ]
    replay_input = max(scaled[0], SWIM_MIN_INPUT_BYTES)
    shuffle = max(scaled[1], SWIM_MIN_SHUFFLE_OUTPUT_BYTES)
    output = max(scaled[2], SWIM_MIN_SHUFFLE_OUTPUT_BYTES)
    partition = settings.partition_bytes
    maps = -(-replay_input // partition)
    reduces = swim_reduce_count(shuffle + output, settings)
    map_output = partition * shuffle / replay_input
    reduce_input = map_output * maps / reduces if reduces else 0.0
    return SwimShape(
        maps, reduces, partition, map_output, reduce_input, reduce_input * output / shuffle
    )


def swim_reduce_count(shuffle_plus_output: int, settings: SwimReplaySettings) -> int:
    """round(bytes / bytes-per-reduce) (Java Math.round), at least 1; above the
    target machine count it becomes machines // 5 (may be 0 below 5 machines)."""
    reduces = max(1, math.floor(shuffle_plus_output / settings.bytes_per_reduce + 0.5))
    return settings.machines // 5 if reduces > settings.machines else reduces


@dataclass(frozen=True)
class SwimDurationModel:
    """Seconds a task of a SWIM replay runs once it has its container.

    ``map = task_startup_s + input / hdfs_read + map output / local_disk_write``
    ``reduce = task_startup_s + shuffle in / shuffle_fetch + output / hdfs_write``
    each times ``exp(N(0, noise_sigma))`` drawn per task from the load seed.

    Constants and where they come from:

    * ``hdfs_read_mb_s = 66``, ``hdfs_write_mb_s = 40``: per-client DFSIO throughput
      on Yahoo!'s Hadoop clusters, K. Shvachko, "HDFS scalability: the limits to
      growth", ;login: 35(2), 2010 (the era and hardware class of FB-2009).
    * ``local_disk_write_mb_s = 66``: map output is spilled to one local disk (no
      replication), so it is taken at the same single-disk rate as an HDFS read.
    * ``shuffle_fetch_mb_s = 62.5``: a 1 Gbit/s NIC (125 MB/s) shared by the two
      reduce slots per node of Hadoop 0.20's default
      (``mapred.tasktracker.reduce.tasks.maximum = 2``; the Rumen sample below still
      shows ``mapreduce.tasktracker.reduce.tasks.maximum = 2``).
    * ``task_startup_s = 5``: JVM launch, task set-up and commit. No public per-task
      figure exists for FB-2009, so this is an assumption, cross-checked on real
      data: Apache Hadoop's SLS sample ``2jobs2min-rumen-jh.json`` has 192 TeraGen
      maps each writing 416.7 MB to HDFS in 11.1-47.0 s (median 19.6 s); this model
      gives 5 + 416.7/40 = 15.4 s, inside that range (tests assert it). On today's
      hardware the fixed part is smaller: the real Hadoop 3.4 SleepJob recorded in
      tests/fixtures/jhs ran 0.5 s sleeps in map attempts of 2.9-3.1 s.
    * ``noise_sigma = 0.25``: spread of identical tasks' runtimes. Measured on the
      same sample: the log-runtime standard deviation of the two TeraGen jobs' maps
      is 0.30 and 0.16. Set 0 for deterministic durations.
    """

    task_startup_s: float = 5.0
    hdfs_read_mb_s: float = 66.0
    hdfs_write_mb_s: float = 40.0
    local_disk_write_mb_s: float = 66.0
    shuffle_fetch_mb_s: float = 62.5
    noise_sigma: float = 0.25

    def map_seconds(self, shape: SwimShape) -> float:
        """A map's runtime before noise."""
        reading = shape.map_input_bytes / MB / self.hdfs_read_mb_s
        return (
            self.task_startup_s + reading + shape.map_output_bytes / MB / self.local_disk_write_mb_s
        )

    def reduce_seconds(self, shape: SwimShape) -> float:
        """A reduce's runtime before noise."""
        fetching = shape.reduce_input_bytes / MB / self.shuffle_fetch_mb_s
        return (
            self.task_startup_s + fetching + shape.reduce_output_bytes / MB / self.hdfs_write_mb_s
        )


@dataclass(frozen=True)
class _SwimRow:
    job_id: str
    submit_s: float
    input_bytes: int
    shuffle_bytes: int
    output_bytes: int


def load_swim(
    path: str | Path,
    *,
    lenient: bool = False,
    settings: SwimReplaySettings | None = None,
    durations: SwimDurationModel | None = None,
    queues: QueueMapping | None = None,
    seed: int = 0,
) -> Workload:
    """Load a SWIM Facebook trace.

    Each job gets a random best-effort priority 2..8 (AdaptiveConfig §4.2) and its
    queue from ``queues`` (default: the paper's two queues, 2-5 -> q1, 6-8 -> q2).
    Priorities and duration noise come from ``seed`` and the row's line number, so
    the same file and seed always give the same workload.
    """
    trace = Path(path)
    settings = settings or SwimReplaySettings.for_trace(trace)
    builder = _SwimJobBuilder(
        settings, durations or SwimDurationModel(), queues or QueueMapping.paper_two_queues(), seed
    )
    rows = MalformedRows(str(trace), lenient=lenient)
    jobs: list[JobSpec] = []
    seen: set[str] = set()
    tasks = 0
    for line_no, line in numbered_lines(trace, rows):
        if not line.strip():
            continue
        try:
            row = _parse_row(line, seen)
            tasks += _checked_task_count(row, settings, tasks)
        except ValueError as exc:
            rows.reject(TraceError(str(trace), line_no, str(exc)))
            continue
        seen.add(row.job_id)
        jobs.append(builder.job(row, line_no))
    jobs.sort(key=lambda job: job.submit_s)
    return Workload(tuple(jobs), source=f"swim:{trace.name}", skipped_rows=rows.summarize())


def _parse_row(line: str, seen: set[str]) -> _SwimRow:
    fields = line.rstrip("\r\n").split("\t")
    if len(fields) < 6:
        raise ValueError(f"expected 6 tab-separated columns, found {len(fields)}")
    job_id = fields[0].strip()
    if not job_id:
        raise ValueError("empty job id")
    if job_id in seen:
        raise ValueError(f"duplicate job id {job_id!r}")
    submit_s = _non_negative(float, fields[1], "submit time")
    _non_negative(float, fields[2], "inter-job gap")
    sizes = [
        _non_negative(int, text, name)
        for text, name in zip(fields[3:6], ("input", "shuffle", "output"), strict=True)
    ]
    return _SwimRow(job_id, submit_s, *sizes)


def _checked_task_count(row: _SwimRow, settings: SwimReplaySettings, so_far: int) -> int:
    """The row's task count, if within the limits (else ``ValueError``): a row with
    absurd sizes is refused before any of its tasks is made."""
    shape = swim_shape(row.input_bytes, row.shuffle_bytes, row.output_bytes, settings)
    count = shape.maps + shape.reduces
    if count > settings.max_tasks_per_job:
        raise ValueError(
            f"job {row.job_id!r} would run {count:,} tasks ({shape.maps:,} maps), more than "
            f"the {settings.max_tasks_per_job:,} a job may have (max_tasks_per_job)"
        )
    if so_far + count > settings.max_tasks_per_trace:
        raise ValueError(
            f"the trace reaches {so_far + count:,} tasks at job {row.job_id!r}, more than "
            f"the {settings.max_tasks_per_trace:,} a trace may have (max_tasks_per_trace)"
        )
    return count


def _non_negative(kind: type[_Number], text: str, what: str) -> _Number:
    try:
        value = kind(text.strip())
    except ValueError:
        raise ValueError(f"{what} {text.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} {text.strip()} is negative or not finite")
    return value


class _SwimJobBuilder:
    def __init__(
        self,
        settings: SwimReplaySettings,
        durations: SwimDurationModel,
        queues: QueueMapping,
        seed: int,
    ) -> None:
        self.settings = settings
        self.durations = durations
        self.queues = queues
        self.seed = seed
        self.priorities = np.asarray(BEST_EFFORT_PRIORITIES)

    def job(self, row: _SwimRow, line_no: int) -> JobSpec:
        rng = np.random.default_rng([self.seed, line_no])
        priority = int(rng.choice(self.priorities))
        shape = swim_shape(row.input_bytes, row.shuffle_bytes, row.output_bytes, self.settings)
        maps = self._tasks(TaskType.MAP, self.durations.map_seconds(shape), shape.maps, rng)
        reduces = self._tasks(
            TaskType.REDUCE, self.durations.reduce_seconds(shape), shape.reduces, rng
        )
        return JobSpec(
            row.job_id,
            row.submit_s,
            self.queues.queue_for(priority),
            maps + reduces,
            features=self._features(row, shape, priority),
        )

    def _tasks(
        self, kind: TaskType, seconds: float, count: int, rng: np.random.Generator
    ) -> tuple[TaskSpec, ...]:
        resources = self.settings.task_resources
        if self.durations.noise_sigma == 0:
            # One shared spec per stage: FB-2010 unscaled has 20 million tasks.
            return (TaskSpec(kind, seconds, resources),) * count
        noise = rng.lognormal(0.0, self.durations.noise_sigma, size=count)
        return tuple(TaskSpec(kind, float(s), resources) for s in (seconds * noise).tolist())

    def _features(self, row: _SwimRow, shape: SwimShape, priority: int) -> JobFeatures:
        scale = self.settings.machines, self.settings.original_machines
        scaled = [
            b * scale[0] // scale[1] for b in (row.input_bytes, row.shuffle_bytes, row.output_bytes)
        ]
        return JobFeatures(
            input_bytes=scaled[0],
            shuffle_bytes=scaled[1],
            output_bytes=scaled[2],
            priority=priority,
            map_tasks=shape.maps,
            reduce_tasks=shape.reduces,
        )
