"""The configuration space: sizes of the paper's candidate sets, decoding, walking."""

from __future__ import annotations

import numpy as np
import pytest

from yarn_adapt.errors import SettingsError
from yarn_adapt.tuning.space import (
    Quantization,
    Scheduler,
    SpaceSettings,
    paper_space,
    quantize,
    quantized_space,
    table2_space,
)

TWO = ("root.q1", "root.q2")
FOUR = ("root.q1", "root.q2", "root.q3", "root.q4")


@pytest.mark.parametrize(
    ("scheduler", "queues", "size"),
    [
        (Scheduler.CAPACITY, TWO, 5),
        (Scheduler.FAIR, TWO, 15),
        (Scheduler.CAPACITY, FOUR, 9),
        (Scheduler.FAIR, FOUR, 27),
    ],
)
def test_paper_candidate_sets_have_the_papers_sizes(
    scheduler: Scheduler, queues: tuple[str, ...], size: int
) -> None:
    space = paper_space(scheduler, "root", queues)
    settings = {space.decode(p) for p in space.points()}
    assert space.size == size
    assert len(settings) == size  # no two points decode to the same configuration


def test_paper_capacity_splits_are_the_sixths_of_section_2_3_1() -> None:
    space = paper_space(Scheduler.CAPACITY, "root", TWO)
    firsts = [space.decode(p).queues[0].share for p in space.points()]
    assert firsts == [16.67, 33.33, 50.0, 66.67, 83.33]
    for point in space.points():
        assert sum(q.share for q in space.decode(point).queues) == pytest.approx(100.0)


def test_four_queue_capacity_set_holds_both_arrangements() -> None:
    space = paper_space(Scheduler.CAPACITY, "root", FOUR)
    vectors = {tuple(q.share for q in space.decode(p).queues) for p in space.points()}
    assert (8.33, 8.33, 41.67, 41.67) in vectors
    assert (8.33, 41.67, 8.33, 41.67) in vectors
    assert (25.0, 25.0, 25.0, 25.0) in vectors


def test_table2_space_sizes() -> None:
    assert table2_space("root", TWO).size == 9
    assert table2_space("root", FOUR).size == 18


@pytest.mark.parametrize("mode", list(Quantization))
def test_quantize_gives_d_sorted_values_in_range(mode: Quantization) -> None:
    values = quantize(10, 90, 7, mode, np.random.default_rng(3))
    assert len(values) == 7
    assert list(values) == sorted(values)
    assert all(10 <= v <= 90 for v in values)


def test_equal_quantization_includes_both_ends() -> None:
    assert quantize(10, 90, 5) == (10.0, 30.0, 50.0, 70.0, 90.0)


def test_random_quantization_is_deterministic_per_seed() -> None:
    first = quantize(0, 1, 4, Quantization.RANDOM, np.random.default_rng(7))
    again = quantize(0, 1, 4, Quantization.RANDOM, np.random.default_rng(7))
    assert first == again


def test_every_point_of_a_general_grid_decodes_to_a_valid_split() -> None:
    settings = SpaceSettings(d=4, tune_maximum=True, per_queue_policy=True)
    space = quantized_space(Scheduler.CAPACITY, "root", ("root.a", "root.b", "root.c"), settings)
    assert space.size == 4**3 * 3**3 * 2**3
    rng = np.random.default_rng(0)
    for _ in range(200):
        setting = space.decode(space.random_point(rng))
        assert sum(q.share for q in setting.queues) == pytest.approx(100.0, abs=1e-6)
        assert all(q.maximum is not None and q.maximum >= q.share for q in setting.queues)


def test_box_keeps_categorical_dimensions_whole() -> None:
    space = quantized_space(Scheduler.FAIR, "root", TWO, SpaceSettings(d=9))
    box = space.box_around((8, 1), 0.34)
    assert box[0] == range(6, 9)  # three of nine values, shifted to stay inside
    assert box[1] == range(3)
    rng = np.random.default_rng(1)
    assert all(space.random_point(rng, box)[0] in box[0] for _ in range(50))


def test_neighbours_are_within_radius_on_ordered_dimensions() -> None:
    space = quantized_space(Scheduler.FAIR, "root", TWO, SpaceSettings(d=9))
    found = set(space.neighbours((4, 0), 1))
    assert (4, 0) not in found
    assert {p[0] for p in found} == {3, 4, 5}
    assert {p[1] for p in found} == {0, 1, 2}


def test_points_outside_the_space_are_refused() -> None:
    space = paper_space(Scheduler.CAPACITY, "root", TWO)
    with pytest.raises(SettingsError, match="outside the space"):
        space.decode((5,))
