"""Baseline: noisy group counts and independent noisy 1-way marginals, sampled per group.

The textbook construction (the chapter "Synthetic Data": a noisy histogram of each column
sampled as a 1-way marginal): every non-group column is drawn independently from its own noisy
1-way marginal, so correlations between columns are lost.  It is the floor every
other method must beat.

Budget: with group columns, the joint group-count vector gets histogram_group_count_share of
the run's rho and the 1-way marginals split the rest equally; without group
columns the marginals get everything and the total is estimated from their sums.
"""
from __future__ import annotations

import logging

import numpy as np

from dpsyn.lib.estimation.consistency import common_total
from dpsyn.lib.records.marginals import clip_and_normalise
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import Marginal
from dpsyn.lib.tuning import T
from dpsyn.method.base import Method, PublicData, RunContext, SynthesisResult
from dpsyn.method.groups import group_sizes

log = logging.getLogger(__name__)



def synthesize(private: PrivateTable, public: PublicData | None, ctx: RunContext, options) -> SynthesisResult:
    """Synthetic codes from noisy group counts and 1-way marginals (the public file is not used).

    Privacy cost: exactly what remains of the run's budget, split over one Gaussian measurement of the group
    counts (if any) and one per other column.
    """
    names = ctx.domain.names
    groups = ctx.group_columns
    others = [c for c in names if c not in groups and c not in ctx.skip]
    rho = private.remaining
    rho_groups = (T.histogram_group_count_share if others else 1.0) * rho if groups else 0.0
    rho_each = (rho - rho_groups) / len(others) if others else 0.0
    with ctx.timed("measuring"):
        counts = None
        if groups:
            label = " × ".join(groups)
            counts = private.measure(Marginal(groups), rho_groups, f"group counts ({label})")
            log.info("histogram: group counts per %s get %.0f%% of rho (%.3g, noise sd %.3g per group)",
                     label, 100 * rho_groups / rho, rho_groups, counts.sigma)
        marginals = [private.measure(Marginal((c,)), rho_each) for c in others]
        if marginals:
            log.info("histogram: %d one-way marginals get %.0f%% of rho (%.3g each, noise sd %.3g per cell)",
                     len(marginals), 100 * rho_each * len(marginals) / rho, rho_each, marginals[0].sigma)
    with ctx.timed("sampling"):
        return SynthesisResult(_sample(ctx, counts, marginals))


def _sample(ctx: RunContext, counts, marginals) -> np.ndarray:
    domain, groups = ctx.domain, ctx.group_columns
    if groups:
        per_group = np.clip(np.rint(counts.noisy.ravel()), 0, None)
    else:  # inverse-variance weighted mean of the marginals' noisy totals (post-processing)
        per_group = np.array([np.rint(common_total([m.noisy for m in marginals], [m.sigma for m in marginals]))])
    per_group = group_sizes(per_group, ctx.max_records)

    n = int(per_group.sum())
    out = np.zeros((n, len(domain.names)), dtype=np.int32)
    if groups:
        cells = np.repeat(np.arange(per_group.size), per_group.astype(np.int64))
        out[:, domain.indices(groups)] = np.column_stack(np.unravel_index(cells, domain.shape(groups)))
    for m in marginals:
        (column,) = m.attrs
        out[:, domain.index(column)] = ctx.rng.choice(domain.size((column,)), size=n, p=clip_and_normalise(m.noisy))
    return out


METHOD = Method("histogram", "the textbook baseline: noisy group counts and independent noisy 1-way marginals",
                synthesize)
