"""Records moved toward target counts (lib/estimation/record_fit.py), as rap uses it on the records it draws
from its relaxed table."""
import numpy as np

from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.estimation.record_fit import RecordFit, fit_records
from dpsyn.lib.estimation.relaxed import RelaxedQuery

SIZES = (2, 3)


def counts(codes: np.ndarray, values: np.ndarray, fit: Target) -> np.ndarray:
    """The records' counts (shares) for one fit's query, as lib/privacy/queries.Intervals and Marginal count."""
    target = fit.query
    cells = np.ravel_multi_index([codes[:, c] for c in target.by], [SIZES[c] for c in target.by]) \
        if target.by else np.zeros(len(codes), np.int64)
    slot = np.zeros(len(codes), np.int64)
    if target.columns:
        x = values[:, list(target.columns)]
        slot = np.searchsorted(np.asarray(target.cuts), np.nan_to_num(x) @ np.asarray(target.direction), side="left")
        slot[np.isnan(x).any(axis=1)] = len(target.cuts) + 1
    out = np.zeros((fit.noisy.shape[0], target.slots))
    np.add.at(out, (cells, slot), 1.0 / len(codes))
    return out


def case(n: int = 2000, seed: int = 0):
    """Two numeric columns, uniform and independent of a binary code (categorical column 0, which
    stays fixed); targets that tie column 0 to the code (low values for code 0, high for code 1),
    ask column 1 to sit near 1 - column 0, and categorical column 1 (3 codes, uniform) to copy
    column 0 (codes 0 and 2)."""
    rng = np.random.default_rng(seed)
    values = rng.random((n, 2))
    values[rng.random(n) < 0.05, 1] = np.nan
    code = rng.integers(0, 2, n)
    codes = np.column_stack([code, rng.integers(0, 3, n)])
    cuts = (0.25, 0.5, 0.75)
    by_code = np.zeros((2, 5))
    by_code[0, :2] = by_code[1, 2:4] = 0.25
    single = Target(RelaxedQuery((0,), (0,), (1.0,), cuts), by_code, weight=1.0)
    null_share = np.isnan(values[:, 1]).mean()
    total = np.zeros((1, 5))
    total[0, 1], total[0, 4] = 1 - null_share, null_share  # x0 + x1 in (0.85, 1.15]: one slot of cuts at its ends
    pair = Target(RelaxedQuery((), (0, 1), (2 ** -0.5, 2 ** -0.5), (0.85 * 2 ** -0.5, 1.15 * 2 ** -0.5, 2.0)), total, weight=0.5)
    copy = np.zeros((6, 1))
    copy[0, 0] = copy[5, 0] = 0.5  # (0, 0) and (1, 2)
    return codes, values, [single, pair, Target(RelaxedQuery((0, 1)), copy, weight=2.0)]


def fit(codes, values, targets, seed=1):
    return fit_records(codes, SIZES, values, targets, np.random.default_rng(seed), RecordFit(fixed=(0,)))


def loss(codes, values, targets) -> float:
    return sum(t.weight * float(((counts(codes, values, t) - t.noisy) ** 2).sum()) for t in targets)


def test_records_move_toward_the_targets_and_the_loss_never_rises():
    codes, values, targets = case()
    new_codes, fitted, before, after = fit(codes, values, targets)
    assert np.isclose(before, loss(codes, values, targets)) and np.isclose(after, loss(new_codes, fitted, targets))
    assert after < 0.05 * before
    for t, most in zip(targets, (0.05, 0.1, 0.05)):  # column 0 follows the code, column 1 its complement
        assert np.abs(counts(new_codes, fitted, t) - t.noisy).sum() < most


def test_fixed_columns_and_nulls_stay_and_values_stay_in_range_by_default():
    codes, values, targets = case()
    new_codes, fitted, _, _ = fit(codes, values, targets)
    assert np.array_equal(new_codes[:, 0], codes[:, 0])
    assert new_codes.min() >= 0 and new_codes[:, 1].max() < SIZES[1]
    assert np.array_equal(np.isnan(fitted), np.isnan(values))
    kept = fitted[~np.isnan(fitted)]
    assert kept.min() >= 0.0 and kept.max() <= 1.0


def test_seeded_fits_repeat_and_the_inputs_are_not_changed():
    codes, values, targets = case()
    copies = codes.copy(), values.copy()
    a, b = fit(codes, values, targets, seed=3), fit(codes, values, targets, seed=3)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1], equal_nan=True)
    assert np.array_equal(codes, copies[0]) and np.array_equal(values, copies[1], equal_nan=True)


