"""The search-scale benchmark's parts: the §4.5.1 sizes, the refined §4.3 spaces and
their RRS settings, settings parsing, and a tuning round built from a real SWIM
sample and answered by tuner.propose."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from yarn_adapt.bench import BenchOptions
from yarn_adapt.bench import search_scale as bench
from yarn_adapt.errors import SettingsError
from yarn_adapt.tuning.apply import groups_of
from yarn_adapt.tuning.proposal import validate
from yarn_adapt.tuning.space import Scheduler
from yarn_adapt.yarn.schedconf.issues import yarn_refuses

FB_SAMPLE = (
    Path(__file__).parents[1] / "fixtures/workload/FB-2009_samples_24_times_1hr_0_first50jobs.tsv"
)
KINDS = {
    "capacity-2": bench.GroupKind(Scheduler.CAPACITY, 2),
    "capacity-4": bench.GroupKind(Scheduler.CAPACITY, 4),
    "fair-2": bench.GroupKind(Scheduler.FAIR, 2),
    "fair-4": bench.GroupKind(Scheduler.FAIR, 4),
}


def test_ten_sizes_from_300_to_12000_nodes_and_10_to_500_groups() -> None:
    sizes = bench.FULL_SIZES
    assert len(sizes) == 10
    assert (sizes[0], sizes[-1]) == ((300, 10), (12_000, 500))
    assert all(b[0] > a[0] and b[1] > a[1] for a, b in itertools.pairwise(sizes))


@pytest.mark.parametrize(
    ("label", "points", "planned", "proposition"),
    [
        # ten times the §4.3 set; RRS from one point of that set down to a tenth of it
        ("capacity-2", 50, 84, 83),
        ("capacity-4", 100, 160, 156),  # §4.3's four-queue Capacity set has 9, not 10
        ("fair-2", 150, 268, 267),
        ("fair-4", 300, 492, 488),
    ],
)
def test_refined_spaces_and_their_rrs_settings(
    label: str, points: int, planned: int, proposition: int
) -> None:
    kind = KINDS[label]
    space = bench.refined_paper_space(kind, "root.g0")
    settings = bench.rrs_settings(kind)
    assert space.size == points
    assert len({space.decode(p) for p in space.points()}) == points
    assert (settings.planned_samples, round(settings.proposition_samples)) == (planned, proposition)


def test_refined_splits_stay_in_the_papers_range() -> None:
    space = bench.refined_paper_space(KINDS["capacity-2"], "root.g0")
    firsts = [space.decode(p).queues[0].share for p in space.points()]
    assert min(firsts) == pytest.approx(100 / 6, abs=0.01)
    assert max(firsts) == pytest.approx(500 / 6, abs=0.01)


@pytest.mark.parametrize(
    ("extra", "labels"),
    [
        ({}, ["capacity-2", "capacity-4", "fair-2", "fair-4"]),
        ({"scheduler": "fair"}, ["fair-2", "fair-4"]),
        ({"scheduler": "capacity", "queues": "4"}, ["capacity-4"]),
    ],
)
def test_group_kinds_from_settings(extra: dict[str, str], labels: list[str]) -> None:
    settings = bench._settings(BenchOptions(extra=extra))
    assert [k.label for k in settings.kinds] == labels


@pytest.mark.parametrize(
    ("text", "sizes"),
    [("1", [(300, 10)]), ("2", [(300, 10), (1600, 64)]), ("10-10", [(12_000, 500)])],
)
def test_sizes_setting(text: str, sizes: list[tuple[int, int]]) -> None:
    assert list(bench._settings(BenchOptions(extra={"sizes": text})).sizes) == sizes


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"scheduler": "yarn"},
            "search-scale: --set scheduler=yarn: expected one of capacity, fair, both, mix",
        ),
        ({"full": "some"}, "search-scale: --set full=some: expected one of all, largest, no"),
        ({"queues": "3"}, "search-scale: --set queues=3: expected one of 2, 4, mix"),
        ({"levels": "1"}, "search-scale: --set levels=1: expected a whole number 2-1000"),
        ({"sizes": "11"}, "search-scale: --set sizes=11: expected N or I-J within 1-10"),
        ({"sizes": "3-2"}, "search-scale: --set sizes=3-2: expected N or I-J within 1-10"),
        ({"sizes": "x"}, "search-scale: --set sizes=x: expected N or I-J within 1-10"),
        (
            {"colour": "red"},
            "search-scale: unknown --set colour (known: executor, flat, full, levels, queues, "
            "rescored, scale_jobs, scheduler, sizes, window_s)",
        ),
        (
            {"scale_jobs": "maybe"},
            "search-scale: --set scale_jobs=maybe: expected yes or no (true/false, 1/0)",
        ),
    ],
)
def test_bad_settings_are_one_line_errors(extra: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        bench._settings(BenchOptions(extra=extra))
    assert str(raised.value) == message


@pytest.mark.parametrize("scheduler", [Scheduler.CAPACITY, Scheduler.FAIR])
def test_a_round_is_what_the_service_tunes_and_propose_answers_it(scheduler: Scheduler) -> None:
    """Four groups cut from the first 50 FB-2009 jobs (their submissions span ~20
    minutes, so 5-minute windows): one configuration of the scheduler, every group
    triggered, its jobs in its own leaves; the fast pass and the full one both give
    proposals YARN accepts, and the loss between them is measured alike."""
    options = BenchOptions(trace=FB_SAMPLE, seed=2, extra={"window_s": "300", "levels": "2"})
    settings = bench._settings(options)
    loaded = bench._TraceCache(FB_SAMPLE, seed=2, scale_jobs=True).for_size(400, 4)
    built = bench.build_round((100, 4), scheduler, settings, loaded)
    groups = groups_of(built.config)
    assert [g.parent for g in groups] == [f"root.g{i}" for i in range(4)]
    leaves = [leaf for g in groups for leaf in g.leaf_names]
    assert len(leaves) == len(set(leaves))
    assert {j.job.queue.rsplit(".", 1)[0] for j in built.state.start.jobs} <= {
        g.parent for g in groups
    }
    fast = bench._timed(built, built.settings)[1]
    assert set(fast.triggered) == {g.parent for g in groups}
    assert not yarn_refuses(validate(fast.config, built.config))
    full = bench._timed(built, bench.full_search(built.settings))[1]
    assert math.isfinite(bench.latency_loss(built, fast, full))
    assert bench.predicted_latency(built, fast.config) > 0


def test_a_swim_trace_is_replayed_for_each_groups_share_of_the_cluster() -> None:
    """SWIM's own scaling: 12,000 nodes for 500 groups is 24 machines a group, so bytes
    (and task counts) shrink 600/24-fold; arrivals and the number of jobs stay."""
    scaled = bench._TraceCache(FB_SAMPLE, seed=1, scale_jobs=True).for_size(12_000, 500).later[2]
    original = bench._TraceCache(FB_SAMPLE, seed=1, scale_jobs=False).for_size(12_000, 500).later[2]
    assert [j.submit_s for j in scaled.jobs] == [j.submit_s for j in original.jobs]
    big = max(range(len(original.jobs)), key=lambda i: len(original.jobs[i].maps))
    assert len(original.jobs[big].maps) >= 10
    assert len(scaled.jobs[big].maps) <= len(original.jobs[big].maps) / 10
    assert all(len(s.maps) <= len(o.maps) for s, o in zip(scaled.jobs, original.jobs, strict=True))


def test_other_formats_are_replayed_as_they_are() -> None:
    sls = Path(__file__).parents[1] / "fixtures/workload/inputsls.json"
    cache = bench._TraceCache(sls, seed=1, scale_jobs=True)
    assert not cache.swim
    assert cache.for_size(300, 10) is cache.for_size(12_000, 500)


def test_a_loss_figure_is_json_whatever_the_predictions() -> None:
    """A group both passes leave starving is left out of the loss; a fast pass that
    starves a group the full search does not is 'unbounded'; JSON has no NaN."""
    assert bench._loss_figure(math.nan) is None
    assert bench._loss_figure(None) is None
    assert bench._loss_figure(math.inf) == "unbounded"
    assert bench._loss_figure(-9.64612) == -9.646
