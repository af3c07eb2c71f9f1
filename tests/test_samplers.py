"""Exact samplers: goodness of fit against the exact distributions, moments, agreement of the numba
kernels with the Python-integer reference, and the discrete Gaussian mechanism's ledger entry.

Every statistical test uses a fixed seed and significance level ALPHA = 0.001.
"""
import math

import numpy as np
import pytest

from privacy_audit import chi_square_gof, discrete_gaussian_pmf, discrete_laplace_pmf
from dpsyn.lib.privacy.accounting import Ledger
from dpsyn.lib.privacy.mechanisms import (EM_SAMPLER, QUANTUM_BITS, LedgerStep, NoiseTooLarge, exponential_draws, exponential_mechanism,
                                          gaussian_mechanism)
from dpsyn.lib.privacy.samplers import (SAMPLER_NAME, WordStream, discrete_gaussian, discrete_laplace, draw_words,
                                        gaussian_parameters, ref_gaussian, ref_laplace)

ALPHA = 1e-3
N = 20_000


@pytest.mark.parametrize("sigma", [0.5, 3.0, 40.0, 1e4])
def test_discrete_gaussian_fits_its_distribution(sigma):
    p = gaussian_parameters(sigma)
    x = discrete_gaussian(p, N, np.random.default_rng(11))
    assert sigma <= p.sigma <= sigma * (1 + 1e-7)
    support, pmf = discrete_gaussian_pmf(p.sigma)
    assert chi_square_gof(x, support, pmf, width=max(1, int(sigma // 8))) > ALPHA
    mean, var = 0.0, float((support ** 2 * pmf).sum())
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / N)
    fourth = float((support.astype(float) ** 4 * pmf).sum())
    assert abs(x.var() - var) < 5 * math.sqrt((fourth - var ** 2) / N)


@pytest.mark.parametrize("t,s", [(1, 2), (3, 1), (40, 1), (7, 3)])
def test_discrete_laplace_fits_its_distribution(t, s):
    x = discrete_laplace(t, s, N, np.random.default_rng(12))
    support, pmf = discrete_laplace_pmf(t, s)
    assert chi_square_gof(x, support, pmf) > ALPHA
    var = float((support ** 2 * pmf).sum())
    assert abs(x.mean()) < 5 * math.sqrt(var / N)
    fourth = float((support.astype(float) ** 4 * pmf).sum())
    assert abs(x.var() - var) < 5 * math.sqrt((fourth - var ** 2) / N)


def test_chi_square_helper_rejects_a_wrong_distribution():
    p = gaussian_parameters(3.0)
    x = discrete_gaussian(p, N, np.random.default_rng(13))
    support, pmf = discrete_gaussian_pmf(p.sigma * 1.1)
    assert chi_square_gof(x, support, pmf) < ALPHA
    rounded = np.rint(np.random.default_rng(13).normal(0, 0.5, N)).astype(np.int64)  # rounded float noise
    assert chi_square_gof(rounded, *discrete_gaussian_pmf(0.5)) < ALPHA


def reference_draws(draw, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    stream = WordStream(draw_words(rng, 1000), 0, rng, 1000)
    return [draw(stream) for _ in range(n)]


@pytest.mark.parametrize("sigma", [0.5, 2.5, 700.0])
def test_kernel_equals_python_integer_reference_for_any_buffer_and_overflow_limit(sigma):
    """The numba kernel, its buffer replay and its Python big-proposal path all give the reference's samples."""
    p = gaussian_parameters(sigma)
    ref = reference_draws(lambda st: ref_gaussian(p.t, p.a, p.q, st), 1500, 5)
    for chunk, ymax in [(1000, None), (37, None), (1000, p.t), (53, 0)]:
        x = discrete_gaussian(p, 1500, np.random.default_rng(5), chunk=chunk, ymax=ymax)
        assert x.tolist() == ref, (chunk, ymax)


def test_laplace_kernel_equals_python_integer_reference():
    ref = reference_draws(lambda st: ref_laplace(7, 3, st), 1500, 6)
    for chunk in (1000, 29):
        assert discrete_laplace(7, 3, 1500, np.random.default_rng(6), chunk=chunk).tolist() == ref


def test_parameters_round_the_variance_up_and_refuse_unusable_scales():
    for sigma in (1e-3, 0.5, 1.0, 3.7, 1e3, 123456.789, 1e8):
        p = gaussian_parameters(sigma)
        assert 0 <= p.t * p.a - sigma ** 2 * p.q < p.t and (sigma < 0.5 or p.sigma / sigma - 1 < 1e-7)
        assert 2 * p.t * p.a * p.q < 2 ** 62 and (p.q * p.ymax - p.a) ** 2 <= 2 ** 62
    for bad in (0.0, -1.0, 2.0 ** 31, float("nan")):
        with pytest.raises(ValueError, match="sigma"):
            gaussian_parameters(bad)


def test_measure_adds_integer_noise_to_counts_and_records_the_sampler():
    ledger = Ledger(1.0, 1e-6)
    counts = np.arange(12, dtype=np.int64).reshape(3, 4)
    noisy, sigma, rho = gaussian_mechanism(lambda: counts, 12, True, 2.0, 0.01, np.random.default_rng(0),
                                           LedgerStep(ledger, "step", "why"))
    assert noisy.shape == (3, 4) and np.all(noisy == np.rint(noisy)) and not np.all(noisy == counts)
    (c,) = ledger.charges
    assert c.mechanism == "discrete Gaussian" and c.sampler == SAMPLER_NAME and rho == c.rho == 0.01
    assert c.sensitivity == 2.0 and c.noise_scale == sigma >= 2.0 / math.sqrt(0.02)
    assert c.rho >= c.sensitivity ** 2 / (2 * c.noise_scale ** 2)


def test_measure_rounds_real_values_and_pays_for_the_rounding():
    ledger = Ledger(1.0, 1e-6)
    values = np.array([0.3, 1.7, 1e4 + 0.123])
    noisy, _, _ = gaussian_mechanism(lambda: values, 3, False, 4.0, 0.01, np.random.default_rng(0),
                                     LedgerStep(ledger, "scores", "why"))
    (c,) = ledger.charges
    assert 4.0 < c.sensitivity <= 4.0 * (1 + 2.0 ** -QUANTUM_BITS)
    assert "rounded" in c.sensitivity_reason and c.noise_scale >= c.sensitivity / math.sqrt(0.02)
    step = 2.0 ** math.floor(math.log2(4.0 / math.sqrt(3)) - QUANTUM_BITS)
    assert np.allclose(noisy / step, np.rint(noisy / step))


def test_seeded_draws_repeat_and_unseeded_differ():
    p = gaussian_parameters(5.0)
    a = discrete_gaussian(p, 100, np.random.default_rng(3))
    b = discrete_gaussian(p, 100, np.random.default_rng(3))
    c = discrete_gaussian(p, 100, np.random.default_rng())
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()


def test_a_tiny_rho_coarsens_the_grid_and_pays_for_it():
    """At a rho where sigma would exceed the sampler's 2^30 grid steps, values are rounded to a coarser
    power-of-two grid and the recorded sensitivity grows by sqrt(m) times its step."""
    ledger = Ledger(1.0, 1e-6)
    counts = np.array([5, 7, 9], dtype=np.int64)
    noisy, sigma, _ = gaussian_mechanism(lambda: counts, 3, True, 1000.0, 1e-15, np.random.default_rng(0),
                                         LedgerStep(ledger, "tiny", "why"))
    (c,) = ledger.charges
    step = float(c.sensitivity_reason.split("multiples of ")[1].split()[0])
    assert step > 1 and math.log2(step).is_integer() and np.allclose(noisy / step, np.rint(noisy / step))
    assert c.sensitivity == pytest.approx(1000.0 + math.sqrt(3) * step)
    assert c.noise_scale / step <= 2 ** 30 and c.rho >= c.sensitivity ** 2 / (2 * c.noise_scale ** 2)


def test_a_hopeless_rho_is_a_clear_error_and_charges_nothing():
    ledger = Ledger(1.0, 1e-6)
    with pytest.raises(NoiseTooLarge, match="too small a share"):
        gaussian_mechanism(lambda: np.zeros(10 ** 4), 10 ** 4, True, 1.0, 1e-24, np.random.default_rng(0),
                           LedgerStep(ledger, "hopeless", "why"))
    assert ledger.charges == []


@pytest.mark.parametrize("coefficient_scale,scores", [(0.7, [0, 3, 1, 5, 5, -2]), (0.05, list(range(40)))])
def test_exponential_draws_follow_the_exponential_mechanism(coefficient_scale, scores):
    """χ² of 20,000 exact draws against P(i) ∝ exp(-c·(best - score_i))."""
    coefficient = int(coefficient_scale * 2 ** 62)
    rng = np.random.default_rng(21)
    stream = WordStream(draw_words(rng, 1000), 0, rng, 1000)
    draws = np.array([exponential_draws(scores, coefficient, 1, stream)[0] for _ in range(N)])
    s = np.asarray(scores, dtype=float)
    pmf = np.exp(-coefficient / 2 ** 62 * (s.max() - s))
    assert chi_square_gof(draws, np.arange(len(scores)), pmf) > ALPHA


def test_top_k_peels_without_repeats_and_charges_once():
    ledger = Ledger(10.0, 1e-6)
    scores = np.array([10.0, 500.0, 20.0, 400.0, 0.0])
    chosen, rho = exponential_mechanism(lambda: scores, 5, 1.0, 0.5, np.random.default_rng(0),
                                        LedgerStep(ledger, "top 2", "why"), k=2)
    assert sorted(chosen) == [1, 3] and rho == 0.5  # far ahead at eps = sqrt(2) each round
    (c,) = ledger.charges
    assert c.sampler == EM_SAMPLER and c.sensitivity == 1.0 + 2.0 ** -QUANTUM_BITS and "top 2" in c.mechanism
