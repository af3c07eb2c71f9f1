"""Values inside the bins of numeric columns that no public values fill, measured (on by default;
``--no-bin-values`` turns it off).

Without a public file a numeric column's bins are equal-width cuts of its schema range, and a
synthetic value is drawn uniformly inside its bin: a column whose rows crowd one end of a wide bin
(household weights in 0-9,999 cut into bins of 500, most of them below 200; incomes whose first bin
holds every zero; hours a week, 40 for half the rows, in bins of five) comes out spread over the
whole bin.  With ``--bin-values`` each bin is cut into bin_values_sub_bins sub-bins (on a grid, the bin's first
and last values and zero alone; a float column's range ends, zero and, where a bin holds few, whole numbers
alone, each the one value of its sub-bin; then even widths), one ``CellHistogram`` per column counts the rows in
each sub-bin of their own bin (a row counts once: sensitivity theta; Gaussian, charged), and each
synthetic value is drawn in a sub-bin of its bin in proportion to the noisy counts (pulled toward
the bin's mean as far as the noise says, ``shrunk_weights``; sub-bins without a grid value left
out; uniform where no weight is positive), then uniformly on the grid inside it.  Only the noisy
counts are read (post-processing); the cost is the rho given.  Where bins are wide it is a large gain;
where they are narrow it buys little for its share.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpsyn.dataloader.grid import steps
from dpsyn.lib.privacy.private_table import PrivateTable
from dpsyn.lib.privacy.queries import CellHistogram
from dpsyn.lib.tuning import T

if TYPE_CHECKING:
    from dpsyn.dataloader.encoding import ColumnCoder

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class SubBins:
    """One column's sub-bins: ``edges[b]`` cut bin b into (edges[b][k], edges[b][k+1]], ``weights[b]``
    (non-negative) give each sub-bin's share; a row of zeros draws uniformly on the bin's grid.  ``coder``:
    the column's numeric coder (dataloader/encoding.py ColumnCoder: its bin edges, grid and range)."""

    coder: ColumnCoder
    edges: np.ndarray
    weights: np.ndarray

    def draw(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A value for each code (NaN for the null code), inside its bin: in a sub-bin drawn by weight,
        uniformly on the grid there.  Post-processing."""
        codes = np.asarray(codes)
        nbins = len(self.coder.bin_edges) - 1
        out = np.full(len(codes), np.nan)
        binned = codes < nbins
        b = codes[binned]
        cum = np.cumsum(self.weights, axis=1)
        total = cum[b, -1]
        pick = (cum[b] < (rng.random(len(b)) * total)[:, None]).sum(axis=1)
        sub_lo, sub_hi = self.edges[b, pick], self.edges[b, pick + 1]
        values = self.coder.grid_draw(sub_lo, sub_hi, rng)
        uniform = total <= 0
        values[uniform] = self.coder.grid_draw(self.coder.bin_edges[b[uniform]], self.coder.bin_edges[b[uniform] + 1], rng)
        out[binned] = np.clip(values, self.coder.column.low, self.coder.column.high)
        return out


def detail_columns(encoder, skip: set[str]) -> list[str]:
    """Numeric columns of ``encoder`` (dataloader/encoding.py Encoder), not in ``skip``, with no public
    values to decode from and a bin that holds more than one value (without a grid: every bin wide enough to cut
    into sub-bins; a float range of one value, min = max, is one bin of one value)."""
    out = []
    for coder in encoder.coders:
        if coder.categories is not None or coder.pool is not None or coder.column.name in skip:
            continue
        if coder.step is None:
            many = bool((np.diff(_bin_rows(coder), axis=1) > 0).all())
        else:
            many = bool((_grid_points(coder.edges[:-1], coder.edges[1:], coder.step) > 1).any())
        if many:
            out.append(coder.column.name)
    return out


def sub_edges(coder) -> np.ndarray:
    """(bins, + 1 for a null code) × (bin_values_sub_bins + 1) strictly increasing edges, from the encoder's bins
    (schema, public values, rule cuts) alone (``_bin_edges`` on a grid, else ``_float_edges``; ``_increasing``
    where float64 cannot split a bin that finely).  The null code's row is the first bin's (null values count in
    no sub-bin)."""
    return np.array([_increasing(row) for row in _bin_rows(coder)])


def _bin_rows(coder) -> np.ndarray:
    """``sub_edges`` as the bins give them, before ``_increasing``."""
    lo, hi = coder.edges[:-1], coder.edges[1:]
    rows = [_bin_edges(lo[b], hi[b], coder.first_value(b), coder.step) if coder.step is not None else
            _float_edges(lo[b], hi[b], coder.column.bounds)
            for b in range(len(lo))]
    if coder.column.null is not None:
        rows.append(rows[0])
    return np.array(rows)


def _increasing(edges: np.ndarray) -> np.ndarray:
    """``edges`` as they are where strictly increasing; else their distinct values, then the floats right above
    the last one until there are as many edges again.  A bin of one or a few grid values where the grid is nearly
    as fine as float64 at that magnitude (a whole number near 10**15; 13 decimals near 227) cannot be cut into
    bin_values_sub_bins pieces inside it: the extra pieces lie above the bin, hold none of its rows and no grid
    value of it (``measure_bin_values`` counts grid values up to the bin's top only), so they get no weight."""
    if (np.diff(edges) > 0).all():
        return edges
    out = list(np.unique(edges))
    while len(out) < len(edges):
        out.append(np.nextafter(out[-1], np.inf))
    return np.array(out)


def _bin_edges(lo: float, hi: float, first: float, step: float) -> np.ndarray:
    """bin_values_sub_bins + 1 edges of bin (lo, hi] of a column on a grid: its first and last values (top codes)
    and zero (where the bin holds it: zero incomes, zero gains) in sub-bins of their own, the rest cut evenly and
    the widest pieces halved until there are bin_values_sub_bins."""
    if first >= hi:
        return np.linspace(lo, hi, T.bin_values_sub_bins + 1)
    # cuts around the first value, then the last, then zero
    return _cut({lo, first, hi}, [{max(hi - step, first)}, {-step, 0.0} if first < 0.0 < hi else set()], first, hi)


def _float_edges(lo: float, hi: float, bounds: tuple[float, float]) -> np.ndarray:
    """bin_values_sub_bins + 1 edges of bin (lo, hi] of a float column without a grid: each value that rows of
    real tables often hold exactly, where the bin holds it, in a sub-bin of its own, (the float below it, it]: the
    range's ends ``bounds`` (clipped values pile there; zero-inflated columns start there), zero, and the whole
    numbers where the bin holds at most a quarter of bin_values_sub_bins of them (a count stored as a float);
    the rest cut evenly and the widest pieces halved until there are bin_values_sub_bins (atoms in that order while
    they fit).  Public: the schema's range and the encoder's bins only.  Where a bin keeps its detail, noise can put
    a little mass on an atom the rows never hold (its share is about the noise sd over the bin's rows at most)."""
    atoms = [v for v in (*bounds, 0.0) if lo < v <= hi]
    if np.floor(hi) - np.floor(lo) <= T.bin_values_sub_bins // 4:
        atoms += np.arange(np.floor(lo) + 1, np.floor(hi) + 1).tolist()
    return _cut({lo, hi}, [{float(v), float(np.nextafter(v, -np.inf))} for v in atoms], lo, hi)


def _cut(alone: set, more: list[set], even_from: float, hi: float) -> np.ndarray:
    """bin_values_sub_bins + 1 edges: ``alone``, then each set of ``more`` in turn while it fits, then even cuts
    of (``even_from``, ``hi``] (both already among the edges) and the widest pieces halved until there are
    bin_values_sub_bins."""
    capacity = T.bin_values_sub_bins + 1
    for cuts in more:
        if len(alone | cuts) > capacity:
            break
        alone = alone | cuts
    edges = np.unique(np.concatenate([sorted(alone), np.linspace(even_from, hi, max(capacity + 2 - len(alone), 2))]))
    while len(edges) < capacity:
        i = int(np.argmax(np.diff(edges)))
        edges = np.insert(edges, i + 1, (edges[i] + edges[i + 1]) / 2)
    return edges


def measure_bin_values(private: PrivateTable, encoder, columns: list[str], rho: float) -> dict:
    """{column: SubBins} for ``columns`` (``detail_columns``), each measured with an even share of
    ``rho``.  Privacy cost: ``rho``, one CellHistogram per column (sensitivity theta)."""
    out = {}
    for column in columns:
        coder = encoder.coder(column)
        edges = sub_edges(coder)
        m = private.measure(CellHistogram(column, (column,), tuple(map(tuple, edges))), rho / len(columns),
                            f"{column} inside its bins ({T.bin_values_sub_bins} sub-bins each)")
        row_bin = np.where(np.arange(len(edges)) < len(coder.edges) - 1, np.arange(len(edges)), 0)  # null row: bin 0
        inside = np.minimum(edges, coder.edges[row_bin + 1, None])  # pieces above their bin hold no grid value
        prior = _grid_points(inside[:, :-1], inside[:, 1:], coder.step) if coder.step is not None else np.diff(edges)
        out[column] = SubBins(coder, edges, shrunk_weights(m.noisy.reshape(edges.shape[0], T.bin_values_sub_bins), prior,
                                                             m.sigma))
    if columns:
        log.info("no public values inside the bins of %s: values follow noisy counts in %d sub-bins a bin "
                 "(rho %.3g)", ", ".join(columns), T.bin_values_sub_bins, rho)
    return out


def shrunk_weights(noisy: np.ndarray, prior: np.ndarray, sigma: float) -> np.ndarray:
    """Sub-bin weights (bins × sub-bins) from noisy counts of noise sd ``sigma``: each bin's counts pulled
    toward an even spread of the bin's (non-negative) noisy total over its values (``prior``: each
    sub-bin's grid values, or its width without a grid; zero: no value, no weight) by the factor
    1 - bin_values_noise_margin·k·sigma² / (the counts' sum of squared deviations from that spread), k the bin's
    sub-bins with values, clipped to [0, 1], and the result clipped at zero.  Under pure noise that sum is
    about k·sigma², so a bin whose counts vary no more than the noise does stays even (drawn uniformly), as
    it was without measurement: its raw counts would put its values on whichever sub-bin the noise
    favoured (ct_drug_deaths at eps 0.1: ages in 5-year bins, about 76 rows a value against noise sd 307).
    Post-processing of the counts and their public sd."""
    prior = np.asarray(prior, dtype=np.float64)
    valid = prior > 0
    share = prior / np.maximum(prior.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    noisy = np.where(valid, noisy, 0.0)
    total = np.clip(noisy.sum(axis=1, keepdims=True), 0.0, None)
    even = share * total
    spread = np.where(valid, (noisy - even) ** 2, 0.0).sum(axis=1, keepdims=True)
    k = valid.sum(axis=1, keepdims=True)
    noise = T.bin_values_noise_margin * k * sigma ** 2
    keep = np.where(spread > noise, 1.0 - noise / np.where(spread > noise, spread, 1.0), 0.0)
    keep[total <= 0] = 0.0
    weights = np.where(valid, np.clip(even + keep * (noisy - even), 0.0, None), 0.0)
    return np.where(weights.sum(axis=1, keepdims=True) > 0, weights, share)


def _grid_points(lo: np.ndarray, hi: np.ndarray, step: float | None) -> np.ndarray:
    """How many grid values each interval (lo, hi] holds (2 for any float, where there is no grid)."""
    if step is None:
        return np.full(np.shape(lo), 2)
    return np.maximum(np.floor(steps(hi, step)) - np.floor(steps(lo, step)), 0)
