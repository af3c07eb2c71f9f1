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

Also here: the release audit itself (``run_audit``: D and D' below through one run of the release, as
tests/test_audit.py and bench/audit.py run it), and the goodness-of-fit test and exact distributions the
sampler checks use (tests/test_samplers.py, bench/bench_samplers.py).  Test and bench code: no release
imports it.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta, chisquare

from dpsyn.dataloader.inputs import PublicSide
from dpsyn.stages.run import RunSetup, synthesize_run
from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.schema import Run, parse_schema
from dpsyn.lib.privacy.private_table import PrivateRecords, PrivateTable
from dpsyn.lib.privacy.unit import PrivacyUnit
from dpsyn.method import METHODS


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


def chi_square_gof(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray, width: int = 1) -> float:
    """P-value of Pearson's χ² test of integer ``samples`` against ``pmf`` on the consecutive integers
    ``support``, in blocks of ``width`` integers.  Blocks with expected count < 5 are pooled into the
    two tails, which also take the samples outside ``support``."""
    block = (support - support[0]) // width
    expected = np.bincount(block, weights=pmf / pmf.sum() * len(samples))
    inside = (samples >= support[0]) & (samples <= support[-1])
    observed = np.bincount((samples[inside] - support[0]) // width, minlength=len(expected))
    keep = np.flatnonzero(expected >= 5)
    first, last = keep[0], keep[-1]
    obs = np.concatenate([[observed[:first].sum() + np.sum(samples < support[0])], observed[first:last + 1],
                          [observed[last + 1:].sum() + np.sum(samples > support[-1])]])
    exp = np.concatenate([[expected[:first].sum()], expected[first:last + 1], [expected[last + 1:].sum()]])
    used = exp > 0
    if obs[~used].sum():
        return 0.0  # samples where the distribution has no mass
    return float(chisquare(obs[used], exp[used] * obs.sum() / exp[used].sum()).pvalue)


def discrete_gaussian_pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(support, pmf) of the discrete Gaussian, P(y) ∝ exp(-y²/(2σ²)), on |y| <= 12σ + 2."""
    half = math.ceil(12 * sigma) + 2
    support = np.arange(-half, half + 1)
    pmf = np.exp(-support.astype(float) ** 2 / (2 * sigma ** 2))
    return support, pmf / pmf.sum()


def discrete_laplace_pmf(t: int, s: int) -> tuple[np.ndarray, np.ndarray]:
    """(support, pmf) of the discrete Laplace, P(y) ∝ exp(-|y|·s/t), on |y| <= 40t/s + 2."""
    half = math.ceil(40 * t / s) + 2
    support = np.arange(-half, half + 1)
    pmf = np.exp(-np.abs(support) * s / t)
    return support, pmf / pmf.sum()


BASE_ROWS = 300
SCHEMA = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-6, "max_records": 10_000,
                                 "max_records_per_individual": 1}],
                       "schema": {"X": {"dtype": "str", "values": ["a", "b", "c", "d", "e", "rare"]},
                                  "Y": {"dtype": "int", "values": [0, 1, 2]}}})
RARE = 5


def neighbours(theta: int, seed: int = 0) -> tuple[PrivateRecords, PrivateRecords]:
    """(D, D'): D' adds one individual whose theta rows all sit in the cell X = rare."""
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, RARE, BASE_ROWS), rng.integers(0, 3, BASE_ROWS)]).astype(np.int32)
    ids = np.arange(BASE_ROWS).astype(str).astype(object)
    extra = np.column_stack([np.full(theta, RARE), rng.integers(0, 3, theta)]).astype(np.int32)
    with_ = PrivateRecords(np.vstack([codes, extra]), {},
                         np.concatenate([ids, np.full(theta, "target", dtype=object)]))
    return PrivateRecords(codes, {}, ids), with_


@contextmanager
def broken_mechanism():
    """Within the block, private tables scale their noise for one row per individual, although
    bounding keeps theta rows (for showing that the audit catches it)."""
    original = PrivateTable.sensitivity
    PrivateTable.sensitivity = lambda self, query: query.sensitivity(PrivacyUnit(1))
    try:
        yield
    finally:
        PrivateTable.sensitivity = original


def run_audit(method: str, epsilon: float, delta: float, theta: int, trials: int, seed: int = 0) -> AuditResult:
    """Audit ``method`` at (epsilon, delta) with an individual of ``theta`` rows (see the module doc)."""
    encoder = Encoder.fit(SCHEMA)
    run = Run(epsilon, delta, 10_000, theta)
    spec = METHODS[method]
    setup = RunSetup(spec, spec.make_options(), id_column="individual")  # the records carry ids
    side = PublicSide(SCHEMA, encoder)
    samples = []
    for data in neighbours(theta, seed):
        stats = np.empty(trials)
        for trial in range(trials):
            seeds = np.random.SeedSequence((seed, trial, len(data.codes))).spawn(4)
            codes = synthesize_run(side, data, run, setup, seeds).result.codes
            stats[trial] = np.count_nonzero(codes[:, 0] == RARE)
        samples.append(stats)
    return epsilon_lower_bound(samples[0], samples[1], delta)
