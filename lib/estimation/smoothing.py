"""Smoothing a noisy histogram of an ordered column, by as much as Stein's unbiased risk estimate says helps.

A noisy 1-way marginal y = x + N(0, σ²I) of a column whose codes are ordered (age in years, a weight in
100 bins) is often smooth in x, and averaging neighbouring codes then cuts the noise far more than it
adds bias.  How much to average is chosen from y and σ alone: for a linear smoother S, Stein's unbiased
risk estimate ||y − Sy||² + 2σ²·tr(S) − nσ² is an unbiased estimate of E||Sy − x||² under Gaussian noise
of known σ (Stein 1981).  Everything here is post-processing of a released answer: no privacy cost.

The release is judged in L1 (total variation) after the counts are made non-negative, where smoothing's
bias at a spike (hours worked: 40) costs more than its squared error says; so a smoothed histogram is
used only where the risk estimate promises at most smoothing_risk_share of the unsmoothed squared error (categorical
Adult at eps 0.1, its 1-way marginals at four rounds' rho, seed 0: age 0.31 of it, smoothed; fnlwgt 0.62 and
hours-per-week 8.3, whose codes are jagged or spiked, left alone).
"""
from __future__ import annotations

import functools

import numpy as np

from dpsyn.lib.tuning import T



@functools.lru_cache(maxsize=256)
def kernel(size: int, bandwidth: float) -> np.ndarray:
    """A size × size Gaussian smoother of sd ``bandwidth`` codes, each row normalised to sum 1 (so
    the first and last codes average only codes that exist).  Read-only: it is shared."""
    x = np.arange(size)
    k = np.exp(-0.5 * ((x[:, None] - x[None, :]) / bandwidth) ** 2)
    k /= k.sum(axis=1, keepdims=True)
    k.setflags(write=False)
    return k


def smooth(values: np.ndarray, sigma: float, ordered: int) -> tuple[np.ndarray, float, float]:
    """``values`` (noisy counts, Gaussian noise of sd ``sigma`` per code) with its first ``ordered``
    codes smoothed by the Gaussian kernel whose bandwidth minimises Stein's unbiased risk estimate,
    the codes after them (a null token, say) left alone.  Returns (counts, bandwidth, the estimated
    squared error over the unsmoothed one, at least 0: Stein's estimate can fall below it); bandwidth 0 and
    the counts unchanged where no bandwidth brings that share down to smoothing_risk_share.  Post-processing: no privacy cost."""
    values = np.asarray(values, dtype=np.float64)
    if ordered < 3 or not sigma > 0:
        return values, 0.0, 1.0
    head = values[:ordered]
    base = ordered * sigma ** 2
    best, best_bandwidth, best_share = head, 0.0, 1.0
    for bandwidth in T.smoothing_bandwidths:
        k = kernel(ordered, bandwidth)
        out = k @ head
        share = (float(((head - out) ** 2).sum()) + 2 * sigma ** 2 * float(np.trace(k)) - base) / base
        if share < best_share:
            best, best_bandwidth, best_share = out, bandwidth, share
    if best_share > T.smoothing_risk_share:
        return values, 0.0, best_share
    return np.concatenate([best, values[ordered:]]), best_bandwidth, max(best_share, 0.0)


def shrink(values: np.ndarray, sigma: float, toward: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """``values`` (noisy counts, Gaussian noise of sd ``sigma`` per cell) pulled toward a prior guess m by the
    positive-part James–Stein weight, the weight w that minimises Stein's unbiased risk estimate of the smoother
    m + w·(y − m), where m is the guess's shape p scaled to the answer's own total: ``toward`` (a public shape)
    or by default the flat histogram.  Either way m = p·(1ᵀy) follows y along one direction, so the smoother's
    divergence is 1 + w(n−1) and w = max(0, 1 − (n−1)σ²/||y − m||²).  Where the noise swamps the answer's departures from the guess (a
    1-way marginal at a tiny budget), its spikes are noise and the guess is the better estimate; where it does
    not, w is near 1.  Returns (counts, w, the estimated squared error over the unshrunk one, at least 0); w = 1
    and the counts unchanged where that share is above smoothing_risk_share.  Post-processing: no privacy cost."""
    values = np.asarray(values, dtype=np.float64)
    n = values.size
    if n < 3 or not sigma > 0:
        return values, 1.0, 1.0
    shape = np.ones(values.shape) if toward is None else np.asarray(toward, dtype=np.float64)
    guess = shape * (values.sum() / shape.sum()) if shape.sum() > 0 else np.full(values.shape, values.mean())
    spread = float(((values - guess) ** 2).sum())
    weight = max(0.0, 1.0 - (n - 1) * sigma ** 2 / spread) if spread > 0 else 0.0
    base = n * sigma ** 2
    share = ((1 - weight) ** 2 * spread + 2 * sigma ** 2 * (1 + weight * (n - 1)) - base) / base
    if share > T.smoothing_risk_share:
        return values, 1.0, share
    return guess + weight * (values - guess), weight, max(share, 0.0)


def toward_zero(values: np.ndarray, sigma: float) -> tuple[np.ndarray, float]:
    """``values`` (noisy counts, Gaussian noise of sd ``sigma`` per cell, n >= 3 cells) times the positive-part
    James–Stein weight toward zero, w = max(0, 1 − (n − 2)σ²/||y||²), and w (1, the counts unchanged, for fewer
    than 3 cells or no noise): where the counts are mostly noise (cells that are empty but for it) they go to
    nearly nothing, where they stand well above it they are kept nearly whole; below the unshrunk squared error
    in expectation (James and Stein 1961).  Post-processing: no privacy cost."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 3 or not sigma > 0:
        return values, 1.0
    power = float((values ** 2).sum())
    weight = max(0.0, 1.0 - (values.size - 2) * sigma ** 2 / power) if power > 0 else 0.0
    return weight * values, weight


def denoise(values: np.ndarray, sigma: float, ordered: int) -> tuple[np.ndarray, str]:
    """A noisy 1-way marginal smoothed along its first ``ordered`` codes (``smooth``) or, where that does not
    pay (an unordered column, or a jagged one), shrunk toward the flat histogram (``shrink``); with what was
    done in words ('' where nothing was).  Post-processing: no privacy cost."""
    out, bandwidth, share = smooth(values, sigma, ordered)
    if bandwidth:
        return out, f"smoothed over {bandwidth:g} codes, estimated squared error {share:.2f} of the noise's"
    out, weight, share = shrink(values, sigma)
    if weight < 1:
        return out, f"shrunk {1 - weight:.0%} toward flat, estimated squared error {share:.2f} of the noise's"
    return out, ""
