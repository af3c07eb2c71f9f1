"""The L1 error a noisy marginal keeps after projection onto non-negative counts of its total."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

_ROOT_2PI = math.sqrt(2 * math.pi)


class ProjectedNoise(NamedTuple):
    """``l1``: each marginal's expected L1 error after the projection; ``shift``: its τ / σ (a start for the
    next call on answers like these)."""

    l1: np.ndarray
    shift: np.ndarray


def projected_noise_l1(answers, sigmas, start=None, steps: int = 10) -> ProjectedNoise:
    """For each marginal m of ``answers`` (clipped at zero) and its noise sd σ of ``sigmas``:
    E ||max(m + z - τ, 0) - m||₁ for z ~ N(0, σ²) per cell, τ the shift that keeps the expected projected total
    at m's total.  That is the error a marginal measured with noise sd σ keeps once its negative counts are cut
    and its total held (lib/estimation/consistency.py's Norm-Sub): a sparse marginal keeps far less than the raw noise's
    sqrt(2/π)·σ·cells, a dense one about that, an empty one (total 0) nothing.  τ by Newton's method, all
    marginals at once, from ``start`` (τ / σ per marginal, e.g. the last call's ``shift``; default 0) until a
    step moves τ by at most a thousandth of σ: the expected total is convex and decreasing in τ, so the steps
    pass the root at most once.  A marginal's empty cells are worked out once.  Public: a function of the
    answers and σ alone."""
    k = len(answers)
    cells = np.array([np.size(a) for a in answers])
    values = np.concatenate([np.ravel(a) for a in answers]).astype(np.float64) if k else np.zeros(0)
    positive = values > 0.0
    seg = np.repeat(np.arange(k), cells)[positive]
    m = values[positive]
    empty = cells - np.bincount(seg, minlength=k)
    sigma = np.asarray(sigmas, dtype=np.float64)
    totals = np.bincount(seg, m, k)
    tau = np.zeros(k) if start is None else np.maximum(np.asarray(start, dtype=np.float64), 0.0) * sigma

    def summed(values: np.ndarray, at_zero: np.ndarray) -> np.ndarray:
        return np.bincount(seg, values, k) + empty * at_zero

    s = sigma[seg]
    for _ in range(steps):
        a, a0 = (m - tau[seg]) / s, -tau / sigma
        below, below0 = ndtr(a), ndtr(a0)
        excess = summed(s * (a * below + np.exp(-a * a / 2) / _ROOT_2PI),
                        sigma * (a0 * below0 + np.exp(-a0 * a0 / 2) / _ROOT_2PI)) - totals
        slope = summed(below, below0)
        lost = slope < 1e-6  # a start so far past the root that the slope vanishes: start again from 0
        step = np.where(lost, 0.0, excess / np.maximum(slope, 1e-6))
        tau = np.where(lost, 0.0, np.maximum(tau + step, 0.0))
        if not lost.any() and (np.abs(step) <= 1e-3 * sigma)[totals > 0].all():  # τ to a thousandth of σ
            break
    x = tau / sigma
    abs_w = sigma * (math.sqrt(2 / math.pi) * np.exp(-x * x / 2) - x * (1 - 2 * ndtr(x)))
    # W = projected count - m where it stays positive: N(-τ, σ²).  Per cell: m where cut to zero, plus E|W|
    # less E[|W|; cut]
    t = tau[seg]
    a, a0 = (m - t) / s, -tau / sigma
    cut, cut0 = ndtr(-a), ndtr(-a0)
    per_cell = m * cut - t * cut - s * np.exp(-a * a / 2) / _ROOT_2PI
    at_zero = -tau * cut0 - sigma * np.exp(-a0 * a0 / 2) / _ROOT_2PI
    empty_answer = totals <= 0  # a total of 0 projects onto zeros: nothing left
    return ProjectedNoise(np.where(empty_answer, 0.0, summed(per_cell, at_zero) + abs_w * cells),
                          np.where(empty_answer, 0.0, tau / sigma))

