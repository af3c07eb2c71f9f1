"""Counting marginals of integer-coded records and turning noisy counts into distributions."""
from __future__ import annotations

import numpy as np


def cell_index(codes: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Flat (row-major) cell index of each row of ``codes`` (n × k ints, column j in 0..sizes[j]-1)."""
    codes = np.asarray(codes)
    if codes.ndim == 1:
        codes = codes[:, None]
    flat = np.zeros(len(codes), dtype=np.int64)
    for j, size in enumerate(sizes):
        flat *= size
        flat += codes[:, j]
    return flat


def count_marginal(codes: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Histogram of the rows of ``codes`` (n × k ints, column j in 0..sizes[j]-1), shape ``sizes``.

    One pass: a flattened cell index and ``np.bincount``.
    """
    return np.bincount(cell_index(codes, sizes), minlength=int(np.prod(sizes))).reshape(sizes)


def clip_and_normalise(noisy: np.ndarray) -> np.ndarray:
    """Probability vector from noisy counts: negatives set to 0, then scaled to sum 1.

    All-non-positive input gives the uniform distribution.  Post-processing: free.
    """
    p = np.clip(np.asarray(noisy, dtype=np.float64), 0.0, None)
    total = p.sum()
    if total <= 0:
        return np.full(p.shape, 1.0 / p.size)
    return p / total
