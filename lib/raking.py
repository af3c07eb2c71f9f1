"""Raking (iterative proportional fitting on record weights) and systematic draws.

Pure functions of public arrays (synthetic records, target marginals): post-processing, no
privacy cost.

* :func:`rake`: weights on records whose weighted 1-way shares approach target shares, each pass
  scaling the weights column by column (IPF over the records instead of over a table), so the
  records keep whatever association they carry between columns;
* :func:`systematic_draw`: n record indices drawn in proportion to weights, one uniform offset
  on a regular grid (each row's count is within one of its expectation), optionally stratified
  by columns of codes.
"""
from __future__ import annotations

import numpy as np


def rake(records: np.ndarray, margins: list[tuple[int, np.ndarray]], passes: int) -> np.ndarray:
    """Weights (summing to 1) on the rows of ``records`` (n × d codes) whose weighted shares of
    column j approach ``target / target.sum()`` for each (j, target) in ``margins``, after
    ``passes`` sweeps over the margins.  A value no record holds cannot be reached: its share is
    left out and the others fill in.  Uniform weights where the targets leave every record out."""
    n = len(records)
    weights = np.full(n, 1.0 / max(n, 1))
    shares = []
    for j, target in margins:
        target = np.clip(np.asarray(target, dtype=np.float64), 0.0, None)
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
    order = rng.permutation(len(weights))
    if strata is not None and strata.shape[1]:
        keys = strata[order]
        order = order[np.lexsort(keys[:, rng.permutation(strata.shape[1])].T)]
    cdf = np.cumsum(weights[order]) / weights[order].sum()
    u = (rng.random() + np.arange(n)) / n
    return order[np.minimum(np.searchsorted(cdf, u, side="right"), len(weights) - 1)]
