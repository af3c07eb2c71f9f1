"""Baseline: noisy group counts and independent noisy 1-way marginals, sampled per group.

The textbook construction (../shared/papers, "Synthetic data: histograms and
marginals"): every non-group column is drawn independently from its own noisy
1-way marginal, so correlations between columns are lost.  It is the floor every
other method must beat.

Budget: with group columns, the joint group-count vector gets GROUP_COUNT_SHARE of
the run's rho and the 1-way marginals split the rest equally; without group
columns the marginals get everything and the total is estimated from their sums.
"""
from __future__ import annotations

import logging

import numpy as np

from lib.marginals import clip_and_normalise, count_marginal
from lib.mechanisms import gaussian_measure
from method.context import RunContext
from method.groups import group_sizes

log = logging.getLogger(__name__)

GROUP_COUNT_SHARE = 0.5


def synthesize(codes: np.ndarray, ctx: RunContext) -> np.ndarray:
    """Synthetic codes (m × d) from noisy group counts and 1-way marginals.

    Privacy cost: exactly ``ctx.ledger.budget``, split over one Gaussian measurement of
    the group counts (if any) and one per other column, each with L2 sensitivity theta.
    """
    names, sizes = ctx.encoder.names, ctx.encoder.sizes
    group_idx = [names.index(g) for g in ctx.options.group_columns]
    other_idx = [j for j in range(len(names)) if j not in group_idx]
    rho = ctx.ledger.budget
    rho_groups = (GROUP_COUNT_SHARE if other_idx else 1.0) * rho if group_idx else 0.0
    rho_each = (rho - rho_groups) / len(other_idx) if other_idx else 0.0

    group_shape = tuple(sizes[j] for j in group_idx)
    with ctx.timed("measuring"):
        groups, marginals = _measure(codes, ctx, group_idx, group_shape, other_idx, rho_groups, rho_each)
    with ctx.timed("sampling"):
        return _sample(ctx, groups, marginals, group_idx, other_idx, group_shape)


def _measure(codes, ctx, group_idx, group_shape, other_idx, rho_groups, rho_each):
    names, sizes, rho = ctx.encoder.names, ctx.encoder.sizes, ctx.ledger.budget
    groups = None
    if group_idx:
        label = " × ".join(ctx.options.group_columns)
        groups = gaussian_measure(count_marginal(codes[:, group_idx], group_shape), ctx.options.group_columns,
                                  ctx.theta, rho_groups, ctx.rng, ctx.ledger, f"group counts ({label})",
                                  ctx.sensitivity_reason(f"counts per {label}"))
        log.info("histogram: group counts per %s get %.0f%% of rho (%.3g, noise sd %.3g per group)",
                 label, 100 * rho_groups / rho, rho_groups, groups.sigma)
    marginals = [gaussian_measure(count_marginal(codes[:, j], (sizes[j],)), (names[j],), ctx.theta, rho_each,
                                  ctx.rng, ctx.ledger, f"1-way marginal {names[j]}",
                                  ctx.sensitivity_reason(f"1-way marginal of {names[j]}"))
                 for j in other_idx]
    if marginals:
        log.info("histogram: %d one-way marginals get %.0f%% of rho (%.3g each, noise sd %.3g per cell)",
                 len(marginals), 100 * rho_each * len(marginals) / rho, rho_each, marginals[0].sigma)
    return groups, marginals


def _sample(ctx, groups, marginals, group_idx, other_idx, group_shape):
    sizes = ctx.encoder.sizes
    if group_idx:
        per_group = np.clip(np.rint(groups.noisy.ravel()), 0, None)
    else:  # inverse-variance weighted mean of the marginals' noisy totals (post-processing)
        weights = np.array([1.0 / (m.noisy.size * m.sigma ** 2) for m in marginals])
        totals = np.array([m.total for m in marginals])
        per_group = np.array([max(0.0, np.rint(weights @ totals / weights.sum()))])
    per_group = group_sizes(per_group, ctx.max_records)

    n = int(per_group.sum())
    out = np.empty((n, len(sizes)), dtype=np.int32)
    if group_idx:
        cells = np.repeat(np.arange(per_group.size), per_group.astype(np.int64))
        out[:, group_idx] = np.column_stack(np.unravel_index(cells, group_shape))
    for j, m in zip(other_idx, marginals):
        out[:, j] = ctx.rng.choice(sizes[j], size=n, p=clip_and_normalise(m.noisy))
    return out

