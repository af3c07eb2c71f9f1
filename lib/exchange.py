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
