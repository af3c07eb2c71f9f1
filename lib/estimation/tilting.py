"""Exponential tilting of a sample toward target answers (post-processing; no private data here).

The I-projection of the sample's empirical distribution P onto the distributions whose query
answers lie within gamma of targets a (min KL(Q || P) s.t. |E_Q q_k - a_k| <= gamma) is the
tilt Q(x) ∝ P(x) exp(-λ·(q(x) - a)), λ minimising the convex dual
f(λ) = log E_P exp(-λ·(q - a)) + gamma ||λ||_1 (Wang et al., "Post-processing private synthetic
data for improving utility on selected measures", Theorem 1).  This module holds the three
numeric steps of that paper, each a pure function of public arrays:

* :func:`denoised_answers`: the noisy answers combined with the sample's own answers, each
  weighted by how precise it is, constrained to answers some distribution on the sample's
  support gives (the paper's §3 projection with the sample as a prior, cvxpy), so that the
  tilt exists and an answer within noise of the sample's is not chased;
* :func:`tilt`: λ by proximal steps on the dual as the paper's Algorithm 1, full-batch and
  with Newton's curvature (see there why);
* :func:`resample`: rows drawn by systematic resampling in proportion to their weights, per
  group, each group keeping its size;

and :func:`tempered`, which stops a tilt part of the way so that the weights keep a floor of
effective sample size.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp, softmax

from dpsyn.lib.estimation.raking import systematic_draw
from dpsyn.lib.tuning import T



def denoised_answers(support: np.ndarray, noisy: np.ndarray, noise_sd: np.ndarray, synthetic: np.ndarray,
                     prior_sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean answers a* = Q'p of the distribution p on the ``support`` rows (S × K: each support point's
    query values) that best fits both sources of what the true answers are: the ``noisy`` answers
    (noise sd ``noise_sd``) and the ``synthetic`` data's own answers (how far they are from the truth:
    sd ``prior_sd``), i.e. min Σ_k (a*_k - noisy_k)² / noise_sd_k² + (a*_k - synthetic_k)² / prior_sd_k²
    over the simplex (cvxpy).  This is the paper's §3 projection with the synthetic data as a prior:
    where the noise dwarfs the synthetic data's error, a* stays at the synthetic answer; where the
    noise is small, it goes to the noisy one.  Any a* returned is one a distribution on the support
    gives, so the tilt toward it exists.  Returns a* and the sd of the unconstrained estimate
    (``posterior``), the tolerance the tilt can allow each answer."""
    import cvxpy as cp  # here, not at the top: it takes over a second to import, and only --reweight needs it
    support = np.asarray(support, dtype=np.float64)
    target, sd = posterior(noisy, noise_sd, synthetic, prior_sd)
    # a zero sd pins the answer, as far as the solver can
    scale = np.maximum(sd, T.tilting_pin * np.asarray(noise_sd, dtype=np.float64))
    p = cp.Variable(support.shape[0], nonneg=True)
    residual = cp.multiply(support.T @ p - target, 1.0 / scale)
    with warnings.catch_warnings():  # "optimal_inaccurate" still gives a distribution, which is all a* needs
        warnings.simplefilter("ignore", UserWarning)
        cp.Problem(cp.Minimize(cp.sum_squares(residual)), [cp.sum(p) == 1]).solve(solver=cp.CLARABEL)
    if p.value is None:
        raise RuntimeError("the denoising fit did not solve")
    weights = np.clip(p.value, 0.0, None)
    return support.T @ weights / weights.sum(), sd


