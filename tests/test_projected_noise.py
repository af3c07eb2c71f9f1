"""lib/estimation/projected_noise.py against brute force: the expected L1 error of a noisy marginal once its counts are
shifted by τ and cut at zero, τ holding the expected total."""
import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from dpsyn.lib.estimation.projected_noise import projected_noise_l1


def by_quadrature(m: np.ndarray, sigma: float) -> float:
    """The same expectation by numerical integration over each cell's noise, τ by root finding."""
    def expected_total(tau):
        return sum(integrate.quad(lambda z: max(x + z - tau, 0.0) * stats.norm.pdf(z, scale=sigma),
                                  -12 * sigma, 12 * sigma, points=[tau - x])[0] for x in m)
    tau = 0.0 if expected_total(0.0) <= m.sum() else \
        optimize.brentq(lambda t: expected_total(t) - m.sum(), 0.0, m.max() + 12 * sigma)
    return sum(integrate.quad(lambda z: abs(max(x + z - tau, 0.0) - x) * stats.norm.pdf(z, scale=sigma),
                              -12 * sigma, 12 * sigma, points=[tau - x, tau])[0] for x in m)


@pytest.mark.parametrize("m, sigma", [([0.0, 0.0, 30.0], 5.0), ([10.0, 10.0, 10.0, 10.0], 2.0),
                                      ([50.0, 0.0, 1.0, 3.0, 0.0], 20.0), ([5.0], 1.0),
                                      ([30000.0] + [0.0] * 99, 0.1), ([3000.0] * 10 + [0.0] * 90, 1.0)])
def test_the_expectation_matches_numerical_integration(m, sigma):
    m = np.array(m)
    # τ is found to a thousandth of σ, however large the counts
    assert projected_noise_l1([m], [sigma]).l1[0] == pytest.approx(by_quadrature(m, sigma), rel=2e-3, abs=1e-6)


def test_marginals_at_once_equal_each_alone_and_shapes_do_not_matter():
    rng = np.random.default_rng(0)
    answers = [rng.poisson(3.0, (4, 5)).astype(float), np.zeros(7), rng.exponential(50.0, 30)]
    sigmas = [2.0, 1.0, 9.0]
    together = projected_noise_l1(answers, sigmas)
    alone = [projected_noise_l1([a.ravel()], [s]) for a, s in zip(answers, sigmas)]
    assert together.l1 == pytest.approx([a.l1[0] for a in alone], rel=2e-3)
    # from the last call's shift the same answer, whether that start is short of the root or past it
    for start in (together.shift, together.shift * 3, np.full(3, 1e6)):
        assert projected_noise_l1(answers, sigmas, start).l1 == pytest.approx(together.l1, rel=2e-3, abs=1e-2)


def test_dense_marginals_keep_the_raw_noise_and_sparse_ones_far_less():
    sigma = 40.0
    dense = np.full(56, 700.0)
    assert projected_noise_l1([dense], [sigma]).l1[0] == pytest.approx(math.sqrt(2 / math.pi) * sigma * 56, rel=1e-3)
    sparse = np.r_[np.full(20, 2000.0), np.zeros(7980)]
    kept = projected_noise_l1([sparse], [sigma]).l1[0]
    assert kept < 0.02 * math.sqrt(2 / math.pi) * sigma * sparse.size
    # close to what projecting each noisy draw onto the simplex of its total leaves (simulated)
    rng, errors = np.random.default_rng(1), []
    for _ in range(50):
        y = sparse + rng.normal(0.0, sigma, sparse.size)
        s = np.sort(y)[::-1]
        cum = np.cumsum(s) - sparse.sum()
        r = np.nonzero(s - cum / np.arange(1, len(s) + 1) > 0)[0][-1]
        errors.append(np.abs(np.maximum(y - cum[r] / (r + 1), 0.0) - sparse).sum())
    assert kept == pytest.approx(np.mean(errors), rel=0.05)