def test_what_no_target_reads_is_left_alone():
    codes, values, targets = case()
    new_codes, fitted, _, _ = fit(codes, values, targets[:1])
    assert np.array_equal(fitted[:, 1], values[:, 1], equal_nan=True) and np.array_equal(new_codes, codes)
    assert not np.array_equal(fitted[:, 0], values[:, 0])


def binned_counts(values: np.ndarray, fit: Target) -> np.ndarray:
    """Counts (shares) of a query of numeric column a's intervals by column b's bins (no categorical by)."""
    (b, edges, size), = fit.query.bins
    (a,) = fit.query.columns
    x, y = values[:, a], values[:, b]
    cell = np.where(np.isnan(y), size - 1, np.searchsorted(np.asarray(edges), np.nan_to_num(y), side="left"))
    slot = np.where(np.isnan(x), len(fit.query.cuts) + 1,
                    np.searchsorted(np.asarray(fit.query.cuts), np.nan_to_num(x), side="left"))
    out = np.zeros(fit.noisy.shape)
    np.add.at(out, (cell, slot), 1.0 / len(values))
    return out


def test_queries_by_numeric_bins_are_fitted_and_counted_as_the_private_table_counts():
    """Column 0's intervals by column 1's bins (edges 0.5; bin 2 holds column 1's nulls): the target puts
    column 0 low where column 1 is low and high where it is high, which no single-column answer says."""
    codes, values, _ = case()
    null_share = np.isnan(values[:, 1]).mean()
    target = np.zeros((3, 3))  # bins × (2 intervals + null)
    target[0, 0] = target[1, 1] = (1 - null_share) / 2  # (x1 <= 0.5, x0 <= 0.5) and (x1 > 0.5, x0 > 0.5)
    target[2, :2] = null_share / 2
    joint = Target(RelaxedQuery((), (0,), (1.0,), (0.5,), bins=((1, (0.5,), 3),)), target, weight=1.0)
    new_codes, fitted, before, after = fit(codes, values, [joint])
    assert np.isclose(before, float(((binned_counts(values, joint) - target) ** 2).sum()))
    assert np.isclose(after, float(((binned_counts(fitted, joint) - target) ** 2).sum()))
    assert np.abs(binned_counts(fitted, joint) - target).sum() < 0.05 < np.abs(binned_counts(values, joint) - target).sum()
    assert np.array_equal(np.isnan(fitted), np.isnan(values))


def test_nullable_values_move_to_and_from_null_toward_a_null_share():
    """Column 1's 1-way target asks for 30% nulls (the records have 5%): where the column is nullable the
    records move there, and the loss is the one counted with nulls in their slot; elsewhere nulls stay."""
    codes, values, _ = case()
    cuts = (0.5,)
    target = np.array([[0.35, 0.35, 0.3]])
    one_way = Target(RelaxedQuery((), (1,), (1.0,), cuts), target, weight=1.0)
    new_codes, fitted, before, after = fit_records(codes, SIZES, values, [one_way], np.random.default_rng(2),
                                                   RecordFit(fixed=(0,), nullable=(False, True)))
    assert np.isclose(after, float(((counts(new_codes, fitted, one_way) - target) ** 2).sum()))
    assert abs(np.isnan(fitted[:, 1]).mean() - 0.3) < 0.02 and after < 0.01 * before
    assert not np.isnan(fitted[:, 0]).any()
    _, kept, _, _ = fit_records(codes, SIZES, values, [one_way], np.random.default_rng(2), RecordFit(fixed=(0,)))
    assert np.array_equal(np.isnan(kept), np.isnan(values))


def test_a_pair_of_columns_with_a_null_moves_as_the_null_slot_says():
    """An interval query over columns 0 and 1 counts a record with either null in its null slot; with column
    1 nullable, the fit reaches a target that asks for fewer nulls there, and counts as it goes."""
    codes, values, targets = case()
    pair = targets[1]
    target = pair.noisy.copy()
    target[0, 1], target[0, 4] = 0.99, 0.01
    fitted_pair = Target(pair.query, target, weight=1.0)
    new_codes, fitted, _, after = fit_records(codes, SIZES, values, [fitted_pair], np.random.default_rng(3),
                                              RecordFit(nullable=(True, True)))
    assert np.isclose(after, float(((counts(new_codes, fitted, fitted_pair) - target) ** 2).sum()))
    assert np.isnan(fitted).any(axis=1).mean() < 0.02

