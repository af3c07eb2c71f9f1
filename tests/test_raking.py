"""Raking and systematic draws (lib/raking.py)."""
import numpy as np
import pytest

from lib.raking import rake, systematic_draw


def test_raking_reaches_reachable_margins_and_keeps_the_records_association():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 5000)
    b = (a + (rng.random(5000) < 0.2)) % 3  # b follows a in 80% of records
    records = np.column_stack([a, b]).astype(np.int32)
    targets = [(0, np.array([10.0, 30, 60])), (1, np.array([50.0, 25, 25]))]
    weights = rake(records, targets, passes=50)
    assert weights.sum() == pytest.approx(1.0)
    for j, target in targets:
        assert np.bincount(records[:, j], weights, minlength=3) == pytest.approx(target / target.sum(), abs=1e-6)
    agree = weights[a == b].sum()
    assert agree > 0.5  # the association stays (independent draws at these margins would agree 28% of the time)


def test_raking_leaves_out_a_value_no_record_holds():
    records = np.array([[0], [0], [1], [1]], dtype=np.int32)
    weights = rake(records, [(0, np.array([1.0, 1.0, 2.0]))], passes=3)
    assert weights.tolist() == pytest.approx([0.25] * 4)
    assert rake(records, [(0, np.zeros(3))], passes=3).tolist() == pytest.approx([0.25] * 4)


@pytest.mark.parametrize("n", [1, 7, 100, 1000])
def test_systematic_draw_counts_are_within_one_of_their_expectation(n):
    weights = np.random.default_rng(1).random(50) ** 3
    rows = systematic_draw(weights, n, np.random.default_rng(2))
    counts = np.bincount(rows, minlength=50)
    expected = n * weights / weights.sum()
    assert len(rows) == n
    assert (counts >= np.floor(expected) - 1e-9).all() and (counts <= np.ceil(expected) + 1e-9).all()


def test_a_stratified_draw_gives_each_leading_stratum_its_expected_count_within_one():
    rng = np.random.default_rng(3)
    strata = rng.integers(0, 4, (2000, 1)).astype(np.int32)
    weights = rng.random(2000)
    rows = systematic_draw(weights, 500, np.random.default_rng(4), strata=strata)
    expected = 500 * np.bincount(strata[:, 0], weights) / weights.sum()
    assert np.abs(np.bincount(strata[rows, 0], minlength=4) - expected).max() <= 1
