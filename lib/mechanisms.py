"""Noise mechanisms on count vectors; each one charges the ledger beside its noise code.

A :class:`Measurement` (noisy counts, the attributes they cover, the noise scale and
the rho spent) is the only thing that crosses from the private side to the
estimation side: consistency, synthesis and reweighting consume measurements,
never private records.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from lib.privacy import Ledger, gaussian_sigma
from lib.samplers import SAMPLER_NAME, discrete_gaussian, gaussian_parameters

log = logging.getLogger(__name__)

QUANTUM_BITS = 10  # real values are rounded to a grid fine enough to add <= 2**-10 of Δ₂


@dataclass(frozen=True)
class Measurement:
    """Noisy answer to a count query over ``attrs`` (shape = their domain sizes)."""

    attrs: tuple[str, ...]
    noisy: np.ndarray
    sigma: float
    rho: float

    @property
    def total(self) -> float:
        return float(self.noisy.sum())


def gaussian_measure(values: np.ndarray, attrs: tuple[str, ...], sensitivity: float, rho: float,
                     rng: np.random.Generator, ledger: Ledger, step: str,
                     sensitivity_reason: str) -> Measurement:
    """Release ``values`` + exact discrete Gaussian noise of scale σ = Δ₂/sqrt(2ρ); charges ``rho``.

    Privacy cost: exactly ``rho`` (zCDP; the discrete Gaussian has the same guarantee as the
    continuous one, CKS 2020 Thm. 4) if ``sensitivity`` bounds the L2 change of ``values``
    when one individual is added or removed.  Integer values (counts) get integer noise.
    Real values are first rounded to a grid of step u (a power of two with
    sqrt(m)·u <= Δ₂·2**-QUANTUM_BITS, chosen from public Δ₂ and m), which can move each of
    the m coordinates by one more step between neighbours, so the sensitivity used (and
    recorded) is Δ₂ + sqrt(m)·u.  The sampler's σ is rounded up (never
    down), and the charge is recorded before any noise is drawn, so a refused charge
    releases nothing.
    """
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.integer):
        grid, unit = values.astype(np.int64), 1.0
    else:
        unit = 2.0 ** math.floor(math.log2(sensitivity / math.sqrt(values.size)) - QUANTUM_BITS)
        grid = np.rint(values / unit).astype(np.int64)
        sensitivity = sensitivity + math.sqrt(values.size) * unit
        sensitivity_reason += (f"; values rounded to multiples of {unit:g} first, "
                               f"adding sqrt({values.size})*{unit:g}")
    params = gaussian_parameters(gaussian_sigma(sensitivity, rho) / unit)
    sigma = params.sigma * unit
    ledger.charge(step, "discrete Gaussian", sensitivity, sigma, rho, sensitivity_reason, SAMPLER_NAME)
    log.debug("measured %s: %d cells, sensitivity %.6g, sigma %.6g, rho %.6g", step, grid.size, sensitivity,
              sigma, rho)
    noise = discrete_gaussian(params, grid.size, rng)
    noisy = (grid + noise.reshape(grid.shape)).astype(np.float64) * unit
    return Measurement(tuple(attrs), noisy, sigma, rho)
