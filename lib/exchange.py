"""Exchanging a column's values among records that agree on other columns.

Post-processing only: reads and rewrites synthetic records, never private data.
"""
from __future__ import annotations

import numpy as np


def exchange_within(records: np.ndarray, column: int, by: list[int], rng: np.random.Generator) -> int:
    """Permute ``records[:, column]`` at random among the records that agree on every column of ``by``
    (all records when ``by`` is empty), in place; returns how many records got another value.

    Every marginal over ``column`` and columns of ``by`` keeps its counts exactly, as does every
    marginal without ``column``; what changes is ``column``'s association with the columns outside
    ``by``, which becomes that of a random draw given ``by``."""
    n = len(records)
    keys = tuple(records[:, j] for j in reversed(by))
    blocks = np.lexsort(keys) if keys else np.arange(n)  # records in block order (stable)
    shuffled = np.lexsort((rng.random(n),) + keys)       # the same blocks, records in random order within
    before = records[:, column].copy()
    records[blocks, column] = before[shuffled]
    return int(np.count_nonzero(records[:, column] != before))


def exchange_unmeasured(records: np.ndarray, columns: list[int], together: list[tuple[int, ...]],
                        rng: np.random.Generator) -> int:
    """Each of ``columns`` in turn exchanged (``exchange_within``) among the records that agree on every
    column that shares a tuple of ``together`` with it (measured marginals, edit rules' columns), in
    place; returns how many values moved.  Every tuple of ``together`` keeps its counts; what goes is
    each column's association with the columns it shares no tuple with."""
    changed = 0
    for j in columns:
        by = {c for cols in together if j in cols for c in cols}
        changed += exchange_within(records, j, sorted(by - {j}), rng)
    return changed
