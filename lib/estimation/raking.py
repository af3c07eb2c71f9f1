"""Raking (iterative proportional fitting on record weights) and systematic draws.

Pure functions of public arrays (synthetic records, target marginals): post-processing, no
privacy cost.

* :func:`rake`: weights on records whose weighted 1-way shares approach target shares, each pass
  scaling the weights column by column (IPF over the records instead of over a table), so the
  records keep whatever association they carry between columns;
* :func:`rake_groups`: each record's shares of membership in G groups (IPF over a records × groups
  table), so that the groups split the records the way per-group 1-way marginals say, and every
  record is used once, whole;
* :func:`balanced_groups`: one group per record from those shares, the groups' counts kept close to
  their expectation over any run of records in a (stratified) order;
* :func:`systematic_draw`: n record indices drawn in proportion to weights, one uniform offset
  on a regular grid (each row's count is within one of its expectation), optionally stratified
  by columns of codes.
"""
from __future__ import annotations

from typing import Any

import numba
import numpy as np
from scipy import sparse

from dpsyn.lib.estimation.measurement import MarginalTarget


def rake(records: np.ndarray, margins: list[MarginalTarget], passes: int) -> np.ndarray:
    """Weights (summing to 1) on the rows of ``records`` (n × d codes) whose weighted shares of
    column j approach ``noisy / noisy.sum()`` for each 1-way Target ((j,), noisy) in ``margins``, after
    ``passes`` sweeps over the margins.  A value no record holds cannot be reached: its share is
    left out and the others fill in.  Uniform weights where the targets leave every record out."""
    n = len(records)
    weights = np.full(n, 1.0 / max(n, 1))
    shares = []
    for margin in margins:
        (j,), target = margin.query, np.clip(np.asarray(margin.noisy, dtype=np.float64), 0.0, None)
        if target.sum() > 0:
            shares.append((j, target / target.sum()))
    for _ in range(passes):
        for j, share in shares:
            current = np.bincount(records[:, j], weights, minlength=len(share))
            factor = np.divide(share, current, out=np.zeros(len(share)), where=current > 0)
            scaled = weights * factor[records[:, j]]
            if scaled.sum() <= 0:
                continue
            weights = scaled / scaled.sum()
    return weights


def rake_groups(records: np.ndarray, margins: list[MarginalTarget], counts: np.ndarray, passes: int) -> np.ndarray:
    """n × G shares (each row non-negative, summing to 1) of each of the n ``records``' membership in G
    groups, after ``passes`` sweeps of IPF over the records × groups table: the groups' totals follow
    ``counts`` (G), and for each Target ((j,), target) in ``margins`` (target: G × column j's codes) the records
    holding value v of column j are split between the groups in the shares ``target[:, v]`` gives
    (where that column of the target is empty, as ``counts``).  The records' own counts of every
    value are kept, so a group's marginal can only reach its target as far as the records allow;
    shares start from ``counts`` and are as even as those constraints leave them.  A record that no group
    may take (every group's share of one of its values is zero) starts over from the shares of ``counts``."""
    counts = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    n, groups = len(records), len(counts)
    prior = counts / counts.sum() if counts.sum() > 0 else np.full(groups, 1.0 / groups)
    splits: list[tuple[Any, Any, np.ndarray]] = []  # (column j's codes, codes × records indicator, codes × groups: how many of the records holding
    # each code each group should take)
    for margin in margins:
        (j,), target = margin.query, np.clip(np.asarray(margin.noisy, dtype=np.float64), 0.0, None)
        by_code = target.sum(axis=0)
        split = np.where(by_code > 0, target / np.where(by_code > 0, by_code, 1.0), prior[:, None])
        codes = records[:, j]
        held = sparse.csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(target.shape[1], n))  # codes × records
        splits.append((codes, held, (split * np.asarray(held.sum(axis=1)).T).T))
    shares = np.tile(prior, (n, 1))
    for _ in range(passes):
        for codes, held, want in splits + [(None, None, prior * n)]:
            if codes is None:
                current = shares.sum(axis=0)
                factor = np.divide(want, current, out=np.ones(groups), where=current > 0)
            else:
                current = held @ shares
                factor = np.divide(want, current, out=np.ones_like(current), where=current > 0)[codes]
            shares *= factor
            total = shares.sum(axis=1)
            taken = total > 0
            shares /= np.where(taken, total, 1.0)[:, None]
            shares[~taken] = prior  # a record no group may take starts over from the prior
    return shares


def systematic_draw(weights: np.ndarray, n: int, rng: np.random.Generator,
                    strata: np.ndarray | None = None) -> np.ndarray:
    """n row indices drawn with probabilities ∝ ``weights`` (finite, non-negative, positive sum) by
    systematic resampling: the rows are put in random order (a regular grid over weights in a fixed
    order would follow any period in that order), then one uniform offset places n points on a
    regular grid over the cumulative weights.  Row i is drawn floor or ceil of n·p_i times.
    ``strata`` (one row of codes per weight): the rows are sorted by its columns, taken in a random
    order (ties left in random order), before the grid, so the draw is stratified: the rows sharing
    the codes of the leading sort columns get within one of their expected number of draws, and the
    shares of the other columns come closer to theirs than in a draw in random order."""
    weights = np.asarray(weights, dtype=np.float64)
    order = stratified_order(len(weights), strata, rng)
    cdf = np.cumsum(weights[order]) / weights[order].sum()
    u = (rng.random() + np.arange(n)) / n
    return order[np.minimum(np.searchsorted(cdf, u, side="right"), len(weights) - 1)]


def balanced_groups(shares: np.ndarray, order: np.ndarray) -> np.ndarray:
    """One group for each record (row of ``shares``, n × G, as from :func:`rake_groups`), the records
    taken in ``order``: each goes to the group, among those its shares allow, whose count lags furthest
    behind the sum of the shares so far.  So every group's count over any run of consecutive records in
    ``order`` stays within a few records of its expectation (an independent draw per record would be off
    by the square root of it): with ``order`` from :func:`stratified_order`, the groups' 1-way marginals of
    the strata's columns come close to what the shares say."""
    return _balanced(np.ascontiguousarray(shares, dtype=np.float64), np.asarray(order, dtype=np.int64))


@numba.njit(cache=True)
def _balanced(shares, order):
    groups = shares.shape[1]
    lag = np.zeros(groups)  # expected minus assigned, per group, over the records so far
    out = np.empty(shares.shape[0], np.int64)
    for i in order:
        best, most = -1, -np.inf
        for g in range(groups):
            lag[g] += shares[i, g]
            if shares[i, g] > 0 and lag[g] > most:
                best, most = g, lag[g]
        out[i] = best
        lag[best] -= 1.0
    return out


def stratified_order(n: int, strata: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """The indices 0..n-1 in random order, then (``strata``: one row of codes per index) sorted by its
    columns, taken in a random order (ties left in random order)."""
    order = rng.permutation(n)
    if strata is not None and strata.shape[1]:
        keys = strata[order]
        order = order[np.lexsort(keys[:, rng.permutation(strata.shape[1])].T)]
    return order
