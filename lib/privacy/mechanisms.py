"""Noise mechanisms, each charging the ledger beside its noise code, before it reads the answer.

* :func:`gaussian_mechanism`: a vector plus exact discrete Gaussian noise (zCDP);
* :func:`exponential_mechanism`: k indices chosen by the exponential mechanism (peeling),
  sampled exactly (uniform proposals accepted with Bernoulli(exp(-x)) in integer arithmetic).

Both take the true answer as a callable that they call only once the charge is recorded,
so a refused charge never even computes it.  They are called by the private table
(lib/privacy/private_table.py), which sets the sensitivity from the query and theta.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

from dpsyn.lib.privacy.accounting import Ledger, gaussian_sigma
from dpsyn.lib.privacy.samplers import (SAMPLER_NAME, SIGMA_MAX, WordStream, discrete_gaussian, draw_words,
                                        gaussian_parameters, ref_below, ref_bern_exp)

log = logging.getLogger(__name__)

QUANTUM_BITS = 10  # real values are rounded to a grid fine enough to add <= 2**-10 of the sensitivity
EM_SAMPLER = ("exact exponential mechanism: uniform proposals accepted with Bernoulli(exp(-x)) "
              "(Canonne-Kamath-Steinke 2020, Alg. 1) on integers")
_EM_PRECISION_BITS = 62   # the coefficient is rounded down to a multiple of 2**-62 (uniforms below 2**63 only)


class NoiseTooLarge(ValueError):
    """The budget share is so small that the noise exceeds what the exact sampler represents."""


@dataclass(frozen=True)
class LedgerStep:
    """Where a mechanism records its charge: the run's ``ledger``, the ``step``'s name, and the ``reason`` its
    sensitivity holds (the ledger keeps all three beside the noise)."""

    ledger: Ledger
    step: str
    reason: str


def _grid(sensitivity: float, rho: float, cells: int, integer: bool, step: str) -> tuple[float, float, str]:
    """(grid unit u, sensitivity paid, why) for releasing ``cells`` values on multiples of u.

    Integer answers keep u = 1; real ones get the largest power of two with
    sqrt(cells)*u <= sensitivity*2**-QUANTUM_BITS.  Rounding to multiples of u can move each
    coordinate by one more step between neighbours, so u != 1 (or real values) pays
    sqrt(cells)*u more sensitivity.  When sigma/u would exceed the sampler's SIGMA_MAX (a
    tiny rho), u grows to the next power of two that keeps sigma/u below it.
    """
    unit, extra = 1.0, 0.0
    if not integer:
        unit = 2.0 ** math.floor(math.log2(sensitivity / math.sqrt(cells)) - QUANTUM_BITS)
        extra = math.sqrt(cells) * unit
    while gaussian_sigma(sensitivity + extra, rho) / unit > SIGMA_MAX:
        floor = math.sqrt(cells) / math.sqrt(2 * rho)  # sigma/u can never fall below this
        if floor * 1.01 > SIGMA_MAX:
            raise NoiseTooLarge(f"{step}: rho={rho:.3g} is too small a share for exact noise "
                                f"(noise sd would exceed {SIGMA_MAX:.3g} grid steps); give the run a "
                                f"larger epsilon")
        unit = 2.0 ** math.ceil(math.log2(gaussian_sigma(sensitivity + extra, rho) / SIGMA_MAX))
        extra = math.sqrt(cells) * unit
    why = ""
    if extra:
        why = f"; values rounded to multiples of {unit:g} first, adding sqrt({cells})*{unit:g}"
    return unit, sensitivity + extra, why


def gaussian_mechanism(answer: Callable[[], np.ndarray], cells: int, integer: bool, sensitivity: float,
                       rho: float, rng: np.random.Generator, charge: LedgerStep) -> tuple[np.ndarray, float, float]:
    """(noisy answer, sigma, rho charged): ``answer()`` + exact discrete Gaussian noise.

    Privacy cost: the rho charged to ``charge.ledger`` (``grant(rho)``: ``rho``, or exactly what remains
    when ``rho`` exceeds it by float error), zCDP as the continuous Gaussian (Canonne,
    Kamath and Steinke 2020, Thm. 4), if ``sensitivity`` bounds the L2 change of the
    ``cells`` values of ``answer()`` when one individual is added or removed.  Values are
    released on a grid (see ``_grid``); sigma = Δ₂/sqrt(2ρ) for the sensitivity paid, and
    the sampler rounds its variance up, never down.  The charge is recorded before
    ``answer()`` is called or any noise is drawn.
    """
    ledger, step = charge.ledger, charge.step
    unit, sensitivity, why = _grid(sensitivity, rho, cells, integer, step)
    rho = ledger.grant(rho, step)
    params = gaussian_parameters(gaussian_sigma(sensitivity, rho) / unit)
    sigma = params.sigma * unit
    ledger.charge(step, "discrete Gaussian", sensitivity, sigma, rho, charge.reason + why, SAMPLER_NAME)
    values = np.asarray(answer())
    log.debug("measured %s: %d cells, sensitivity %.6g, sigma %.6g, rho %.6g", step, values.size, sensitivity,
              sigma, rho)
    grid = values.astype(np.int64) if unit == 1.0 and integer else np.rint(values / unit).astype(np.int64)
    noise = discrete_gaussian(params, grid.size, rng)
    return (grid + noise.reshape(grid.shape)).astype(np.float64) * unit, sigma, rho


def exponential_mechanism(scores: Callable[[], np.ndarray], candidates: int, sensitivity: float, rho: float,
                          rng: np.random.Generator, charge: LedgerStep, k: int = 1) -> tuple[tuple[int, ...], float]:
    """(k distinct indices, rho charged), chosen by k rounds of the exponential mechanism.

    Each round picks among the candidates not yet chosen with probability
    ∝ exp(ε·score/(2Δ)), ε = sqrt(8ρ/k): ε-DP and, being ε-bounded-range, ε²/8-zCDP
    (Cesar and Rogers 2021), so the k rounds cost ρ in all, if ``sensitivity`` Δ bounds
    the change of every score when one individual is added or removed.  Scores are
    rounded to a grid of step g (a power of two <= Δ·2**-QUANTUM_BITS), which adds g to
    Δ; the exponent's coefficient is rounded down (a smaller ε is more private).  Sampling
    is exact: a uniform proposal i is accepted with Bernoulli(exp(-c·(best - score_i)))
    in integer arithmetic.  The charge is recorded before ``scores()`` is called.
    """
    ledger, step = charge.ledger, charge.step
    if not 1 <= k <= candidates:
        raise ValueError(f"{step}: need 1 <= k <= {candidates} candidates, got k={k}")
    unit = 2.0 ** math.floor(math.log2(sensitivity) - QUANTUM_BITS)
    sensitivity += unit
    rho = ledger.grant(rho, step)
    epsilon = math.sqrt(8 * rho / k)
    ledger.charge(step, f"exponential mechanism (top {k} by peeling, eps {epsilon:.4g} each)", sensitivity,
                  2 * sensitivity / epsilon, rho,
                  charge.reason + f"; scores rounded to multiples of {unit:g}, adding {unit:g}", EM_SAMPLER)
    grid = np.rint(np.asarray(scores(), dtype=np.float64) / unit).astype(np.int64)
    # accept with exp(-c·(best - score)), c = unit·sqrt(8ρ/k)/(2Δ) rounded down to a multiple of 2**-62:
    # floor(sqrt(x)) = isqrt(floor(x)) on the exact rational c²·2**124, so no float rounding can raise ε
    squared = Fraction(unit) ** 2 * 8 * Fraction(rho) / (k * 4 * Fraction(sensitivity) ** 2)
    coefficient = math.isqrt(math.floor(squared * (1 << (2 * _EM_PRECISION_BITS))))
    chosen = exponential_draws([int(g) for g in grid], coefficient, k, WordStream(draw_words(rng, 256), 0, rng, 256))
    log.debug("selected %s: %d of %d candidates, sensitivity %.6g, eps %.6g each, rho %.6g", step, k, candidates,
              sensitivity, epsilon, rho)
    return chosen, rho


def exponential_draws(scores: list[int], coefficient: int, k: int, stream: WordStream) -> tuple[int, ...]:
    """k distinct indices, each round drawn with P(i) ∝ exp(-coefficient·2**-62·(best - scores[i])) over
    the indices left, exactly: a uniform proposal is accepted with that probability (its best
    is accepted surely), by the integer Bernoulli(exp(-x)) sampler reading ``stream``."""
    left = list(range(len(scores)))
    chosen = []
    for _ in range(k):
        best = max(scores[i] for i in left)
        while True:
            i = left[ref_below(len(left), stream)] if len(left) > 1 else left[0]
            if ref_bern_exp((best - scores[i]) * coefficient, 1 << _EM_PRECISION_BITS, stream) == 1:
                break
        chosen.append(i)
        left.remove(i)
    return tuple(chosen)
