"""SWIM Facebook traces: SWIM's task-count rules, the duration model, priorities."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from yarn_adapt.errors import InputError
from yarn_adapt.model.apps import TaskType
from yarn_adapt.model.workload import Workload
from yarn_adapt.workload import (
    SWIM_MIN_INPUT_BYTES,
    QueueMapping,
    SwimDurationModel,
    SwimReplaySettings,
    load_rumen,
    load_swim,
    sequence_file_payload,
    swim_shape,
)
from yarn_adapt.workload.swim import _sequence_file_size

from .conftest import FB_FIRST50, RUMEN_SAMPLE

MIB = 1 << 20

# -r values of SWIM's own generated replay scripts for these 50 rows
# (workloadSuite/scriptsTest/run-job-{0..49}.sh: 600 -> 10 machines, 64 MiB per reduce).
SWIM_SCRIPTS_REDUCES = [1] * 17 + [4] + [1] * 16 + [5, 1, 1, 2, 2, 2, 6] + [1] * 9


def test_sequence_file_payload_of_a_64_mib_block_is_swims_input_floor() -> None:
    assert sequence_file_payload(64 * MIB) == 57_303_500 == SWIM_MIN_INPUT_BYTES


@pytest.mark.parametrize("block", [4096, 1_000_000, 64 * MIB, 128 * MIB, 256 * MIB])
def test_sequence_file_payload_is_the_largest_file_that_fits(block: int) -> None:
    records = sequence_file_payload(block) // 100
    assert _sequence_file_size(records) <= block < _sequence_file_size(records + 1)


def test_reduce_counts_match_swims_generated_scripts() -> None:
    settings = SwimReplaySettings(
        original_machines=600, target_machines=10, bytes_per_reduce=64 * MIB
    )
    rows = [line.split("\t") for line in FB_FIRST50.read_text().splitlines()]
    reduces = [swim_shape(int(r[3]), int(r[4]), int(r[5]), settings).reduces for r in rows]
    assert reduces == SWIM_SCRIPTS_REDUCES


UNSCALED = SwimReplaySettings()
TEN_MACHINES = SwimReplaySettings(original_machines=600, target_machines=10)


@pytest.mark.parametrize(
    ("row", "settings", "maps", "reduces"),
    [
        # job0 of FB-2009: 740,773 B input floored to one 64 MB SequenceFile
        ((740_773, 2_339_561, 627_471), UNSCALED, 1, 1),
        # job17: ceil(10,274,791,099 / 57,303,500) = 180; round(16.6 GB / 64 MiB) = 248
        ((10_274_791_099, 13_024_975_762, 3_600_817_163), UNSCALED, 180, 248),
        # job17 on 10 machines: input 171,246,518 -> 3 maps; 277,096,548 B -> 4 reduces
        ((10_274_791_099, 13_024_975_762, 3_600_817_163), TEN_MACHINES, 3, 4),
        # no shuffle, no output: both floored at 1 KB -> round(2 KB / 64 MiB) = 0 -> 1
        ((0, 0, 0), UNSCALED, 1, 1),
        # 16.7 GB scaled shuffle = 248 reduces > 10 machines -> 10 // 5 = 2
        ((0, 10**12, 0), TEN_MACHINES, 1, 2),
        # exactly two partitions, and one byte more
        ((2 * 57_303_500, 0, 0), UNSCALED, 2, 1),
        ((2 * 57_303_500 + 1, 0, 0), UNSCALED, 3, 1),
    ],
)
def test_task_counts_follow_generate_replay_script(
    row: tuple[int, int, int], settings: SwimReplaySettings, maps: int, reduces: int
) -> None:
    shape = swim_shape(*row, settings)
    assert (shape.maps, shape.reduces) == (maps, reduces)


def test_reduce_cap_gives_zero_reduces_below_five_machines_as_swim_does() -> None:
    shape = swim_shape(0, 10**12, 0, SwimReplaySettings(original_machines=600, target_machines=4))
    assert shape.reduces == 0


def test_every_map_reads_one_whole_partition_and_reduces_split_the_map_output() -> None:
    shape = swim_shape(3 * 57_303_500, 6 * 57_303_500, 57_303_500, UNSCALED)
    assert shape.map_input_bytes == 57_303_500
    assert shape.maps * shape.map_output_bytes == pytest.approx(6 * 57_303_500)
    assert shape.reduces * shape.reduce_output_bytes == pytest.approx(57_303_500)


@pytest.mark.parametrize(
    "settings",
    [
        {"original_machines": 0},
        {"target_machines": -1},
        {"bytes_per_reduce": 0},
        {"hdfs_block_bytes": 100},
    ],
)
def test_bad_replay_settings_are_refused(settings: dict[str, int]) -> None:
    with pytest.raises(InputError):
        SwimReplaySettings(**settings)  # type: ignore[arg-type]


def test_fb_2010_traces_come_from_a_3000_machine_cluster() -> None:
    assert (
        SwimReplaySettings.for_trace(Path("FB-2010_samples_24_times_1hr_0.tsv")).original_machines
        == 3000
    )
    assert (
        SwimReplaySettings.for_trace(Path("FB-2009_samples_24_times_1hr_1.tsv")).original_machines
        == 600
    )


# --------------------------------------------------------------------------- the real trace


def test_fb2009_has_5894_jobs_in_submission_order(fb2009: Workload) -> None:
    assert len(fb2009) == 5894
    submits = [job.submit_s for job in fb2009.jobs]
    assert submits == sorted(submits)
    assert (fb2009.jobs[0].id, submits[0], submits[-1]) == ("job0", 49.0, 86404.0)
    assert fb2009.skipped_rows == 0


def test_fb2009_task_counts_match_an_independent_count(shared_traces: Path) -> None:
    # Percentiles (nearest rank) computed independently in research/traces.md §1
    # with SWIM's formulas, 64 MB blocks and 1 GB per reduce.
    settings = SwimReplaySettings(bytes_per_reduce=1 << 30)
    workload = load_swim(shared_traces / "FB-2009_samples_24_times_1hr_0.tsv", settings=settings)
    maps = [len(job.maps) for job in workload.jobs]
    reduces = [len(job.reduces) for job in workload.jobs]
    percentiles = (50, 90, 99, 100)
    assert [int(np.percentile(maps, q, method="inverted_cdf")) for q in percentiles] == [
        1,
        11,
        1441,
        131_777,
    ]
    assert [int(np.percentile(reduces, q, method="inverted_cdf")) for q in percentiles] == [
        1,
        3,
        66,
        542,
    ]


def test_fb2009_single_map_jobs_are_those_under_the_input_floor(
    shared_traces: Path, fb2009: Workload
) -> None:
    text = (shared_traces / "FB-2009_samples_24_times_1hr_0.tsv").read_text()
    rows = [line.split("\t") for line in text.splitlines()]
    under_floor = sum(1 for r in rows if int(r[3]) <= SWIM_MIN_INPUT_BYTES)
    assert sum(1 for job in fb2009.jobs if len(job.maps) == 1) == under_floor
    assert under_floor / len(rows) > 0.85  # "86% have < 64 MB input"


def test_fb2009_priorities_are_uniform_on_2_to_8_and_map_to_the_papers_queues(
    fb2009: Workload,
) -> None:
    priorities = [job.features.priority for job in fb2009.jobs]
    shares = {p: priorities.count(p) / len(priorities) for p in range(2, 9)}
    assert set(priorities) == set(range(2, 9))
    assert all(0.12 < share < 0.165 for share in shares.values())
    assert all(job.queue == ("q1" if job.features.priority <= 5 else "q2") for job in fb2009.jobs)


def test_fb2009_jobs_finish_within_21_minutes_when_never_queued(fb2009: Workload) -> None:
    # AdaptiveConfig §2.3.1: 98.79% of Facebook jobs complete within 21 minutes
    # *including* queueing; unqueued runtimes (longest map + longest reduce) must
    # not be slower than that.
    def runtime(maps: tuple[float, ...], reduces: tuple[float, ...]) -> float:
        return max(maps) + max(reduces, default=0.0)

    runtimes = [
        runtime(tuple(t.duration_s for t in j.maps), tuple(t.duration_s for t in j.reduces))
        for j in fb2009.jobs
    ]
    assert sum(1 for r in runtimes if r <= 21 * 60) / len(runtimes) >= 0.9879


# --------------------------------------------------------------------------- durations


def test_noise_free_durations_are_the_documented_formula() -> None:
    model = SwimDurationModel(noise_sigma=0.0)
    workload = load_swim(FB_FIRST50, durations=model)
    job0 = workload.jobs[0]
    assert job0.maps[0].duration_s == pytest.approx(5.0 + 57.3035 / 66 + 2_339_561 / 1e6 / 66)
    reduce_in, reduce_out = 2_339_561, 627_471
    assert job0.reduces[0].duration_s == pytest.approx(
        5.0 + reduce_in / 1e6 / 62.5 + reduce_out / 1e6 / 40
    )


def test_startup_and_write_rate_reproduce_real_teragen_maps() -> None:
    # Each TeraGen map of Hadoop's SLS sample writes 416.7 MB to HDFS.
    real = [t.duration_s for job in load_rumen(RUMEN_SAMPLE).jobs for t in job.tasks]
    model = SwimDurationModel()
    modelled = model.task_startup_s + 416_666_700 / 1e6 / model.hdfs_write_mb_s
    assert min(real) <= modelled <= max(real)
    assert 0.67 < modelled / statistics.median(real) < 1.5


def test_noise_spreads_identical_tasks_by_the_stated_sigma(fb2009: Workload) -> None:
    single = [
        job.maps[0].duration_s
        for job in fb2009.jobs
        if len(job.maps) == 1 and job.features.shuffle_bytes == 0
    ]
    logs = [math.log(d) for d in single]
    assert len(single) > 1000
    assert statistics.pstdev(logs) == pytest.approx(0.25, abs=0.02)


def test_same_seed_same_workload_other_seed_other_draws() -> None:
    first, again, other = (load_swim(FB_FIRST50, seed=s) for s in (7, 7, 8))
    assert first == again
    assert [j.features.priority for j in first.jobs] != [j.features.priority for j in other.jobs]
    assert [j.tasks for j in first.jobs] != [j.tasks for j in other.jobs]


def test_tasks_use_the_papers_container_and_stages_in_order() -> None:
    job = load_swim(FB_FIRST50).jobs[17]
    assert {t.resources for t in job.tasks} == {SwimReplaySettings().task_resources}
    kinds = [t.kind for t in job.tasks]
    assert kinds == sorted(kinds, key=lambda k: k is TaskType.REDUCE)


def test_four_queue_mapping_is_honoured() -> None:
    workload = load_swim(FB_FIRST50, queues=QueueMapping.paper_four_queues())
    expected = {2: "q1", 3: "q1", 4: "q2", 5: "q2", 6: "q3", 7: "q3", 8: "q4"}
    assert all(job.queue == expected[job.features.priority] for job in workload.jobs)


def test_extra_columns_such_as_input_paths_are_ignored(tmp_path: Path) -> None:
    with_paths = tmp_path / "FB-2010_withInputPaths.tsv"
    lines = FB_FIRST50.read_text().splitlines()
    with_paths.write_text("".join(f"{line}\tinputPath{i}\t\t\n" for i, line in enumerate(lines)))
    assert [j.tasks for j in load_swim(with_paths, settings=UNSCALED).jobs] == [
        j.tasks for j in load_swim(FB_FIRST50, settings=UNSCALED).jobs
    ]
