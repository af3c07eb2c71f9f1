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
    block = _block_index(records, by)
    blocks = np.argsort(block, kind="stable")          # records in block order (stable)
    shuffled = np.lexsort((rng.random(n), block))      # the same blocks, records in random order within
    before = records[:, column].copy()
    records[blocks, column] = before[shuffled]
    return int(np.count_nonzero(records[:, column] != before))


def _block_index(records: np.ndarray, by: list[int]) -> np.ndarray:
    """Each record's block: its values of ``by`` as one integer, ordered as they are (the first column most
    significant), each column's radix one more than its largest value; all 0 when ``by`` is empty.  Where the
    radices' product would pass 2**62, the blocks so far are first replaced by their ranks (the same order)."""
    block, radix = np.zeros(len(records), dtype=np.int64), 1
    for j in by:
        column = records[:, j].astype(np.int64)
        size = int(column.max(initial=0)) + 1
        if radix * size > 2 ** 62:
            block = np.unique(block, return_inverse=True)[1].reshape(-1).astype(np.int64)
            radix = int(block.max(initial=0)) + 1
        block, radix = block * size + column, radix * size
    return block


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
