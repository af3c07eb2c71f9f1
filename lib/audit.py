"""Empirical privacy audit: a statistical lower bound on epsilon from two neighbouring datasets.

Run a release many times on D (without one individual) and on D' (with that
individual's theta rows, all in a cell nobody else occupies), each time with fresh
noise, and record one number per output that exposes the individual (how many
output rows fall in that cell).  (eps, delta)-DP requires, for every threshold t,

    P[S(D') >= t] <= exp(eps) * P[S(D) >= t] + delta   (and the same with D, D' swapped).

With Clopper-Pearson bounds (a lower bound on the left-hand probability, an upper
bound on the right-hand one, Bonferroni-corrected over the thresholds tried), every
threshold gives eps >= ln((p_hi_lower - delta) / p_lo_upper) with confidence
1 - alpha.  A correct release keeps the bound below its epsilon; a release whose
noise ignores theta shows a bound far above it.  An audit can only refute a
guarantee, never prove one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - alpha) exact binomial interval for a proportion."""
    lo = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    hi = 1.0 if successes == trials else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return lo, hi


@dataclass(frozen=True)
class AuditResult:
    epsilon_lower_bound: float
    threshold: float
    trials: int
    alpha: float


def epsilon_lower_bound(without: np.ndarray, with_: np.ndarray, delta: float, alpha: float = 0.05,
                        n_thresholds: int = 20) -> AuditResult:
    """Largest eps lower bound over threshold tests ``S >= t`` (both directions) on the two samples."""
    without, with_ = np.asarray(without, float), np.asarray(with_, float)
    pooled = np.concatenate([without, with_])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0.02, 0.98, n_thresholds)))
    level = alpha / (2 * len(thresholds))  # Bonferroni over thresholds and the two directions
    best, best_t = 0.0, float("nan")
    for t in thresholds:
        for a, b in ((with_ >= t, without >= t), (without < t, with_ < t)):
            a_lo, _ = clopper_pearson(int(a.sum()), len(a), level)
            _, b_hi = clopper_pearson(int(b.sum()), len(b), level)
            if a_lo - delta > 0 and b_hi > 0:
                bound = math.log((a_lo - delta) / b_hi)
                if bound > best:
                    best, best_t = bound, float(t)
    return AuditResult(best, best_t, min(len(without), len(with_)), alpha)
