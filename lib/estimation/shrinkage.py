"""Empirical-Bayes shrinkage of a noisy table of counts toward its independence fit.

A table of counts (for example rows per PUMA × YEAR) measured with independent N(0, σ²)
noise per cell is estimated better, in mean squared error, by pulling every cell toward
a smoother model of the table by as much as the noise outweighs the cells' spread around
that model (James-Stein; Efron and Morris 1975).  Here the model is the product of the
table's one-way margins (each margin itself pulled toward its mean, which it estimates
with far less noise), and the spreads are estimated from the noisy table itself by the
method of moments.  Where the table is far from independence, or the noise is small,
the weights go to 1 and the table is kept.

Post-processing of released counts and their public noise sd: no privacy cost.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Shrunk:
    """A shrunk table and the share of each deviation it kept (1: kept, 0: replaced by the model)."""

    values: np.ndarray
    cells: float                 # of each cell's deviation from the independence fit
    margins: tuple[float, ...]   # of each one-way margin's deviation from its mean, per axis


def _keep(spread: float, noise_var: float) -> float:
    """The James-Stein weight τ²/(τ² + σ²) of an observation with signal variance ``spread``."""
    if noise_var <= 0:
        return 1.0
    return spread / (spread + noise_var)


def _toward_mean(values: np.ndarray, sigma: float) -> tuple[np.ndarray, float]:
    """A 1-D vector pulled toward its mean; its total is kept."""
    if values.size < 3:
        return values.copy(), 1.0
    mean = values.mean()
    w = _keep(max(0.0, float(values.var(ddof=1)) - sigma ** 2), sigma ** 2)
    return mean + w * (values - mean), w


def shrink_counts(noisy: np.ndarray, sigma: float) -> Shrunk:
    """Empirical-Bayes estimate of a table whose cells carry independent N(0, ``sigma``²) noise.

    Each one-way margin (noise sd ``sigma``·sqrt(cells / its length)) is pulled toward its mean;
    the model is the table's total times the product of the shrunk margins' shares; each cell
    keeps w = τ²/(τ² + σ²) of its deviation from that model, with τ² the cells' variance around
    the noisy table's own independence fit less the noise's share of it.  The total is kept.
    A 1-D table is pulled toward its mean; tables of fewer than 3 cells, or whose total is not
    positive, are returned unchanged.  Uses nothing but ``noisy`` and ``sigma``.
    """
    y = np.asarray(noisy, dtype=np.float64)
    if y.ndim == 0 or y.size < 3 or y.sum() <= 0:
        return Shrunk(y.copy(), 1.0, (1.0,) * y.ndim)
    if y.ndim == 1:
        values, w = _toward_mean(y, sigma)
        return Shrunk(values, w, (w,))
    total, size = float(y.sum()), y.size
    raw_fit = np.full(y.shape, total)
    model = np.full(y.shape, total)
    margin_weights = []
    for axis, length in enumerate(y.shape):
        margin = y.sum(axis=tuple(a for a in range(y.ndim) if a != axis))
        shrunk, w = _toward_mean(margin, sigma * np.sqrt(size / length))
        margin_weights.append(w)
        shape = [1] * y.ndim
        shape[axis] = length
        raw_fit = raw_fit * (margin / total).reshape(shape)
        share = np.clip(shrunk, 0.0, None)
        model = model * (share / share.sum()).reshape(shape) if share.sum() > 0 else model / length
    free = 1.0 - (1 + sum(length - 1 for length in y.shape)) / size  # share of noise left in the residuals
    spread = max(0.0, float(np.mean((y - raw_fit) ** 2)) - sigma ** 2 * free)
    w = _keep(spread, sigma ** 2)
    return Shrunk(model + w * (y - model), w, tuple(margin_weights))
