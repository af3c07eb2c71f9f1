"""PrivSyn-style choice of 2-way marginals (Zhang et al. 2021, "DenseMarg"): post-processing.

Each candidate pair (a, b) has a dependency score, the independence gap

    InDif(a, b) = sum over cells |c_ab(x, y) - c_a(x) * c_b(y) / n|,

the L1 error of synthesizing (a, b) as independent, released once through the private
table (lib/privacy/queries.DependencyScores derives its sensitivity, 4*theta*sqrt(m) over
m pairs).  The choice is post-processing of the noisy scores: starting from the 1-way
marginals, greedily add the pair that lowers the expected total L1 error most,

    error(S) = noise L1 of measuring S + sum of InDif over the pairs not in S,

where measuring S with rho_i proportional to cells_i^(2/3) (the optimal split for
L1 Gaussian error) costs theta/sqrt(pi*R) * (sum_i cells_i^(2/3))^(3/2) in total.
"""
from __future__ import annotations

import math

import numpy as np



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
        best = max(gains, key=lambda pair: gains[pair])
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
