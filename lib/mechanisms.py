"""Noise mechanisms on count vectors; each one charges the ledger beside its noise code.

A :class:`Measurement` (noisy counts, the attributes they cover, the noise scale and
the rho spent) is the only thing that crosses from the private side to the
estimation side: consistency, synthesis and reweighting consume measurements,
never private records.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lib.privacy import Ledger, gaussian_sigma

GAUSSIAN_SAMPLER = "numpy Generator.normal (float64)"


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


def gaussian_measure(counts: np.ndarray, attrs: tuple[str, ...], sensitivity: float, rho: float,
                     rng: np.random.Generator, ledger: Ledger, step: str,
                     sensitivity_reason: str) -> Measurement:
    """Release ``counts`` + N(0, σ²) per cell with σ = Δ₂/sqrt(2ρ); charges ``rho`` to ``ledger``.

    Privacy cost: exactly ``rho`` (zCDP) if ``sensitivity`` bounds the L2 change of
    ``counts`` when one individual is added or removed.  The charge is recorded
    before any noise is drawn, so a refused charge releases nothing.
    """
    sigma = gaussian_sigma(sensitivity, rho)
    ledger.charge(step, "Gaussian", sensitivity, sigma, rho, sensitivity_reason, GAUSSIAN_SAMPLER)
    noisy = counts.astype(np.float64) + rng.normal(0.0, sigma, size=counts.shape)
    return Measurement(tuple(attrs), noisy, sigma, rho)
