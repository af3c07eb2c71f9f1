"""Discrete records moved toward target counts by coordinate descent (post-processing).

A relaxed projection (lib/estimation/relaxed.py) fits numeric values by gradients of sigmoids, which
vanish away from the cuts once the sigmoids are steep, and categorical probabilities by softmax
gradients, which vanish once a row is nearly one-hot; values and codes left on the wrong side stay
there.  This is the discrete counterpart, run on the records drawn from the relaxed table:
coordinate descent on

    sum over targets q of  weight_q · ||A_q − T_q||²,

A_q the records' counts of target q (shares of the records) per cell of its categorical ``by``
columns and numeric ``bins`` and, where q reads numeric columns, per interval of w_q·x (a marginal
has one slot per cell), T_q its target (shares too).  Each sweep visits every record in random order and, for
each of its movable categorical codes and numeric values, tries new ones and keeps the
best when it lowers the loss: every code of a column of at most ``tries`` codes, else ``tries``
random ones; for a numeric value ``tries`` new values, half copied from a random record's value
of that column, half drawn uniformly inside a random interval between the column's single-column
cuts and bin edges.  A copied null is a try only in a ``nullable`` column, and only there does a
null value move, with record_fit_null_tries tries (a query that reads a null value counts the record in its
null slot or bin).  Fixed columns (group columns) are never changed.

Reads only records and targets, never private data: costs no privacy budget.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numba
import numpy as np

from dpsyn.lib.estimation.measurement import Target
from dpsyn.lib.tuning import T

if TYPE_CHECKING:
    from dpsyn.lib.estimation.relaxed import RelaxedQuery



@dataclass(frozen=True)
class RecordFit:
    """How ``fit_records`` moves records: new values lie in [``low``, ``high``]; codes of the ``fixed``
    columns stay; the numeric columns flagged in ``nullable`` (default: none) may move to and from null;
    ``sweeps`` passes over the records, ``tries`` new codes or values a record's entry."""

    low: float = 0.0
    high: float = 1.0
    fixed: tuple[int, ...] = ()
    nullable: tuple[bool, ...] = ()
    sweeps: int = 3
    tries: int = 16


