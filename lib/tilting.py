"""Exponential tilting of a sample toward target answers (post-processing; no private data here).

The I-projection of the sample's empirical distribution P onto the distributions whose query
answers lie within gamma of targets a (min KL(Q || P) s.t. |E_Q q_k - a_k| <= gamma) is the
tilt Q(x) ∝ P(x) exp(-λ·(q(x) - a)), λ minimising the convex dual
f(λ) = log E_P exp(-λ·(q - a)) + gamma ||λ||_1 (Wang et al., "Post-processing private synthetic
data for improving utility on selected measures", Theorem 1).  This module holds the three
numeric steps of that paper, each a pure function of public arrays:

* :func:`consistent_answers`: noisy query sums made consistent, i.e. answers some weighting of
  the sample's support can give (the paper's §3 projection, a non-negative least squares with
  cvxpy), so that the tilt exists;
* :func:`tilt`: λ by proximal steps on the dual as the paper's Algorithm 1, full-batch and
  with Newton's curvature (see there why);
* :func:`resample`: rows drawn by systematic resampling in proportion to their weights, per
  group, each group keeping its size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp, softmax

from lib.raking import systematic_draw

SUPPORT_CAP = 4000  # support points in the consistency projection; a subset keeps the answers feasible
ITERATIONS = 50


def consistent_answers(support: np.ndarray, noisy: np.ndarray, sigma: np.ndarray) -> np.ndarray | None:
    """Mean answers a* = Q m / sum(m) of the non-negative weighting m of the ``support`` rows
    (S × K: each support point's query values, one column per noisy coordinate) whose sums Q m
    are nearest the ``noisy`` sums in the noise-weighted least squares sense (min ||(Q m -
    noisy) / sigma||², m >= 0: the Gaussian-noise projection of the paper's §3).  Any answer
    vector returned is one a distribution on the support gives, so the tilt toward it exists.
    None when the projection puts no mass anywhere (every noisy sum at or below 0)."""
    import cvxpy as cp  # here, not at the top: it takes over a second to import, and only --reweight needs it
    support = np.asarray(support, dtype=np.float64)
    noisy = np.asarray(noisy, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    scale = max(float(np.abs(noisy).max()), 1.0)  # weights in units of the largest sum keep the solver's scale
    m = cp.Variable(support.shape[0], nonneg=True)
    residual = cp.multiply(support.T @ m - noisy / scale, scale / sigma)
    cp.Problem(cp.Minimize(cp.sum_squares(residual))).solve(solver=cp.CLARABEL)
    if m.value is None:
        raise RuntimeError("the consistency projection did not solve")
    weights = np.clip(m.value, 0.0, None)
    if weights.sum() <= 0:
        return None
    return support.T @ weights / weights.sum()


@dataclass(frozen=True)
class TiltResult:
    """λ, the row weights exp(-λ·(q - a)) times the base weights (normalised to sum 1), and the
    full-sample objective f(λ) before and after."""

    lam: np.ndarray
    weights: np.ndarray
    objective: tuple[float, float]


def objective(qbar: np.ndarray, lam: np.ndarray, base: np.ndarray, gamma: float) -> float:
    """f(λ) = log Σ_i base_i exp(-λ·qbar_i) + gamma ||λ||_1 (``base`` sums to 1)."""
    return float(logsumexp(np.log(base) - qbar @ lam)) + gamma * float(np.abs(lam).sum())


def tilt(qbar: np.ndarray, base: np.ndarray | None = None, gamma: float = 1e-5,
         iterations: int = ITERATIONS) -> TiltResult:
    """λ* of the dual f(λ) = log E_base exp(-λ·qbar) + gamma ||λ||_1 for ``qbar`` (n × K: each row's
    query values minus the targets) and positive ``base`` weights (default uniform).

    The paper's Algorithm 1 takes proximal gradient steps on λ with the compositional gradient
    estimate E_w[qbar] / E_w[1], w_i = base_i exp(-λ·qbar_i) (in the log domain of its Algorithm
    2).  Here every step uses all rows (with mini-batches of 256 or 4,096 rows the steps
    diverged on Adult's heavy-tailed moments) and is a proximal Newton step: the quadratic
    model of f with the queries' covariance under the current tilt (f's curvature) plus the ℓ1
    term, minimised by coordinate descent (:func:`_newton_step`), then halved until the whole
    objective decreases (plain gradient steps needed thousands of iterations).  Stops after
    ``iterations`` steps or when no step decreases it.  Deterministic."""
    qbar = np.asarray(qbar, dtype=np.float64)
    n = qbar.shape[0]
    base = np.full(n, 1.0 / n) if base is None else np.asarray(base, dtype=np.float64) / np.sum(base)
    lam = np.zeros(qbar.shape[1])
    value = before = objective(qbar, lam, base, gamma)
    for _ in range(iterations):
        w = _weights(qbar, lam, base)
        mean = w @ qbar  # minus the log-partition's gradient
        centred = qbar - mean
        curvature = (centred * w[:, None]).T @ centred
        direction = _newton_step(lam, -mean, curvature, gamma) - lam
        if np.abs(direction).max() < 1e-12:
            break
        alpha = 1.0
        while alpha > 1e-6:
            trial = lam + alpha * direction
            trial_value = objective(qbar, trial, base, gamma)
            if trial_value < value:
                break
            alpha /= 2
        else:
            break
        lam, value = trial, trial_value
    return TiltResult(lam, _weights(qbar, lam, base), (before, value))


def _newton_step(lam: np.ndarray, gradient: np.ndarray, curvature: np.ndarray, gamma: float,
                 sweeps: int = 200) -> np.ndarray:
    """argmin over x of gradient·(x - λ) + ½ (x - λ)' H (x - λ) + gamma ||x||_1 (H = ``curvature``,
    plus a ridge of 1e-9 of its trace for directions the queries never vary in): the exact
    minimiser when gamma = 0 (a least-squares solve), otherwise by cyclic coordinate descent with
    soft-thresholding until no coordinate moves by more than 1e-12."""
    k = len(lam)
    h = curvature + np.eye(k) * (1e-9 * max(float(np.trace(curvature)), 1e-300) / k)
    if gamma <= 0:
        return lam - np.linalg.solve(h, gradient)
    x = lam.copy()
    for _ in range(sweeps):
        largest = 0.0
        for j in range(k):
            b = gradient[j] + h[j] @ (x - lam) - h[j, j] * (x[j] - lam[j])
            z = lam[j] - b / h[j, j]
            new = np.sign(z) * max(abs(z) - gamma / h[j, j], 0.0)
            largest = max(largest, abs(new - x[j]))
            x[j] = new
        if largest < 1e-12:
            break
    return x


def _weights(qbar: np.ndarray, lam: np.ndarray, base: np.ndarray) -> np.ndarray:
    return softmax(np.log(base) - qbar @ lam)


def resample(weights: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row indices drawn by systematic resampling with probabilities ∝ ``weights`` within each
    group (``groups``: one label per row), each group keeping its number of rows; a group whose
    weights are all 0 keeps its rows.  The rows are shuffled before the draw (a regular grid over
    weights in file order would follow any period in them) and sorted after it.  Groups come
    out in the order of their first row."""
    weights = np.asarray(weights, dtype=np.float64)
    if not (np.isfinite(weights).all() and (weights >= 0).all()):
        raise ValueError("resampling weights must be finite and non-negative")
    _, first, labels, sizes = np.unique(groups, return_index=True, return_inverse=True, return_counts=True)
    members = np.split(np.argsort(labels, kind="stable"), np.cumsum(sizes)[:-1])  # one pass, not one per group
    out = []
    for g in np.argsort(first):
        rows = members[g]
        if weights[rows].sum() <= 0:
            out.append(rows)
            continue
        out.append(np.sort(rows[systematic_draw(weights[rows], len(rows), rng)]))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
