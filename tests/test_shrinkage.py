"""Empirical-Bayes shrinkage of noisy group counts (lib/estimation/shrinkage.py)."""
import numpy as np

from dpsyn.lib.estimation.shrinkage import shrink_counts


def product_table(rng, rows=120, cols=7, mean=80.0):
    """Counts close to independence: row sizes × column shares, with multinomial-like spread."""
    sizes = rng.gamma(4.0, mean * cols / 4.0, rows)
    shares = rng.dirichlet(np.full(cols, 20.0))
    return rng.poisson(np.outer(sizes, shares)).astype(float)


def test_shrinking_lowers_the_error_of_counts_far_noisier_than_their_spread():
    rng = np.random.default_rng(0)
    true = product_table(rng)
    for sigma in (30.0, 150.0):
        noisy = true + rng.normal(0, sigma, true.shape)
        shrunk = shrink_counts(noisy, sigma)
        assert np.isclose(shrunk.values.sum(), noisy.sum())
        assert 0 <= shrunk.cells < 0.5
        raw_error = np.mean((noisy - true) ** 2)
        assert np.mean((shrunk.values - true) ** 2) < 0.5 * raw_error


def test_counts_far_from_independence_or_barely_noisy_are_kept():
    rng = np.random.default_rng(1)
    dependent = np.diag(rng.integers(500, 1000, 30)).astype(float) + 5
    noisy = dependent + rng.normal(0, 2.0, dependent.shape)
    shrunk = shrink_counts(noisy, 2.0)
    assert shrunk.cells > 0.95
    assert np.abs(shrunk.values - noisy).max() < 0.1 * np.abs(noisy).max()
    exact = product_table(rng)
    np.testing.assert_allclose(shrink_counts(exact, 0.0).values, exact)


def test_one_column_is_pulled_toward_its_mean_and_tiny_tables_are_unchanged():
    rng = np.random.default_rng(2)
    true = np.full(50, 100.0)
    noisy = true + rng.normal(0, 40.0, 50)
    shrunk = shrink_counts(noisy, 40.0)
    assert np.isclose(shrunk.values.sum(), noisy.sum())
    assert np.mean((shrunk.values - true) ** 2) < np.mean((noisy - true) ** 2)
    assert shrunk.margins == (shrunk.cells,)
    for tiny in (np.array([3.0, 9.0]), np.array([[1.0], [2.0]]), np.array([-5.0, 1.0, 2.0])):
        np.testing.assert_array_equal(shrink_counts(tiny, 10.0).values, tiny)