def posterior(noisy: np.ndarray, noise_sd: np.ndarray, synthetic: np.ndarray,
              prior_sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Precision-weighted mean of the noisy and the synthetic answers, and its sd (both elementwise):
    the estimate of the true answers before the support's constraint; a zero ``prior_sd`` keeps the
    synthetic answer with sd 0."""
    noise_var = np.square(np.asarray(noise_sd, dtype=np.float64))
    prior_var = np.square(np.asarray(prior_sd, dtype=np.float64))
    total = noise_var + prior_var
    share = np.divide(prior_var, total, out=np.zeros_like(total), where=total > 0)  # weight of the noisy answer
    target = np.asarray(synthetic, dtype=np.float64) + share * (np.asarray(noisy, dtype=np.float64) - synthetic)
    return target, np.sqrt(share * noise_var)


def prior_sd(noisy: np.ndarray, noise_sd: np.ndarray, synthetic: np.ndarray) -> float:
    """How far the synthetic answers are from the true ones, one sd for a block of answers, estimated
    from their distance to the noisy answers (empirical Bayes: E (noisy - synthetic)² = that sd² +
    noise sd², so the sd is what the mean squared distance leaves above the noise; 0 when nothing)."""
    gap = np.square(np.asarray(noisy, dtype=np.float64) - synthetic) - np.square(noise_sd)
    return float(np.sqrt(max(float(gap.mean()), 0.0))) if gap.size else 0.0


def effective_share(weights: np.ndarray) -> float:
    """Kish's effective sample size of ``weights`` as a share of their number (1 for equal weights)."""
    w = np.asarray(weights, dtype=np.float64)
    return float(w.sum() ** 2 / (len(w) * np.square(w).sum())) if len(w) and w.sum() > 0 else 1.0


def tempered(weights: np.ndarray, floor: float) -> tuple[np.ndarray, float]:
    """``weights`` raised to the largest power t in [0, 1] whose effective share is at least ``floor``
    (t = 1: unchanged; t = 0: equal weights), and t: the tilt stopped part of the way (bisection)."""
    w = np.asarray(weights, dtype=np.float64)
    if effective_share(w) >= floor:
        return w, 1.0
    logw = np.log(np.maximum(w, 1e-300))
    low, high = 0.0, 1.0
    for _ in range(40):
        t = (low + high) / 2
        if effective_share(softmax(t * logw)) >= floor:
            low = t
        else:
            high = t
    return softmax(low * logw), low


@dataclass(frozen=True)
class TiltResult:
    """λ, the row weights exp(-λ·(q - a)) times the base weights (normalised to sum 1), and the
    full-sample objective f(λ) before and after."""

    lam: np.ndarray
    weights: np.ndarray
    objective: tuple[float, float]


def objective(qbar: np.ndarray, lam: np.ndarray, base: np.ndarray, gamma: float | np.ndarray) -> float:
    """f(λ) = log Σ_i base_i exp(-λ·qbar_i) + Σ_k gamma_k |λ_k| (``base`` sums to 1; ``gamma`` one
    tolerance for every answer or one per answer)."""
    return float(logsumexp(np.log(base) - qbar @ lam)) + float(np.sum(gamma * np.abs(lam)))


def tilt(qbar: np.ndarray, base: np.ndarray | None = None, gamma: float | np.ndarray = 1e-5,
         iterations: int | None = None) -> TiltResult:
    """λ* of the dual f(λ) = log E_base exp(-λ·qbar) + Σ_k gamma_k |λ_k| for ``qbar`` (n × K: each row's
    query values minus the targets) and positive ``base`` weights (default uniform): the tilt that
    brings each answer k within gamma_k of its target (``gamma``: one tolerance or one per answer).

    The paper's Algorithm 1 takes proximal gradient steps on λ with the compositional gradient
    estimate E_w[qbar] / E_w[1], w_i = base_i exp(-λ·qbar_i) (in the log domain of its Algorithm
    2).  Here every step uses all rows (with mini-batches of 256 or 4,096 rows the steps
    diverged on Adult's heavy-tailed moments) and is a proximal Newton step: the quadratic
    model of f with the queries' covariance under the current tilt (f's curvature) plus the ℓ1
    term, minimised by coordinate descent (:func:`_newton_step`), then halved until the whole
    objective decreases (plain gradient steps needed thousands of iterations).  Stops after
    ``iterations`` steps or when no step decreases it.  Deterministic."""
    iterations = T.tilting_iterations if iterations is None else iterations
    qbar = np.asarray(qbar, dtype=np.float64)
    n = qbar.shape[0]
    base = np.full(n, 1.0 / n) if base is None else np.asarray(base, dtype=np.float64) / np.sum(base)
    lam = np.zeros(qbar.shape[1])
    gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), lam.shape)
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


def _newton_step(lam: np.ndarray, gradient: np.ndarray, curvature: np.ndarray, gamma: np.ndarray,
                 sweeps: int = 200) -> np.ndarray:
    """argmin over x of gradient·(x - λ) + ½ (x - λ)' H (x - λ) + Σ gamma_j |x_j| (H = ``curvature``,
    plus a ridge of 1e-9 of its trace for directions the queries never vary in): the exact
    minimiser when gamma = 0 (a least-squares solve), otherwise by cyclic coordinate descent with
    soft-thresholding until no coordinate moves by more than 1e-12."""
    k = len(lam)
    h = curvature + np.eye(k) * (1e-9 * max(float(np.trace(curvature)), 1e-300) / k)
    if not gamma.any():
        return lam - np.linalg.solve(h, gradient)
    x = lam.copy()
    for _ in range(sweeps):
        largest = 0.0
        for j in range(k):
            b = gradient[j] + h[j] @ (x - lam) - h[j, j] * (x[j] - lam[j])
            z = lam[j] - b / h[j, j]
            new = np.sign(z) * max(abs(z) - gamma[j] / h[j, j], 0.0)
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