def fit_records(codes: np.ndarray, sizes: tuple[int, ...], values: np.ndarray, fits: list[Target[RelaxedQuery]],
                rng: np.random.Generator, how: RecordFit = RecordFit()) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Copies of ``codes`` (records × categorical columns of ``sizes`` codes) and ``values`` (records ×
    numeric columns, NaN for nulls) moved toward ``fits`` (lib/estimation/relaxed.py's: a query's ``by`` are
    positions in ``codes``, its numeric ``columns`` positions in ``values``; targets in shares of the
    records) by the coordinate descent of the module doc, as ``how`` says.  Returns (codes, values, loss
    before, loss after); the loss never rises.  Deterministic given ``rng``'s state."""
    low, high, fixed, nullable, sweeps, tries = how.low, how.high, how.fixed, how.nullable, how.sweeps, how.tries
    codes = np.ascontiguousarray(codes, dtype=np.int64).copy().reshape(len(values), len(sizes))
    out = np.ascontiguousarray(values, dtype=np.float64).copy()
    n, p = out.shape
    if n == 0 or not fits:
        return codes, out, 0.0, 0.0
    queries = [f.query for f in fits]
    if any(j in t.columns for t in queries for j, _, _ in t.bins):
        raise ValueError("a query cannot read a numeric column both as values and as bins")
    strides = []
    for t in queries:
        shape = [sizes[c] for c in t.by] + [size for _, _, size in t.bins]
        strides.append([int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))])
    by = np.array([c for t in queries for c in t.by], dtype=np.int64)
    by_stride = np.array([s for t, ss in zip(queries, strides) for s in ss[:len(t.by)]], dtype=np.int64)
    by_ptr = np.cumsum([0] + [len(t.by) for t in queries]).astype(np.int64)
    # every (query, numeric bin column) entry: its column, stride, edges (bin_edges[bin_eptr[e]:bin_eptr[e + 1]])
    # and null bin; per numeric column, the entries that bin it
    entries = [(q, j, edges, size, ss[len(t.by) + k]) for q, (t, ss) in enumerate(zip(queries, strides))
               for k, (j, edges, size) in enumerate(t.bins)]
    bin_q = np.array([e[0] for e in entries], dtype=np.int64)
    bin_col = np.array([e[1] for e in entries], dtype=np.int64)
    bin_edges = np.array([x for e in entries for x in e[2]], dtype=np.float64)
    bin_eptr = np.cumsum([0] + [len(e[2]) for e in entries]).astype(np.int64)
    bin_null = np.array([e[3] - 1 for e in entries], dtype=np.int64)
    bin_stride = np.array([e[4] for e in entries], dtype=np.int64)
    binned = [[i for i, e in enumerate(entries) if e[1] == j] for j in range(p)]
    nb_entry = np.array([i for es in binned for i in es], dtype=np.int64)
    nb_ptr = np.cumsum([0] + [len(es) for es in binned]).astype(np.int64)
    cols = np.array([c for t in queries for c in t.columns], dtype=np.int64)
    col_ptr = np.cumsum([0] + [len(t.columns) for t in queries]).astype(np.int64)
    direction = np.array([w for t in queries for w in t.direction], dtype=np.float64)
    cuts = np.array([c for t in queries for c in t.cuts], dtype=np.float64)
    cut_ptr = np.cumsum([0] + [len(t.cuts) for t in queries]).astype(np.int64)
    nslots = np.array([t.slots for t in queries], dtype=np.int64)
    res = np.concatenate([-np.asarray(f.noisy, dtype=np.float64).ravel() for f in fits])
    res_ptr = np.cumsum([0] + [f.noisy.size for f in fits]).astype(np.int64)
    weights = np.array([f.weight for f in fits], dtype=np.float64)
    # per categorical column (fixed ones left out) the targets it is a by column of, with its stride there
    cat_targets = [[(q, strides[q][t.by.index(c)]) for q, t in enumerate(queries) if c in t.by]
                   if c not in fixed else [] for c in range(len(sizes))]
    cat_q = np.array([q for qs in cat_targets for q, _ in qs], dtype=np.int64)
    cat_stride = np.array([s for qs in cat_targets for _, s in qs], dtype=np.int64)
    cat_ptr = np.cumsum([0] + [len(qs) for qs in cat_targets]).astype(np.int64)
    num_targets = [[q for q, t in enumerate(queries) if j in t.columns] for j in range(p)]
    num_q = np.array([q for qs in num_targets for q in qs], dtype=np.int64)
    num_w = np.array([queries[q].direction[queries[q].columns.index(j)] for j, qs in enumerate(num_targets)
                      for q in qs], dtype=np.float64)  # column j's weight in each query that reads it
    num_ptr = np.cumsum([0] + [len(qs) for qs in num_targets]).astype(np.int64)
    edges = []
    for j in range(p):
        single = [c for t in queries if t.columns == (j,) for c in t.cuts] + \
                 [x for i in binned[j] for x in entries[i][2]]
        edges.append(np.unique(np.clip(np.concatenate([[low, high], single]), low, high)))
    edge_ptr = np.cumsum([0] + [len(e) for e in edges]).astype(np.int64)
    may_null = np.zeros(p, dtype=np.bool_)
    may_null[:len(nullable)] = np.asarray(nullable, dtype=np.bool_)
    before, after = _descend(codes, np.asarray(sizes, dtype=np.int64), out, by, by_stride, by_ptr, cols, col_ptr,
                             direction, cuts, cut_ptr, nslots, res, res_ptr, weights, cat_q, cat_stride, cat_ptr,
                             num_q, num_w, num_ptr, np.concatenate(edges + [np.zeros(0)]), edge_ptr, bin_q, bin_col,
                             bin_edges, bin_eptr, bin_null, bin_stride, nb_entry, nb_ptr, may_null, sweeps, tries,
                             T.record_fit_null_tries, int(rng.integers(2 ** 62)))
    return codes.astype(np.int32), out, before, after


