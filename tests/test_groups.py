"""Per-group synthesis helpers (method/groups.py)."""
import numpy as np
import pytest

from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.tuning import T
from dpsyn.method.groups import (GUM_MOVES, OWN_RAKE, OWN_REWRITE, RAKE, REWRITE, GroupFit, GroupTargets, assigned_rows, base_size, draw_rows,
                                 own_pools, partition_rows, synthesize_groups)


@pytest.mark.parametrize("available, n", [(10, 4), (10, 10), (10, 11), (10, 35), (1, 3)])
def test_drawn_rows_repeat_no_row_more_than_needed(available, n):
    rows = draw_rows(available, n, np.random.default_rng(0))
    counts = np.bincount(rows, minlength=available)
    assert len(rows) == n and rows.min() >= 0 and rows.max() < available
    assert counts.max() - counts.min() <= 1  # every row n // available or that plus one times
    assert counts.max() == -(-n // available)


def test_a_table_below_the_base_cap_gets_one_base_record_per_row():
    assert base_size(48_842.6) == 48_842
    assert base_size(3e6) == 100_000
    assert base_size(12.0) == 1_000


def test_a_rich_base_has_four_records_a_row_only_where_that_stays_small():
    assert base_size(54_301.2, per_row=T.groups_rich_base_per_row) == 217_204
    assert base_size(100_000.0, per_row=T.groups_rich_base_per_row) == 100_000  # 400,000 would slow every round: one a row
    assert base_size(12.0, per_row=T.groups_rich_base_per_row) == 1_000


@pytest.mark.parametrize("available, counts", [(12, [5, 4, 3]), (12, [5, 4, 0, 1]), (5, [4, 4, 4])])
def test_groups_share_the_base_out_between_them(available, counts):
    parts = partition_rows(available, np.array(counts), np.random.default_rng(0))
    assert [len(p) for p in parts] == counts
    used = np.bincount(np.concatenate(parts), minlength=available)
    assert used.max() - used.min() <= 1  # every base record used as evenly as the counts allow
    if sum(counts) == available:
        assert (used == 1).all()


@pytest.mark.parametrize("fit", [GUM_MOVES, REWRITE, RAKE])
def test_groups_do_not_depend_on_jobs_and_keep_the_base_marginal_of_columns_they_do_not_refit(fit):
    rng = np.random.default_rng(0)
    sizes = (3, 4, 2)
    base = np.column_stack([np.zeros(600, int), rng.integers(0, 4, 600), rng.integers(0, 2, 600)]).astype(np.int32)
    per_group = np.array([250, 0, 350])
    one_way = {1: np.array([[100.0, 50, 50, 50], [0, 0, 0, 0], [50, 100, 100, 100]])}
    targets = [Target((1,), np.array([150.0, 150, 150, 150])), Target((2,), np.array([300.0, 300]))]
    outs = [synthesize_groups(base, per_group, [0], GroupTargets(targets, one_way), sizes, np.random.default_rng(5),
                              GroupFit(fit, jobs, own_targets_only=True)) for jobs in (1, 2)]
    assert np.array_equal(outs[0], outs[1])
    out = outs[0]
    assert np.bincount(out[:, 0], minlength=3).tolist() == [250, 0, 350]
    if fit == REWRITE:  # column 2 has no per-group marginal: no group moves it, and together they hold the base
        assert np.bincount(out[:, 2], minlength=2).tolist() == np.bincount(base[:, 2], minlength=2).tolist()


def test_raked_groups_are_whole_base_records_drawn_toward_the_groups_own_marginals():
    rng = np.random.default_rng(0)
    sizes = (2, 4, 4)
    first = rng.integers(0, 4, 4000)
    base = np.column_stack([np.zeros(4000, int), first, (first + (rng.random(4000) < 0.1)) % 4]).astype(np.int32)
    per_group = np.array([1000, 3000])
    one_way = {1: np.array([[400.0, 300, 200, 100], [300, 300, 1200, 1200]])}
    targets = [Target((1, 2), np.full((4, 4), 250.0))]
    out = synthesize_groups(base, per_group, [0], GroupTargets(targets, one_way), sizes, np.random.default_rng(5),
                            GroupFit(RAKE, own_targets_only=True))
    assert np.bincount(out[:, 0], minlength=2).tolist() == [1000, 3000]
    held = {tuple(r) for r in base[:, 1:]}
    assert all(tuple(r) in held for r in out[:, 1:])  # no record the base does not hold
    for g in (0, 1):
        shares = np.bincount(out[out[:, 0] == g, 1], minlength=4) / per_group[g]
        assert shares == pytest.approx(one_way[1][g] / one_way[1][g].sum(), abs=0.002)


def test_own_raked_groups_draw_only_their_own_base_records_and_fit_their_own_marginals():
    """OWN_RAKE (the group columns fitted in the base): a group's rows come from the base records of its
    group, raked toward its own 1-way marginals and rewritten the rest of the way; a group the base
    never drew draws from the whole base.  Independent of jobs."""
    rng = np.random.default_rng(0)
    sizes = (3, 4, 4)
    group = rng.integers(0, 2, 6000)  # the base never drew group 2
    first = (rng.integers(0, 4, 6000) + 2 * group) % 4
    base = np.column_stack([group, first, (first + (rng.random(6000) < 0.1)) % 4]).astype(np.int32)
    per_group = np.array([1000, 3000, 500])
    one_way = {1: np.array([[400.0, 300, 200, 100], [300, 300, 1200, 1200], [125, 125, 125, 125]])}
    pools = own_pools(base, per_group, [0], sizes)
    assert [n for _, n in pools] == [1000, 3000, 500]
    assert all((base[p, 0] == g).all() for g, (p, _) in enumerate(pools[:2])) and len(pools[2][0]) == len(base)
    outs = [synthesize_groups(base, per_group, [0], GroupTargets([], one_way), sizes, np.random.default_rng(5),
                              GroupFit(OWN_RAKE, jobs, pieces=pools)) for jobs in (1, 2)]
    assert np.array_equal(outs[0], outs[1])
    out = outs[0]
    assert np.bincount(out[:, 0], minlength=3).tolist() == [1000, 3000, 500]
    for g in (0, 1):
        own = {tuple(r) for r in base[base[:, 0] == g, 1:]}
        rows = out[out[:, 0] == g]
        kept = np.mean([tuple(r) in own for r in rows[:, 1:]])
        assert kept > 0.95  # whole records of its own group, but for the few the rewriting moved
        shares = np.bincount(rows[:, 1], minlength=4) / per_group[g]
        assert shares == pytest.approx(one_way[1][g] / one_way[1][g].sum(), abs=0.002)


def test_assigned_rows_give_each_group_its_size_from_the_records_its_marginals_favour():
    """assigned_rows: exact sizes; each base record in at most one group while the groups together need
    no more than the base holds; each group's own 1-way marginal close to its target."""
    rng = np.random.default_rng(0)
    base = np.column_stack([np.zeros(6000, int), rng.integers(0, 4, 6000), rng.integers(0, 2, 6000)]).astype(np.int32)
    per_group = np.array([1000, 3000, 0, 1900])
    one_way = {1: np.array([[400.0, 300, 200, 100], [750, 750, 750, 750], [0, 0, 0, 0], [325, 425, 525, 625]])}
    pieces = assigned_rows(base, per_group, one_way, np.random.default_rng(3))
    assert [len(p) for p in pieces] == [1000, 3000, 1900]
    every = np.concatenate(pieces)
    assert len(np.unique(every)) == len(every)
    for rows, g in zip(pieces, (0, 1, 3)):
        shares = np.bincount(base[rows, 1], minlength=4) / per_group[g]
        assert shares == pytest.approx(one_way[1][g] / one_way[1][g].sum(), abs=0.02)
    outs = [synthesize_groups(base, per_group, [0], GroupTargets([], one_way), (4, 4, 2), np.random.default_rng(5),
                              GroupFit(OWN_REWRITE, jobs, pieces=pieces)) for jobs in (1, 2)]
    assert np.array_equal(outs[0], outs[1])
    assert np.bincount(outs[0][:, 0], minlength=4).tolist() == [1000, 3000, 0, 1900]
