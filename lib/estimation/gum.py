"""Gradually Update Method (GUM, from PrivSyn/DPSyn): move records toward target marginals.

Post-processing only: GUM reads synthetic records and target marginals (noisy,
made consistent), never private data, so it costs no privacy budget.

Each pass visits every target marginal (in a random order) and, for that marginal,
moves a fraction alpha of the surplus of every over-full cell to the under-full
cells (the records to move drawn from each over-full cell without repeats, destinations
in proportion to their deficit; only the movers are visited, not every record).  A moved record is
either replaced by a copy of a record already sitting in its destination cell
("duplicate", which keeps the other columns' joint structure of that cell), or
has only this marginal's columns rewritten to the destination cell ("rewrite").
alpha decays geometrically from pass to pass.

With forbidden boxes (edit rules, lib/records/constraints.py) the start records are repaired
first and a rewrite that would put a record in a box is undone, so GUM never proposes a
forbidden record (a duplicate copies a record that is already allowed).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from dpsyn.lib.records.constraints import NO_BOXES, Boxes, record_forbidden, repair
from dpsyn.lib.records.marginals import code_dtype
from dpsyn.lib.estimation.measurement import MarginalTarget


@dataclass(frozen=True)
class GumOptions:
    """Iterations, alpha schedule (alpha * decay**pass) and the share of moves made by duplication."""

    iterations: int = 25
    alpha: float = 0.8
    decay: float = 0.9
    duplicate_share: float = 0.6


def gum(records: np.ndarray, sizes: tuple[int, ...], targets: list[MarginalTarget],
        rng: np.random.Generator, options: GumOptions = GumOptions(), boxes: Boxes = NO_BOXES) -> np.ndarray:
    """Updated copy of ``records`` (n × d codes) whose marginals approach ``targets``, none of
    them in a forbidden box.

    ``targets``: lib/estimation/measurement.py Targets, ``query`` the column indices and ``noisy`` a
    non-negative array of that marginal's shape, each rescaled to sum to n (their sigma and weight
    are not read: GUM moves toward every target alike).  Deterministic given ``rng``'s state.
    The copy is int32 and row-major, or where ``records`` come as ``compact_codes`` gives them, in
    that layout (the kernel's own: a caller that keeps them so pays no conversion each call).
    Costs no privacy budget.
    """
    compact = records.dtype == code_dtype(sizes) and records.flags.f_contiguous
    start = repair(records, boxes, rng) if boxes else records
    if len(start) == 0 or not targets:
        return np.array(start, dtype=code_dtype(sizes), order="F") if compact else \
            np.array(start, dtype=np.int32, order="C")
    # the kernel reads a marginal's columns of every record in every step: column by column in the smallest
    # type, those columns are all it reads (a record's row of int32 codes would bring in all of them)
    work = np.array(start, dtype=code_dtype(sizes), order="F")  # a copy: the kernel moves records in place
    attrs = np.concatenate([np.asarray(t.query, dtype=np.int64) for t in targets])
    attr_ptr = np.cumsum([0] + [len(t.query) for t in targets]).astype(np.int64)
    flat = []
    for target in targets:
        t = np.clip(np.asarray(target.noisy, dtype=np.float64).ravel(), 0, None)
        flat.append(t * (len(work) / t.sum()) if t.sum() > 0 else np.full(t.size, len(work) / t.size))
    cell_ptr = np.cumsum([0] + [len(t) for t in flat]).astype(np.int64)
    alphas = options.alpha * options.decay ** np.arange(options.iterations)
    _gum_kernel(work, np.asarray(sizes, dtype=np.int64), attrs, attr_ptr, np.concatenate(flat), cell_ptr,
                alphas, options.duplicate_share, int(rng.integers(2 ** 62)), *boxes.packed())
    return work if compact else np.ascontiguousarray(work, dtype=np.int32)


@numba.njit(cache=True)
def _gum_kernel(records, sizes, attrs, attr_ptr, targets, cell_ptr, alphas, dup_share, seed,
                box_cols, box_ptr, box_masks, mask_ptr):
    np.random.seed(seed)
    n = records.shape[0]
    n_marg = len(attr_ptr) - 1
    cell = np.empty(n, np.int64)
    members = np.empty(n, np.int64)
    old = np.empty(records.shape[1], records.dtype)
    checked = len(box_ptr) > 1
    for alpha in alphas:
        for m in np.random.permutation(n_marg):
            a0, a1, c0 = attr_ptr[m], attr_ptr[m + 1], cell_ptr[m]
            ncell = cell_ptr[m + 1] - c0
            lanes = np.zeros((LANES, ncell), np.int64)
            _cells(records, sizes, attrs[a0:a1], cell, lanes)
            counts = lanes.sum(axis=0)
            quota = np.zeros(ncell, np.int64)
            deficit = np.zeros(ncell)
            moves = 0
            total_deficit = 0.0
            for c in range(ncell):
                diff = counts[c] - targets[c0 + c]
                if diff > 0:
                    q = alpha * diff
                    qi = int(q)
                    if np.random.random() < q - qi:
                        qi += 1
                    quota[c] = min(qi, counts[c])
                    moves += quota[c]
                elif diff < 0:
                    deficit[c] = -diff
                    total_deficit -= diff
            if moves == 0 or total_deficit <= 0:
                continue
            # destinations in proportion to deficit (systematic sampling), in random order
            dest = np.empty(moves, np.int64)
            step = total_deficit / moves
            pos = np.random.random() * step
            acc = 0.0
            c = 0
            for i in range(moves):
                while c < ncell - 1 and acc + deficit[c] <= pos:
                    acc += deficit[c]
                    c += 1
                dest[i] = c
                pos += step
            dest = dest[np.random.permutation(moves)]
            # records of each cell in increasing order (counting sort): the movers and the duplication sources
            start = np.zeros(ncell + 1, np.int64)
            for c in range(ncell):
                start[c + 1] = start[c] + counts[c]
            _sort_by_cell(cell, lanes, start, members)
            # quota[c] movers drawn from each over-full cell without repeats (partial Fisher-Yates
            # within the cell's members), then taken in random order
            movers = np.empty(moves, np.int64)
            j = 0
            for c in range(ncell):
                s0 = start[c]
                for k in range(quota[c]):
                    pick = s0 + k + np.random.randint(counts[c] - k)
                    members[s0 + k], members[pick] = members[pick], members[s0 + k]
                    movers[j] = members[s0 + k]
                    j += 1
            movers = movers[np.random.permutation(moves)]
            for i in range(moves):
                r = movers[i]
                t = dest[i]
                if counts[t] > 0 and np.random.random() < dup_share:
                    src = members[start[t] + np.random.randint(counts[t])]
                    records[r, :] = records[src, :]
                else:
                    for k in range(a0, a1):
                        old[k - a0] = records[r, attrs[k]]
                    rem = t
                    for k in range(a1 - 1, a0 - 1, -1):
                        records[r, attrs[k]] = rem % sizes[attrs[k]]
                        rem //= sizes[attrs[k]]
                    if checked and record_forbidden(records, r, box_cols, box_ptr, box_masks, mask_ptr):
                        for k in range(a0, a1):
                            records[r, attrs[k]] = old[k - a0]
    return records


# The records are counted and sorted by cell in this many lanes (consecutive runs of records), each lane's
# counts its own: a record's count then waits on the one before it in its lane only, not on the record just
# before it, which often shares its cell.  ``_cells`` counts the four side by side.
LANES = 4


@numba.njit(cache=True)
def _cells(records, sizes, cols, cell, lanes):
    """cell[r]: the flat cell of record r in the marginal of columns ``cols`` (row-major); lanes[k, c]: the
    records of lane k in cell c, lane k the records from k·(n // LANES) to the next lane's first (the last to
    n).  One, two and three columns, the most frequent, get loops of their own (no inner loop over the
    columns)."""
    n = records.shape[0]
    if len(cols) == 1:
        for r in range(n):
            cell[r] = records[r, cols[0]]
    elif len(cols) == 2:
        a, b, sb = cols[0], cols[1], sizes[cols[1]]
        for r in range(n):
            cell[r] = np.int64(records[r, a]) * sb + records[r, b]
    elif len(cols) == 3:
        a, b, c, sb, sc = cols[0], cols[1], cols[2], sizes[cols[1]], sizes[cols[2]]
        for r in range(n):
            cell[r] = (np.int64(records[r, a]) * sb + records[r, b]) * sc + records[r, c]
    else:
        for r in range(n):
            idx = 0
            for k in range(len(cols)):
                idx = idx * sizes[cols[k]] + records[r, cols[k]]
            cell[r] = idx
    size = n // LANES
    for i in range(size):  # the lanes side by side (LANES = 4)
        lanes[0, cell[i]] += 1
        lanes[1, cell[size + i]] += 1
        lanes[2, cell[2 * size + i]] += 1
        lanes[3, cell[3 * size + i]] += 1
    for r in range(LANES * size, n):
        lanes[LANES - 1, cell[r]] += 1


@numba.njit(cache=True)
def _sort_by_cell(cell, lanes, start, members):
    """members[start[c]:start[c + 1]]: the records of cell c in increasing order (a counting sort whose
    lanes, ``_cells``', each fill their own share of every cell: lane k's after lanes 0 .. k - 1's)."""
    n = len(cell)
    fill = np.empty_like(lanes)
    fill[0] = start[:-1]
    for k in range(1, LANES):
        fill[k] = fill[k - 1] + lanes[k - 1]
    size = n // LANES
    for i in range(size):
        for k in range(LANES):
            r = k * size + i
            members[fill[k, cell[r]]] = r
            fill[k, cell[r]] += 1
    for r in range(LANES * size, n):
        members[fill[LANES - 1, cell[r]]] = r
        fill[LANES - 1, cell[r]] += 1