@numba.njit(cache=True)
def _slot(cuts, c0, c1, x):
    """Intervals' slot of x: the number of cuts below it (searchsorted, side left)."""
    lo, hi = c0, c1
    while lo < hi:
        mid = (lo + hi) // 2
        if cuts[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo - c0


@numba.njit(cache=True)
def _bin(bin_edges, bin_eptr, bin_null, e, x):
    """Entry e's bin of value x: the number of its edges below x; its null bin for NaN."""
    if np.isnan(x):
        return bin_null[e]
    return _slot(bin_edges, bin_eptr[e], bin_eptr[e + 1], x)


@numba.njit(cache=True)
def _descend(codes, sizes, values, by, by_stride, by_ptr, cols, col_ptr, direction, cuts, cut_ptr, nslots,
             res, res_ptr, weights, cat_q, cat_stride, cat_ptr, num_q, num_w, num_ptr, edges, edge_ptr, bin_q, bin_col,
             bin_edges, bin_eptr, bin_null, bin_stride, nb_entry, nb_ptr, may_null, sweeps, tries, null_tries,
             seed):
    np.random.seed(seed)
    n, p = values.shape
    nq = len(weights)
    share = 1.0 / n
    old_bin = np.zeros(len(nb_entry), np.int64)  # a value's bins before a move, per entry that bins it
    # per record (rows, so that a record's queries sit together in memory) and query: w·x over the non-null
    # values the query reads, how many of them are null, its slot and its cell
    proj = np.zeros((n, nq))
    nulls = np.zeros((n, nq), np.int64)
    slot = np.zeros((n, nq), np.int64)
    cell = np.zeros((n, nq), np.int64)
    for q in range(nq):
        for r in range(n):
            c = 0
            for k in range(by_ptr[q], by_ptr[q + 1]):
                c += codes[r, by[k]] * by_stride[k]
            cell[r, q] = c
            if col_ptr[q] < col_ptr[q + 1]:
                x, null = 0.0, 0
                for k in range(col_ptr[q], col_ptr[q + 1]):
                    v = values[r, cols[k]]
                    if np.isnan(v):
                        null += 1
                    else:
                        x += direction[k] * v
                proj[r, q] = x
                nulls[r, q] = null
                slot[r, q] = nslots[q] - 1 if null else _slot(cuts, cut_ptr[q], cut_ptr[q + 1], x)
    for e in range(len(bin_q)):
        for r in range(n):
            cell[r, bin_q[e]] += _bin(bin_edges, bin_eptr, bin_null, e, values[r, bin_col[e]]) * bin_stride[e]
    for q in range(nq):
        for r in range(n):
            res[res_ptr[q] + cell[r, q] * nslots[q] + slot[r, q]] += share
    before = 0.0
    for q in range(nq):
        for i in range(res_ptr[q], res_ptr[q + 1]):
            before += weights[q] * res[i] * res[i]
    loss = before
    for _ in range(sweeps):
        for r in np.random.permutation(n):
            for c in range(codes.shape[1]):
                if cat_ptr[c] == cat_ptr[c + 1]:
                    continue
                old = codes[r, c]
                k = sizes[c]
                best, best_delta = old, 0.0
                for t in range(min(k, tries)):
                    new = t if k <= tries else np.random.randint(k)
                    if new == old:
                        continue
                    delta = 0.0
                    for i in range(cat_ptr[c], cat_ptr[c + 1]):
                        q = cat_q[i]
                        a = res_ptr[q] + cell[r, q] * nslots[q] + slot[r, q]
                        b = a + (new - old) * cat_stride[i] * nslots[q]
                        delta += weights[q] * (2 * share * (res[b] - res[a]) + 2 * share * share)
                    if delta < best_delta:
                        best, best_delta = new, delta
                if best_delta < 0:
                    for i in range(cat_ptr[c], cat_ptr[c + 1]):
                        q = cat_q[i]
                        a = res_ptr[q] + cell[r, q] * nslots[q] + slot[r, q]
                        res[a] -= share
                        cell[r, q] += (best - old) * cat_stride[i]
                        res[a + (best - old) * cat_stride[i] * nslots[q]] += share
                    codes[r, c] = best
                    loss += best_delta
            for j in range(p):
                old_v = values[r, j]
                unread = num_ptr[j] == num_ptr[j + 1] and nb_ptr[j] == nb_ptr[j + 1]
                if unread or (np.isnan(old_v) and not may_null[j]):
                    continue
                best_v, best_delta = old_v, 0.0
                for i in range(nb_ptr[j], nb_ptr[j + 1]):
                    old_bin[i] = _bin(bin_edges, bin_eptr, bin_null, nb_entry[i], old_v)
                for t in range(null_tries if np.isnan(old_v) else tries):
                    if t % 2 == 0:
                        new_v = values[np.random.randint(n), j]
                        if np.isnan(new_v) and (np.isnan(old_v) or not may_null[j]):
                            continue
                    else:
                        e = edge_ptr[j] + np.random.randint(edge_ptr[j + 1] - edge_ptr[j] - 1)
                        new_v = edges[e] + np.random.random() * (edges[e + 1] - edges[e])
                    delta = 0.0
                    null_change = int(np.isnan(new_v)) - int(np.isnan(old_v))
                    step = (0.0 if np.isnan(new_v) else new_v) - (0.0 if np.isnan(old_v) else old_v)
                    for i in range(num_ptr[j], num_ptr[j + 1]):
                        q = num_q[i]
                        s0 = slot[r, q]
                        s1 = nslots[q] - 1 if nulls[r, q] + null_change > 0 else \
                            _slot(cuts, cut_ptr[q], cut_ptr[q + 1], proj[r, q] + num_w[i] * step)
                        if s1 != s0:
                            base = res_ptr[q] + cell[r, q] * nslots[q]
                            delta += weights[q] * (2 * share * (res[base + s1] - res[base + s0]) + 2 * share * share)
                    for i in range(nb_ptr[j], nb_ptr[j + 1]):
                        e = nb_entry[i]
                        moved = _bin(bin_edges, bin_eptr, bin_null, e, new_v) - old_bin[i]
                        if moved != 0:
                            q = bin_q[e]
                            a = res_ptr[q] + cell[r, q] * nslots[q] + slot[r, q]
                            b = a + moved * bin_stride[e] * nslots[q]
                            delta += weights[q] * (2 * share * (res[b] - res[a]) + 2 * share * share)
                    if delta < best_delta:
                        best_v, best_delta = new_v, delta
                if best_delta < 0:
                    null_change = int(np.isnan(best_v)) - int(np.isnan(old_v))
                    step = (0.0 if np.isnan(best_v) else best_v) - (0.0 if np.isnan(old_v) else old_v)
                    for i in range(num_ptr[j], num_ptr[j + 1]):
                        q = num_q[i]
                        s0 = slot[r, q]
                        proj[r, q] += num_w[i] * step
                        nulls[r, q] += null_change
                        s1 = nslots[q] - 1 if nulls[r, q] > 0 else _slot(cuts, cut_ptr[q], cut_ptr[q + 1], proj[r, q])
                        if s1 != s0:
                            base = res_ptr[q] + cell[r, q] * nslots[q]
                            res[base + s0] -= share
                            res[base + s1] += share
                            slot[r, q] = s1
                    for i in range(nb_ptr[j], nb_ptr[j + 1]):
                        e = nb_entry[i]
                        moved = _bin(bin_edges, bin_eptr, bin_null, e, best_v) - old_bin[i]
                        if moved != 0:
                            q = bin_q[e]
                            a = res_ptr[q] + cell[r, q] * nslots[q] + slot[r, q]
                            res[a] -= share
                            cell[r, q] += moved * bin_stride[e]
                            res[a + moved * bin_stride[e] * nslots[q]] += share
                    values[r, j] = best_v
                    loss += best_delta
    return before, loss
