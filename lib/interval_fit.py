"""Numeric values of discrete records moved toward target interval counts (post-processing).

A relaxed projection (lib/relaxed.py) fits numeric values by gradients of sigmoids, which
vanish away from the cuts once the sigmoids are steep; values left on the wrong side of a far
cut stay there.  This is the discrete counterpart, run on the records drawn from the relaxed
table: coordinate descent on

    sum over targets q of  weight_q · ||A_q − T_q||²,

A_q the records' interval counts of w_q·x per cell of q's categorical ``by`` columns (shares of
the records), T_q its target (shares too).  Each sweep visits every record in random order and,
for each of its non-null numeric values, tries ``tries`` new values (half copied from a random
record's value of that column, half drawn uniformly inside a random interval between the
column's single-column cuts) and keeps the best one when it lowers the loss.  Categorical codes
and nulls are never changed, so every target's null slot and every categorical count stays
as it was.

Reads only records and targets, never private data: costs no privacy budget.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@dataclass(frozen=True)
class IntervalTarget:
    """One target: interval counts of ``direction``·x over numeric ``columns`` (positions in the
    values matrix) cut at increasing ``cuts`` (slots: (-inf, c_1], ..., (c_k, inf), then nulls, as
    lib/privacy/queries.Intervals), per cell ``cells[r]`` of record r; ``target``: cells × slots
    shares of the records; ``weight``: its weight in the loss (inverse noise variance, relative)."""

    columns: tuple[int, ...]
    direction: tuple[float, ...]
    cuts: tuple[float, ...]
    cells: np.ndarray
    target: np.ndarray
    weight: float


def fit_values(values: np.ndarray, targets: list[IntervalTarget], low: float, high: float,
               rng: np.random.Generator, sweeps: int = 3, tries: int = 16) -> tuple[np.ndarray, float, float]:
    """A copy of ``values`` (records × numeric columns, NaN for nulls) moved toward ``targets`` by the
    coordinate descent of the module doc; new values lie in [``low``, ``high``].  Returns (values,
    loss before, loss after); the loss never rises.  Deterministic given ``rng``'s state."""
    out = np.ascontiguousarray(values, dtype=np.float64).copy()
    n, p = out.shape
    if n == 0 or not targets:
        return out, 0.0, 0.0
    cols = np.concatenate([np.asarray(t.columns, dtype=np.int64) for t in targets])
    col_ptr = np.cumsum([0] + [len(t.columns) for t in targets]).astype(np.int64)
    direction = np.concatenate([np.asarray(t.direction, dtype=np.float64) for t in targets])
    cuts = np.concatenate([np.asarray(t.cuts, dtype=np.float64) for t in targets])
    cut_ptr = np.cumsum([0] + [len(t.cuts) for t in targets]).astype(np.int64)
    cells = np.stack([np.asarray(t.cells, dtype=np.int64) for t in targets])
    residual = [np.zeros((t.target.shape[0], len(t.cuts) + 2)) for t in targets]
    for q, t in enumerate(targets):
        residual[q] -= np.asarray(t.target, dtype=np.float64).reshape(residual[q].shape)
    res = np.concatenate([r.ravel() for r in residual])
    res_ptr = np.cumsum([0] + [r.size for r in residual]).astype(np.int64)
    weights = np.array([t.weight for t in targets], dtype=np.float64)
    by_column = [[q for q, t in enumerate(targets) if j in t.columns] for j in range(p)]
    col_targets = np.array([q for qs in by_column for q in qs], dtype=np.int64)
    col_targets_ptr = np.cumsum([0] + [len(qs) for qs in by_column]).astype(np.int64)
    edges = []
    for j in range(p):
        single = [c for t in targets if t.columns == (j,) for c in t.cuts]
        edges.append(np.unique(np.clip(np.concatenate([[low, high], single]), low, high)))
    edge_ptr = np.cumsum([0] + [len(e) for e in edges]).astype(np.int64)
    before, after = _descend(out, cols, col_ptr, direction, cuts, cut_ptr, cells, res, res_ptr, weights,
                             col_targets, col_targets_ptr, np.concatenate(edges), edge_ptr, sweeps, tries,
                             int(rng.integers(2 ** 62)))
    return out, before, after


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
def _descend(values, cols, col_ptr, direction, cuts, cut_ptr, cells, res, res_ptr, weights,
             col_targets, col_targets_ptr, edges, edge_ptr, sweeps, tries, seed):
    np.random.seed(seed)
    n, p = values.shape
    nq = len(weights)
    share = 1.0 / n
    proj = np.zeros((nq, n))
    slot = np.zeros((nq, n), np.int64)
    for q in range(nq):
        nslots = cut_ptr[q + 1] - cut_ptr[q] + 2
        for r in range(n):
            x, null = 0.0, False
            for k in range(col_ptr[q], col_ptr[q + 1]):
                v = values[r, cols[k]]
                if np.isnan(v):
                    null = True
                else:
                    x += direction[k] * v
            proj[q, r] = x
            slot[q, r] = nslots - 1 if null else _slot(cuts, cut_ptr[q], cut_ptr[q + 1], x)
            res[res_ptr[q] + cells[q, r] * nslots + slot[q, r]] += share
    before = 0.0
    for q in range(nq):
        for i in range(res_ptr[q], res_ptr[q + 1]):
            before += weights[q] * res[i] * res[i]
    loss = before
    for _ in range(sweeps):
        for r in np.random.permutation(n):
            for j in range(p):
                old = values[r, j]
                if np.isnan(old) or col_targets_ptr[j] == col_targets_ptr[j + 1]:
                    continue
                best, best_delta = old, 0.0
                for t in range(tries):
                    if t % 2 == 0:
                        new = values[np.random.randint(n), j]
                        if np.isnan(new):
                            continue
                    else:
                        e = edge_ptr[j] + np.random.randint(edge_ptr[j + 1] - edge_ptr[j] - 1)
                        new = edges[e] + np.random.random() * (edges[e + 1] - edges[e])
                    delta = 0.0
                    for i in range(col_targets_ptr[j], col_targets_ptr[j + 1]):
                        q = col_targets[i]
                        nslots = cut_ptr[q + 1] - cut_ptr[q] + 2
                        s0 = slot[q, r]
                        if s0 == nslots - 1:
                            continue
                        w = 0.0
                        for k in range(col_ptr[q], col_ptr[q + 1]):
                            if cols[k] == j:
                                w = direction[k]
                        s1 = _slot(cuts, cut_ptr[q], cut_ptr[q + 1], proj[q, r] + w * (new - old))
                        if s1 != s0:
                            base = res_ptr[q] + cells[q, r] * nslots
                            delta += weights[q] * (2 * share * (res[base + s1] - res[base + s0]) + 2 * share * share)
                    if delta < best_delta:
                        best, best_delta = new, delta
                if best_delta < 0:
                    for i in range(col_targets_ptr[j], col_targets_ptr[j + 1]):
                        q = col_targets[i]
                        nslots = cut_ptr[q + 1] - cut_ptr[q] + 2
                        s0 = slot[q, r]
                        if s0 == nslots - 1:
                            continue
                        w = 0.0
                        for k in range(col_ptr[q], col_ptr[q + 1]):
                            if cols[k] == j:
                                w = direction[k]
                        proj[q, r] += w * (best - old)
                        s1 = _slot(cuts, cut_ptr[q], cut_ptr[q + 1], proj[q, r])
                        if s1 != s0:
                            base = res_ptr[q] + cells[q, r] * nslots
                            res[base + s0] -= share
                            res[base + s1] += share
                            slot[q, r] = s1
                    values[r, j] = best
                    loss += best_delta
    return before, loss
