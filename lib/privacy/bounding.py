"""Contribution bounding: at most theta rows per individual.

Truncation looks at one individual's rows at a time (a per-individual
transformation), so adding or removing one individual still changes at most
theta of the rows that are measured; noise is scaled by theta accordingly.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def bound_contributions(ids: np.ndarray, theta: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of the rows to keep: for each id, at most ``theta`` of its rows, at random.

    The choice depends only on ``rng`` and the id grouping, never on other values.
    """
    group = pd.factorize(pd.Series(ids), use_na_sentinel=False)[0]
    order = np.lexsort((rng.random(len(group)), group))
    sorted_group = group[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_group)) + 1]
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    return np.sort(order[rank < theta])
