"""One value per group for a group-level numeric column (DENSITY within PUMA), measured.

A group-level column holds one value in every cell of its ``within`` columns, so each
cell's histogram of it is a single spike.  Noisy argmax refinement finds that value on the
column's precision grid: round r measures, per cell, a histogram of ``group_values_bins`` bins inside
the bin the previous round chose (one ``CellHistogram`` query: sensitivity theta, Gaussian,
charged), and takes each cell's largest noisy bin; after enough rounds a bin is one grid
step wide and the grid point at its centre is the value (edges sit half a step off the grid,
so float rounding never moves a value across one).  Only the argmaxes of noisy answers are used
(post-processing), so the cost is the measurements' rho, split evenly over the rounds.
"""
from __future__ import annotations

import logging
import math

import numpy as np

from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import CellHistogram
from dpsyn.lib.tuning import T

log = logging.getLogger(__name__)



def rounds_needed(low: float, high: float, step: float) -> int:
    """Rounds of group_values_bins bins that narrow [low, high] to one grid step."""
    points = max(2, int(round((high - low) / step)) + 1)
    return max(1, math.ceil(math.log(points) / math.log(T.group_values_bins)))


def measure_group_values(private: PrivateTable, column: str, within: tuple[str, ...], low: float, high: float,
                         step: float, rho: float) -> np.ndarray:
    """One value on the grid low + k*step (k >= 0, at most ``high``) per cell of ``within``.
    Privacy cost: ``rho``, over ``rounds_needed`` CellHistogram measurements."""
    n_cells = private.domain.size(within)
    rounds = rounds_needed(low, high, step)
    lo = np.full(n_cells, low - step / 2)
    span = high + step / 2 - lo[0]
    for r in range(rounds):
        width = step * max(1.0, math.ceil(span / step / T.group_values_bins))
        bins = max(1, math.ceil(round(span / width, 6)))
        edges = lo[:, None] + width * np.arange(bins + 1)[None, :]
        m = private.measure(CellHistogram(column, within, tuple(map(tuple, edges))), rho / rounds,
                            f"{column} per {' × '.join(within)}, round {r + 1} of {rounds} ({bins} bins of {width:g})")
        pick = m.noisy.reshape(n_cells, bins).argmax(axis=1)
        lo = edges[np.arange(n_cells), pick]
        span = width
    values = np.clip(lo + step / 2, low, high)
    log.info("group-level %s: one value per %s found in %d rounds of noisy histograms (rho %.3g)", column,
             " × ".join(within), rounds, rho)
    return values
