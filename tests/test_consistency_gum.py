"""Consistency of noisy marginals and the GUM record updater."""
import itertools
import json

import numpy as np
import pandas as pd
import pytest

from dpsyn.lib.estimation.consistency import make_consistent
from dpsyn.lib.estimation.gum import GumOptions, gum
from dpsyn.lib.records.marginals import compact_codes, count_marginal
from dpsyn.lib.estimation.measurement import Target
from helpers import FIXTURES


@pytest.fixture(scope="module")
def adult():
    domain = json.loads((FIXTURES / "adult-domain.json").read_text())
    codes = pd.read_csv(FIXTURES / "adult.csv.gz")[list(domain)].to_numpy(np.int32)
    return list(domain), codes, tuple(domain.values())


def two_way(codes, sizes, cols):
    return [((a, b), count_marginal(codes[:, [a, b]], (sizes[a], sizes[b]))) for a, b in cols]


def mean_tvd(records, targets):
    return np.mean([0.5 * np.abs(count_marginal(records[:, list(t.query)], t.noisy.shape) / len(records)
                                 - t.noisy / t.noisy.sum()).sum() for t in targets])


def test_consistency_makes_noisy_marginals_agree(adult):
    names, codes, sizes = adult
    rng = np.random.default_rng(0)
    cols = list(itertools.combinations(range(8), 2))
    noisy = [Target((names[a], names[b]), m + rng.normal(0, 30, m.shape), 30.0)
             for (a, b), m in two_way(codes, sizes, cols)]
    noisy.append(Target((names[0],), count_marginal(codes[:, [0]], (sizes[0],)) + rng.normal(0, 5, sizes[0]), 5.0))
    out = make_consistent(noisy)
    totals = [v.sum() for v in out]
    assert max(totals) - min(totals) < 1e-6
    assert min(v.min() for v in out) >= 0
    for name in names[:8]:
        projections = [v.sum(axis=tuple(i for i, a in enumerate(m[0]) if a != name)) for v, m in zip(out, noisy)
                       if name in m[0]]
        assert max(np.abs(p - projections[0]).max() for p in projections) < 1e-6


def test_consistency_leaves_noise_free_marginals_unchanged(adult):
    names, codes, sizes = adult
    exact = [Target((names[a], names[b]), m, 1.0)
             for (a, b), m in two_way(codes, sizes, itertools.combinations(range(6), 2))]
    for t, v in zip(exact, make_consistent(exact)):
        assert np.abs(v - t.noisy).max() < 1e-6, t.query


def test_gum_reaches_exact_two_way_marginals_from_random_start(adult):
    _, codes, sizes = adult
    targets = [Target(*t) for t in two_way(codes, sizes, itertools.combinations(range(len(sizes)), 2))]
    rng = np.random.default_rng(0)
    start = np.column_stack([rng.integers(0, s, len(codes)) for s in sizes]).astype(np.int32)
    assert mean_tvd(start, targets) > 0.5
    out = gum(start, sizes, targets, np.random.default_rng(1))
    assert mean_tvd(out, targets) < 0.02
    assert ((out >= 0) & (out < np.array(sizes))).all()


def test_gum_is_deterministic_under_a_seed(adult):
    _, codes, sizes = adult
    targets = [Target(*t) for t in two_way(codes[:2000], sizes, [(0, 1), (1, 2)])]
    start = codes[2000:4000].copy()
    opts = GumOptions(iterations=3)
    a = gum(start, sizes, targets, np.random.default_rng(5), opts)
    b = gum(start, sizes, targets, np.random.default_rng(5), opts)
    assert np.array_equal(a, b) and not np.array_equal(a, start)


def test_gum_keeps_compact_records_compact_with_the_same_moves(adult):
    """Records given as compact_codes gives them come back in that layout, moved exactly as int32 ones are;
    the given array is left as it was."""
    _, codes, sizes = adult
    targets = [Target(*t) for t in two_way(codes[:2000], sizes, [(0, 1), (1, 2)])]
    start = codes[2000:4000].astype(np.int32)
    compact = compact_codes(start, sizes)
    before = compact.copy()
    plain = gum(start, sizes, targets, np.random.default_rng(5), GumOptions(iterations=3))
    out = gum(compact, sizes, targets, np.random.default_rng(5), GumOptions(iterations=3))
    assert plain.dtype == np.int32 and plain.flags.c_contiguous
    assert out.dtype == compact.dtype and out.flags.f_contiguous
    assert np.array_equal(out, plain) and np.array_equal(compact, before)


def test_gum_moves_records_only_out_of_over_full_cells():
    """One marginal, one pass, alpha 1: every record of a cell at or under its target stays as it was,
    and the cells end at their (integer) targets."""
    rng = np.random.default_rng(3)
    start = np.column_stack([rng.integers(0, 4, 1000), rng.integers(0, 3, 1000)]).astype(np.int32)
    target = np.array([400.0, 300.0, 200.0, 100.0])
    out = gum(start, (4, 3), [Target((0,), target)], np.random.default_rng(4),
              GumOptions(iterations=1, alpha=1.0, duplicate_share=0.5))
    counts = np.bincount(start[:, 0], minlength=4)
    for c in np.flatnonzero(counts <= target):
        kept = start[:, 0] == c
        assert (out[kept] == start[kept]).all()
    assert np.array_equal(np.bincount(out[:, 0], minlength=4), target.astype(int))
