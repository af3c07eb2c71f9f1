"""Pairs of columns that depart most from independence, where the plan measures only 1-way marginals.

In the write-up's public regime without a public file (a small budget, with groups) the records keep
no association between columns but what the group × column marginals (method/group_columns.py) carry
through the groups: a classifier trained on them learns little (ct_drug_deaths at eps 0.1: accuracy
0.665 against 0.829 trained on the real rows).  Yet a few pairs carry most of the dependence (there,
Fentanyl × Any Opioid departs from independence by 3,165 rows of 7,634 in four cells; the median pair
by 62), and a pair of two-valued columns costs no more to measure than one 1-way marginal.  So, as MST
measures a tree of pairs, under the ``auto`` planner part of the group counts' budget (method/planner.py
planner_pair_share) goes here: the exponential mechanism (``PrivateTable.select``, dependent_pairs_select_share of this
step's rho) picks dependent_pairs_pairs pairs by how far their counts are (L1) from the product of the noisy 1-way
marginals scaled to the noisy total, less the expected L1 noise their own measurement would add (so a
pair of many cells must depart further to be worth it); the rest of the rho measures them (Gaussian,
evenly split).  Consistency and GUM then fit them with everything else.
"""
from __future__ import annotations

import itertools
import logging
import math

import numpy as np

from dpsyn.lib.records.marginals import clip_and_normalise
from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import Marginal
from dpsyn.lib.tuning import T
from dpsyn.method.adaptive import NOISE_L1
from dpsyn.method.base import RunContext

log = logging.getLogger(__name__)



def measure_dependent_pairs(private: PrivateTable, ctx: RunContext, one_ways: dict[int, Target],
                            total: float, rho: float) -> list[Target]:
    """A Target ((a, b), noisy counts, noise sd) for each chosen pair of columns (module doc).

    ``one_ways``: column -> its released noisy 1-way marginal and noise sd; ``total``: the released
    noisy total; both public.  Privacy cost: ``rho`` exactly (dependent_pairs_select_share of it on the choice, the
    rest on the measurements), nothing when fewer than two columns have two or more values.
    """
    names, sizes = ctx.domain.names, ctx.domain.sizes
    pairs = list(itertools.combinations([j for j, t in one_ways.items() if t.noisy.size > 1], 2))
    if not pairs or rho <= 0:
        return []
    k = min(T.dependent_pairs_pairs, len(pairs))
    each = (1 - T.dependent_pairs_select_share) * rho / k
    queries = [Marginal((names[a], names[b])) for a, b in pairs]
    references = [total * np.multiply.outer(clip_and_normalise(one_ways[a].noisy), clip_and_normalise(one_ways[b].noisy))
                  for a, b in pairs]
    penalties = [NOISE_L1 * private.sensitivity(q).l2 / math.sqrt(2 * each) * sizes[a] * sizes[b]
                 for q, (a, b) in zip(queries, pairs)]
    chosen = private.select(queries, references, T.dependent_pairs_select_share * rho, k=k, penalties=penalties,
                            label=f"choice of {k} of {len(pairs)} pairs of columns to measure").chosen
    out = []
    for i in chosen:
        m = private.measure(queries[i], each)
        out.append(Target(pairs[i], m.noisy, m.sigma))
    log.info("dpsyn: measured the %d pairs of columns that depart most from independence: %s (noise sd %.3g per "
             "cell)", k, ", ".join(f"{names[pairs[i][0]]} × {names[pairs[i][1]]}" for i in chosen), out[0].sigma)
    return out
