"""Raking and systematic draws (lib/estimation/raking.py)."""
import numpy as np
import pytest

from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.estimation.raking import balanced_groups, rake, rake_groups, stratified_order, systematic_draw


def test_raking_reaches_reachable_margins_and_keeps_the_records_association():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 5000)
    b = (a + (rng.random(5000) < 0.2)) % 3  # b follows a in 80% of records
    records = np.column_stack([a, b]).astype(np.int32)
    targets = [Target((0,), np.array([10.0, 30, 60])), Target((1,), np.array([50.0, 25, 25]))]
    weights = rake(records, targets, passes=50)
    assert weights.sum() == pytest.approx(1.0)
    for (j,), target, *_ in targets:
        assert np.bincount(records[:, j], weights, minlength=3) == pytest.approx(target / target.sum(), abs=1e-6)
    agree = weights[a == b].sum()
    assert agree > 0.5  # the association stays (independent draws at these margins would agree 28% of the time)


def test_raking_leaves_out_a_value_no_record_holds():
    records = np.array([[0], [0], [1], [1]], dtype=np.int32)
    weights = rake(records, [Target((0,), np.array([1.0, 1.0, 2.0]))], passes=3)
    assert weights.tolist() == pytest.approx([0.25] * 4)
    assert rake(records, [Target((0,), np.zeros(3))], passes=3).tolist() == pytest.approx([0.25] * 4)


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


def test_group_shares_split_the_records_as_the_groups_marginals_say():
    """rake_groups: rows sum to 1, the groups' totals follow the counts and, where the targets are the
    true split, each group's expected 1-way marginals match them; a record that no group may take starts
    over from the counts' shares."""
    rng = np.random.default_rng(0)
    group = rng.integers(0, 3, 6000)
    records = np.column_stack([(rng.random(6000) < 0.2 + 0.3 * group).astype(int),
                               np.where(rng.random(6000) < 0.5, group, rng.integers(0, 3, 6000))])
    margins = []
    for j in range(2):
        target = np.zeros((3, records[:, j].max() + 1))
        np.add.at(target, (group, records[:, j]), 1)
        margins.append(Target((j,), target))
    counts = np.bincount(group).astype(float)
    shares = rake_groups(records, margins, counts, 30)
    assert shares.sum(axis=1) == pytest.approx(1.0)
    assert shares.sum(axis=0) == pytest.approx(counts, rel=1e-3)
    for (j,), target, *_ in margins:
        expected = np.stack([np.bincount(records[:, j], shares[:, g], minlength=target.shape[1]) for g in range(3)])
        assert expected == pytest.approx(target, abs=1.0)
    only = [Target((0,), np.array([[1.0, 0.0], [1.0, 5.0]])), Target((1,), np.array([[1.0, 5.0], [1.0, 0.0]]))]
    none = rake_groups(np.array([[0, 0], [1, 1]]), only, np.array([1.0, 3.0]), 5)  # (1, 1): group 1, then group 0
    assert none[1].sum() == pytest.approx(1.0) and (none[1] > 0).all()  # started over, not stuck at zero


def test_balanced_groups_keep_each_stratum_near_its_expected_counts():
    """balanced_groups over a stratified order: every group's count in every stratum is within 2 of the
    sum of its shares there (independent draws are off by about 10 here), and no record goes to a group
    its shares rule out."""
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 4, (4000, 2))
    shares = rng.random((4, 4, 3))[codes[:, 0], codes[:, 1]]
    shares[codes[:, 0] == 3, 2] = 0.0
    shares /= shares.sum(axis=1, keepdims=True)
    groups = balanced_groups(shares, stratified_order(len(codes), codes, np.random.default_rng(2)))
    assert not (groups[codes[:, 0] == 3] == 2).any()
    for a in range(4):
        for b in range(4):
            cell = (codes[:, 0] == a) & (codes[:, 1] == b)
            assert np.abs(np.bincount(groups[cell], minlength=3) - shares[cell].sum(axis=0)).max() <= 2
