"""PrivSyn-style choice of 2-way marginals (Zhang et al. 2021, "DenseMarg"), charged to the ledger.

Each candidate pair (a, b) gets a dependency score, the independence gap

    InDif(a, b) = sum over cells |c_ab(x, y) - c_a(x) * c_b(y) / n|,

the L1 error of synthesizing (a, b) as independent.  Adding or removing one record
changes the joint counts by 1 in L1 and the product term by at most 3 (n changes
too), so one record moves a score by at most 4 and one individual (theta records)
by at most 4*theta; over m scores the L2 sensitivity is 4*theta*sqrt(m).  The
scores are released once with the Gaussian mechanism.

The choice itself is post-processing of the noisy scores: starting from the 1-way
marginals, greedily add the pair that lowers the expected total L1 error most,

    error(S) = noise L1 of measuring S + sum of InDif over the pairs not in S,

where measuring S with rho_i proportional to cells_i^(2/3) (the optimal split for
L1 Gaussian error) costs theta/sqrt(pi*R) * (sum_i cells_i^(2/3))^(3/2) in total.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from lib.marginals import count_marginal
from lib.mechanisms import gaussian_measure
from method.context import RunContext

log = logging.getLogger(__name__)

SCORE_SHARE = 0.1  # fraction of the marginal budget spent on the dependency scores


def independence_gap(codes: np.ndarray, a: int, b: int, sizes: tuple[int, ...]) -> float:
    """InDif(a, b) on true counts (private: release only through ``noisy_scores``)."""
    joint = count_marginal(codes[:, [a, b]], (sizes[a], sizes[b])).astype(np.float64)
    n = max(joint.sum(), 1.0)
    return float(np.abs(joint - np.outer(joint.sum(axis=1), joint.sum(axis=0)) / n).sum())


def noisy_scores(codes: np.ndarray, ctx: RunContext, pairs: list[tuple[int, int]], rho: float) -> np.ndarray:
    """Noisy InDif of every pair.  Privacy cost: exactly ``rho`` (one Gaussian release of the vector)."""
    sizes, names = ctx.encoder.sizes, ctx.encoder.names
    scores = np.array([independence_gap(codes, a, b, sizes) for a, b in pairs])
    sensitivity = 4 * ctx.theta * math.sqrt(len(pairs))
    reason = (f"independence gaps of {len(pairs)} pairs: one record moves a gap by at most 4 (1 in the joint "
              f"counts, 3 in the product of margins over n), one individual by 4*theta={4 * ctx.theta}; "
              f"L2 over all pairs 4*theta*sqrt({len(pairs)})")
    m = gaussian_measure(scores, ("pair",), sensitivity, rho, ctx.rng, ctx.ledger,
                         f"dependency scores ({len(pairs)} pairs of {len(names)} columns)", reason)
    return m.noisy


def noise_error(weight: float, theta: int, rho: float) -> float:
    """Expected total L1 Gaussian noise of measuring marginals with rho split ∝ cells^(2/3),
    given ``weight`` = the sum of their cells^(2/3)."""
    return theta / math.sqrt(math.pi * rho) * weight ** 1.5


def greedy_pairs(scores: np.ndarray, pairs: list[tuple[int, int]], sizes: tuple[int, ...],
                 one_way: list[int], theta: int, rho: float) -> list[tuple[int, int]]:
    """Pairs chosen by the greedy error rule of the module doc (post-processing of ``scores``)."""
    weight = sum(sizes[j] ** (2 / 3) for j in one_way)
    remaining = dict(zip(pairs, np.maximum(scores, 0.0)))
    chosen: list[tuple[int, int]] = []
    while remaining:
        base = noise_error(weight, theta, rho)
        gains = {pair: gap - (noise_error(weight + (sizes[pair[0]] * sizes[pair[1]]) ** (2 / 3), theta, rho) - base)
                 for pair, gap in remaining.items()}
        best = max(gains, key=gains.get)
        if gains[best] <= 0:
            break
        chosen.append(best)
        weight += (sizes[best[0]] * sizes[best[1]]) ** (2 / 3)
        del remaining[best]
    return chosen


def allocate(queries: list[tuple[int, ...]], sizes: tuple[int, ...], rho: float) -> list[float]:
    """rho per query, proportional to its cell count^(2/3), summing to ``rho``."""
    weights = np.array([math.prod(sizes[j] for j in q) ** (2 / 3) for q in queries])
    shares = weights / weights.sum() * rho
    shares[-1] = rho - shares[:-1].sum()  # the ledger sums to the budget exactly
    return [float(s) for s in shares]
