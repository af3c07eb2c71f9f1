"""Numeric values of records moved toward target interval counts (lib/interval_fit.py), as rap uses
it on the records it draws from its relaxed table."""
import numpy as np

from lib.interval_fit import IntervalTarget, fit_values


def counts(values: np.ndarray, target: IntervalTarget) -> np.ndarray:
    """The records' interval counts (shares) for one target, as lib/privacy/queries.Intervals counts."""
    x = values[:, list(target.columns)]
    null = np.isnan(x).any(axis=1)
    slot = np.searchsorted(np.asarray(target.cuts), np.nan_to_num(x) @ np.asarray(target.direction), side="left")
    slot[null] = len(target.cuts) + 1
    out = np.zeros((target.target.shape[0], len(target.cuts) + 2))
    np.add.at(out, (target.cells, slot), 1.0 / len(values))
    return out


def case(n: int = 2000, seed: int = 0):
    """Two numeric columns, uniform and independent of a binary code; targets that tie column 0 to
    the code (low values for code 0, high for code 1) and ask column 1 to sit near 1 - column 0."""
    rng = np.random.default_rng(seed)
    values = rng.random((n, 2))
    values[rng.random(n) < 0.05, 1] = np.nan
    code = rng.integers(0, 2, n)
    cuts = (0.25, 0.5, 0.75)
    by_code = np.zeros((2, 5))
    by_code[0, :2] = by_code[1, 2:4] = 0.25
    single = IntervalTarget((0,), (1.0,), cuts, code, by_code, 1.0)
    null_share = np.isnan(values[:, 1]).mean()
    total = np.zeros((1, 5))
    total[0, 1], total[0, 4] = 1 - null_share, null_share  # x0 + x1 in (0.85, 1.15]: one slot of cuts at its ends
    pair = IntervalTarget((0, 1), (2 ** -0.5, 2 ** -0.5), (0.85 * 2 ** -0.5, 1.15 * 2 ** -0.5, 2.0),
                          np.zeros(n, np.int64), total, 0.5)
    return values, [single, pair]


def loss(values, targets) -> float:
    return sum(t.weight * float(((counts(values, t) - t.target) ** 2).sum()) for t in targets)


def test_values_move_toward_the_targets_and_the_loss_never_rises():
    values, targets = case()
    fitted, before, after = fit_values(values, targets, 0.0, 1.0, np.random.default_rng(1))
    assert np.isclose(before, loss(values, targets)) and np.isclose(after, loss(fitted, targets))
    assert after < 0.05 * before
    single = counts(fitted, targets[0])
    assert np.abs(single - targets[0].target).sum() < 0.05  # column 0 now follows the code
    assert np.abs(counts(fitted, targets[1]) - targets[1].target).sum() < 0.1


def test_nulls_stay_and_values_stay_in_range():
    values, targets = case()
    fitted, _, _ = fit_values(values, targets, 0.0, 1.0, np.random.default_rng(1))
    assert np.array_equal(np.isnan(fitted), np.isnan(values))
    kept = fitted[~np.isnan(fitted)]
    assert kept.min() >= 0.0 and kept.max() <= 1.0


def test_seeded_fits_repeat_and_the_input_is_not_changed():
    values, targets = case()
    copy = values.copy()
    a, _, _ = fit_values(values, targets, 0.0, 1.0, np.random.default_rng(3))
    b, _, _ = fit_values(values, targets, 0.0, 1.0, np.random.default_rng(3))
    assert np.array_equal(a, b, equal_nan=True) and np.array_equal(values, copy, equal_nan=True)


def test_a_column_no_target_reads_is_left_alone():
    values, targets = case()
    fitted, _, _ = fit_values(values, targets[:1], 0.0, 1.0, np.random.default_rng(1))
    assert np.array_equal(fitted[:, 1], values[:, 1], equal_nan=True)
    assert not np.array_equal(fitted[:, 0], values[:, 0])
