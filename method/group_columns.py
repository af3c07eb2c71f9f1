"""Group × column marginals of the columns whose distribution differs most between groups.

In the write-up's public regime without a public file (a small budget, with groups) only group
counts and 1-way marginals are measured, so every group gets every column's overall distribution.
Yet a column's shares per group are what a per-group score reads most, and a handful of columns
carry most of the difference between groups.  So, under the ``auto`` planner, part of the
group counts' budget (method/planner.py planner_group_column_share; only where the counts stay precise enough,
planner_group_count_noise) goes here instead: the exponential
mechanism (``PrivateTable.select``, adaptive_select_share of this step's rho, as in the adaptive rounds) picks group_columns_group_columns columns by
how far their group × column counts are (L1) from the noisy group counts times their noisy overall
distribution, less the L1 error that the noise of that reference alone explains; the rest of the rho
measures the chosen group × column marginals (Gaussian, evenly split).  They also inform the group
counts and the 1-way marginals through consistency, and groups are refitted to them as in the
two-way regime (method/groups.py).
"""
from __future__ import annotations

import logging

import numpy as np

from dpsyn.lib.records.marginals import clip_and_normalise
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import Marginal
from dpsyn.lib.tuning import T
from dpsyn.method.adaptive import NOISE_L1
from dpsyn.method.base import RunContext

log = logging.getLogger(__name__)



def measure_group_columns(private: PrivateTable, ctx: RunContext, group_idx: list[int],
                          counts: np.ndarray, one_ways: dict[int, Target], rho: float) -> list[Target]:
    """A Target (group columns + (j,), noisy counts, noise sd) for each chosen column j (module doc).

    ``counts``: the released group counts (group shape); ``one_ways``: column -> its released noisy
    1-way marginal and noise sd; both public.  Privacy cost: ``rho`` exactly (adaptive_select_share of it on
    the choice, the rest on the measurements), nothing when no column has two or more values.
    """
    names = ctx.domain.names
    columns = [j for j, t in one_ways.items() if t.noisy.size > 1]
    if not columns or rho <= 0:
        return []
    k = min(T.group_columns_group_columns, len(columns))
    groups = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    queries = [Marginal(tuple(names[g] for g in group_idx) + (names[j],)) for j in columns]
    references = [np.multiply.outer(groups, clip_and_normalise(one_ways[j].noisy)) for j in columns]
    penalties = [NOISE_L1 * one_ways[j].sigma * one_ways[j].noisy.size for j in columns]
    chosen = private.select(queries, references, T.adaptive_select_share * rho, k=k, penalties=penalties,
                            label=f"choice of {k} of {len(columns)} columns to measure per group").chosen
    each = (1 - T.adaptive_select_share) * rho / k
    out = []
    for i in chosen:
        m = private.measure(queries[i], each)
        out.append(Target(tuple(group_idx) + (columns[i],), m.noisy, m.sigma))
    log.info("dpsyn: measured per group (%s) the %d columns that differ most between groups: %s (noise sd %.3g "
             "per cell)", " × ".join(names[g] for g in group_idx), k, ", ".join(names[columns[i]] for i in chosen),
             out[0].sigma)
    return out
