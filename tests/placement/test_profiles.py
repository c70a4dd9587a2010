"""Interference profiles learned from measurements: averaging, collaborative
filtering completion from a few probes."""

from __future__ import annotations

import numpy as np
import pytest

from yarn_adapt.placement.profiles import (
    RESOURCES,
    CautiousProfiles,
    CompletionSettings,
    ProbeMeasurement,
    ProfileError,
    complete_matrix,
    learn_profiles,
    measurements_of,
)
from yarn_adapt.placement.workloads import synthetic_classes


def test_fully_measured_classes_keep_their_mean_measurements() -> None:
    truth = synthetic_classes(3, seed=4)
    probes = [*measurements_of(truth), ProbeMeasurement("c00", "cpu", "caused", 0.0)]
    book = learn_profiles(probes)
    assert book.profile("c01") == truth["c01"]
    assert book.profile("c00").caused[0] == (truth["c00"].caused[0] + 0.0) / 2
    assert {p.source for p in book.profiles.values()} == {"measured"}


def test_a_few_probes_are_completed_from_similar_classes() -> None:
    truth = synthetic_classes(16, seed=5)
    known = {k: v for k, v in truth.items() if k != "c00"}
    target = truth["c00"]
    probes = measurements_of(known) + [
        ProbeMeasurement("c00", resource, kind, getattr(target, kind)[i])
        for i, resource in enumerate(RESOURCES)
        for kind in ("sensitivity", "caused")
        if (i + (kind == "caused")) % 3 == 0  # 4 of the 10 entries
    ]
    book = learn_profiles(probes, CompletionSettings(seed=1))
    learned = book.profile("c00")
    assert learned.source == "completed"
    column_mean = np.mean([p.as_row() for p in known.values()], axis=0)
    error = np.abs(learned.as_row() - target.as_row()).mean()
    baseline = np.abs(column_mean - target.as_row()).mean()
    assert error < baseline  # better than the default of an unseen class


def test_completion_recovers_a_low_rank_matrix() -> None:
    rng = np.random.default_rng(0)
    full = np.clip(rng.uniform(0, 1, (12, 2)) @ rng.uniform(0, 1, (2, 10)) / 2, 0, 1)
    observed = full.copy()
    hidden = rng.random(full.shape) < 0.25
    observed[hidden] = np.nan
    completed = complete_matrix(observed, CompletionSettings(rank=2, epochs=300, seed=0))
    error = np.abs(completed[hidden] - full[hidden]).mean()
    baseline = np.abs(np.nanmean(observed, axis=0)[np.nonzero(hidden)[1]] - full[hidden]).mean()
    assert error < 0.5 * baseline
    assert ((completed >= 0) & (completed <= 1)).all()


def test_caution_reads_only_uncertain_profiles_as_more_sensitive() -> None:
    truth = synthetic_classes(6, seed=2)
    known = {k: v for k, v in truth.items() if k != "c05"}
    probes = [*measurements_of(known), ProbeMeasurement("c05", "cpu", "caused", 0.4)]
    book = learn_profiles(probes)
    cautious = CautiousProfiles(book, margin=0.2)
    assert cautious.profile("c00") == book.profile("c00")  # measured: as it is
    completed, wary = book.profile("c05"), cautious.profile("c05")
    assert completed.source == wary.source == "completed"
    assert wary.caused == completed.caused
    expected = np.minimum(np.array(completed.sensitivity) + 0.2, 1.0)
    assert np.allclose(wary.sensitivity, expected)
    assert cautious.profile("never-seen").sensitivity > book.default.sensitivity
    assert CautiousProfiles(book, margin=0.0).profile("c05") == completed
    assert cautious.revision("c05") == book.revision("c05")
    with pytest.raises(ProfileError, match="caution margin"):
        CautiousProfiles(book, margin=1.5)
