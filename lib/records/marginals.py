"""Counting marginals of integer-coded records and turning noisy counts into distributions."""
from __future__ import annotations

import math
from typing import Sequence

import numba
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


def code_dtype(sizes: Sequence[int]) -> np.dtype:
    """The smallest unsigned integer type that holds codes 0..size-1 of every column."""
    return np.min_scalar_type(max(max(sizes, default=1) - 1, 0))


def compact_codes(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """``codes`` (n × d, column j in 0..sizes[j]-1) in the smallest unsigned type that holds them, column
    by column in memory (Fortran order), the layout ``count_marginals`` reads fastest."""
    return np.asfortranarray(codes, dtype=code_dtype(sizes))


BATCH_CELLS = 1 << 23  # counts held at once by count_marginals (64 MiB of int64)


def count_marginals(codes: np.ndarray, marginals: Sequence[tuple[Sequence[int], Sequence[int], Sequence[int]]],
                    scale: float | None = None) -> list[np.ndarray]:
    """The histograms of many marginals of ``codes`` (n × d ints) in one parallel pass: each marginal is
    (column indices, widths, shape), a column's code integer-divided by its width (1: exact), counts of
    shape ``shape`` (as ``count_marginal`` of the coarsened columns).  Exact integer counts (int64), or where
    ``scale`` is given the counts times it (float64, in one multiplication), at most about BATCH_CELLS of them
    in memory at once (one pass per batch of marginals)."""
    if not marginals:
        return []
    sizes = [math.prod(shape) for _, _, shape in marginals]
    if len(marginals) > 1 and sum(sizes) > BATCH_CELLS:  # one pass per batch of about BATCH_CELLS counts
        cut = max(1, int(np.searchsorted(np.cumsum(sizes), BATCH_CELLS, side="right")))
        return count_marginals(codes, marginals[:cut], scale) + count_marginals(codes, marginals[cut:], scale)
    arity = max(1, max(len(cols) for cols, _, _ in marginals))
    columns = np.zeros((len(marginals), arity), dtype=np.int64)
    widths = np.ones((len(marginals), arity), dtype=np.int64)
    strides = np.zeros((len(marginals), arity), dtype=np.int64)
    arities = np.array([len(cols) for cols, _, _ in marginals], dtype=np.int64)
    offsets = np.zeros(len(marginals) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes)
    for q, (cols, ws, shape) in enumerate(marginals):
        k = len(cols)
        columns[q, :k], widths[q, :k] = cols, ws if len(ws) else 1
        strides[q, :k] = [math.prod(shape[j + 1:]) for j in range(k)]
    out = np.zeros(offsets[-1], dtype=np.int64)
    _count_many(codes, columns, widths, strides, offsets, arities, out)
    if scale is not None:
        out = out * scale
    return [out[offsets[q]:offsets[q + 1]].reshape(tuple(shape)) for q, (_, _, shape) in enumerate(marginals)]


ROWS_AT_ONCE = 1 << 16  # rows whose cells a thread works out at once in count_marginals (512 KiB of int64)


@numba.njit(parallel=True, cache=True)
def _count_many(codes, columns, widths, strides, offsets, arities, out):
    """out[offsets[q] + cell] += 1 for every row and marginal q (one marginal per thread at a time: no
    two threads write the same counts).  Exact pairs and triples, the most frequent, are counted row by row
    with loops of their own; any other marginal a block of rows at a time, the block's cells worked out
    column by column (each a contiguous run of a column-major table), then counted."""
    n = codes.shape[0]
    for q in numba.prange(columns.shape[0]):
        base, k = offsets[q], arities[q]
        exact = True
        for j in range(k):
            exact = exact and widths[q, j] == 1
        if exact and k == 2:
            c0, c1, s0 = columns[q, 0], columns[q, 1], strides[q, 0]
            for i in range(n):
                out[base + np.int64(codes[i, c0]) * s0 + np.int64(codes[i, c1])] += 1
        elif exact and k == 3:
            c0, c1, c2, s0, s1 = columns[q, 0], columns[q, 1], columns[q, 2], strides[q, 0], strides[q, 1]
            for i in range(n):
                out[base + np.int64(codes[i, c0]) * s0 + np.int64(codes[i, c1]) * s1 + np.int64(codes[i, c2])] += 1
        else:
            _count_by_blocks(codes, columns[q], widths[q], strides[q], base, k, out)


@numba.njit(cache=True)
def _count_by_blocks(codes, columns, widths, strides, base, k, out):
    """out[base + cell] += 1 for every row, the cell over the first k of ``columns`` (each code integer-divided
    by its width, times its stride), ROWS_AT_ONCE rows at a time."""
    n = codes.shape[0]
    buffer = np.empty(min(n, ROWS_AT_ONCE), np.int64)
    for lo in range(0, n, ROWS_AT_ONCE):
        cell = buffer[:min(n, lo + ROWS_AT_ONCE) - lo]
        cell[:] = base
        for j in range(k):
            column, stride, width = codes[lo:lo + cell.size, columns[j]], strides[j], widths[j]
            if width == 1:
                for i in range(cell.size):
                    cell[i] += np.int64(column[i]) * stride
            else:
                for i in range(cell.size):
                    cell[i] += np.int64(column[i]) // width * stride
        for i in range(cell.size):
            out[cell[i]] += 1


def clip_and_normalise(noisy: np.ndarray) -> np.ndarray:
    """Probability vector from noisy counts: negatives set to 0, then scaled to sum 1.

    All-non-positive input gives the uniform distribution.  Post-processing: free.
    """
    p = np.clip(np.asarray(noisy, dtype=np.float64), 0.0, None)
    total = p.sum()
    if total <= 0:
        return np.full(p.shape, 1.0 / p.size)
    return p / total


def coarse_matrix(sizes: list[int], widths: tuple[int, ...]) -> np.ndarray:
    """The 0/1 matrix taking a marginal's exact cells (C order) to its coarse ones (code // width per column, as
    ``Marginal`` coarsens): a coarse reading as a linear query over the exact cells (bench/estimation_probe.py
    hands it to private-pgm so)."""
    matrix: np.ndarray = np.ones((1, 1))
    for size, width in zip(sizes, widths):
        block = np.zeros((-(-size // width), size))
        block[np.arange(size) // width, np.arange(size)] = 1
        matrix = np.kron(matrix, block)
    return matrix
