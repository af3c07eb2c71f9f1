"""Reversible, vectorised encoding of typed columns to integer codes 0..k-1.

Fitted on the schema and (optionally) public data only: never on private data.

* categorical: code = position in ``category_list(column)`` (values, then a separate null token);
* numeric: right-closed bins (e_j, e_{j+1}] over the column's [min, max]; the edges are
  the schema's ``bins`` (edges or a count) or ``default_bins``; a bin count becomes
  quantile edges of the public data when given (public data is free), otherwise
  equal-width edges.  In integer columns a value holding at least 1/bins of the
  public rows gets a bin of its own (zero incomes, top codes), and a column with
  no more integers than bins keeps one bin per integer.  Derived edges also cut where
  the public data shows another column switching to its null token (``extra_cuts``,
  dataloader/structure.py), and every column is cut at its edit rules' thresholds, so
  that "AGEP < 15" is a union of whole bins.  Edges lie on the column's precision grid.
  The null token, when the column has one, gets the last code.

``decode`` draws a bin's values from the public file's values inside that bin (their
empirical distribution, so heaping and precision carry over), falling back to a uniform
draw on the column's grid (integers, or the declared or public precision) where the
public file has none; it never leaves [min, max] and encode(decode(c)) == c for every code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from dpsyn.dataloader.grid import steps
from dpsyn.dataloader.rules import compared, rule_cuts
from dpsyn.dataloader.schema import CATEGORICAL, Column, Schema, category_list
from dpsyn.lib.records.domain import Domain

DEFAULT_BINS = 20
MAX_INFERRED_DECIMALS = 6


@dataclass(frozen=True)
class ColumnCoder:
    """Codes of one column.  ``edges`` (numeric only): bin j covers (edges[j], edges[j+1]];
    ``pool``: the distinct public values (sorted, on the precision grid) and ``pool_cum`` their
    cumulative counts (length len(pool) + 1); ``precision``: decimals of the grid (None: any float)."""

    column: Column
    size: int
    edges: np.ndarray | None = None
    categories: tuple | None = None
    pool: np.ndarray | None = None
    pool_cum: np.ndarray | None = None
    precision: int | None = None

    @property
    def bin_edges(self) -> np.ndarray:
        """``edges`` of a numeric column (a categorical one has none)."""
        assert self.edges is not None, f"{self.column.name} is categorical: it has no bins"
        return self.edges

    @property
    def step(self) -> float | None:
        return None if self.precision is None else 10.0 ** -self.precision

    @property
    def ordered(self) -> int:
        """How many first codes stand for values in increasing order: a numeric column's bins; a
        categorical column's values where they are numbers listed in increasing order (0 otherwise)."""
        if self.categories is None:
            return len(self.bin_edges) - 1
        values = list(self.column.values or ())
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        return len(values) if numbers and all(a < b for a, b in zip(values, values[1:])) else 0

    @property
    def null_code(self) -> int | None:
        if self.column.null is None:
            return None
        if self.categories is not None:
            return [str(c) for c in self.categories].index(self.column.null)
        return self.size - 1

    def encode(self, values) -> np.ndarray:
        """Codes of typed values (a Categorical or float64 with NaN = null); -1 for a missing category."""
        if self.categories is not None:
            return np.asarray(pd.Categorical(values, categories=list(self.categories)).codes,
                              dtype=np.int32)
        v = np.asarray(values, dtype=np.float64)
        nbins = len(self.bin_edges) - 1
        codes = np.clip(np.searchsorted(self.bin_edges, v, side="left") - 1, 0, nbins - 1).astype(np.int32)
        null = self.null_code
        if null is not None:
            codes[np.isnan(v)] = null
        return codes

    def decode(self, codes: np.ndarray, rng: np.random.Generator):
        """Typed values for ``codes``: a Categorical, or float64 (NaN = null) drawn inside each
        bin from the public values there, else uniformly on the grid."""
        codes = np.asarray(codes)
        if self.categories is not None:
            return pd.Categorical.from_codes(codes, categories=list(self.categories))
        nbins = len(self.bin_edges) - 1
        is_null = codes == nbins
        b = np.minimum(codes, nbins - 1)
        lo, hi = self.bin_edges[b], self.bin_edges[b + 1]
        out = self.grid_draw(lo, hi, rng)
        if self.pool is not None and self.pool_cum is not None and len(self.pool):
            first = self.pool_cum[np.searchsorted(self.pool, lo, side="right")]
            stop = self.pool_cum[np.searchsorted(self.pool, hi, side="right")]
            has = stop > first
            pick = first[has] + np.floor(rng.random(int(has.sum())) * (stop - first)[has]).astype(np.int64)
            out[has] = self.pool[np.searchsorted(self.pool_cum, pick, side="right") - 1]
        out = np.clip(out, self.column.low, self.column.high)
        out[is_null] = np.nan
        return out

    def grid_draw(self, lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Uniform values in (lo, hi]: grid points where the column has a precision (hi where a
        bin holds none), any float otherwise (hi where rounding lands on lo)."""
        step = self.step
        if step is None:
            out = hi - rng.random(len(lo)) * (hi - lo)
            return np.where(out <= lo, hi, out)
        k_lo = np.floor(steps(lo, step)) + 1
        k_hi = np.floor(steps(hi, step))
        ok = k_hi >= k_lo
        k = k_lo + np.floor(rng.random(len(lo)) * np.maximum(k_hi - k_lo + 1, 1))
        return np.where(ok, on_grid(k * step, self.precision), hi)

    def snap(self, values) -> np.ndarray:
        """Raw values of a numeric column clipped to its range and rounded to its grid (NaN stays NaN)."""
        return on_grid(np.clip(np.asarray(values, dtype=np.float64), self.column.low, self.column.high),
                       self.precision)

    def first_value(self, b: int) -> float:
        """The smallest value bin ``b`` can decode to (on the grid when there is one)."""
        lo, hi = self.bin_edges[b], self.bin_edges[b + 1]
        if self.step is None:
            return float(min(np.nextafter(lo, np.inf), hi))
        return float(min(on_grid((np.floor(steps(lo, self.step)) + 1) * self.step, self.precision), hi))

    def describe(self) -> str:
        if self.categories is not None:
            return f"{self.size} categories"
        return f"{len(self.bin_edges) - 1} bins" + (" + null" if self.column.null is not None else "")


def on_grid(values, precision: int | None):
    """``values`` rounded to ``precision`` decimals (unchanged when None)."""
    return values if precision is None else np.round(values, precision)


def column_precision(col: Column, public_values: np.ndarray | None) -> int | None:
    """Decimals of a numeric column: declared, else 0 for integer dtypes, else the fewest decimals
    (up to MAX_INFERRED_DECIMALS) that every public value has, else None (any float)."""
    if col.precision is not None:
        return col.precision
    if col.integral:
        return 0
    if public_values is None or not len(public_values):
        return None
    for d in range(MAX_INFERRED_DECIMALS + 1):
        scaled = public_values * 10.0 ** d
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-6 * np.maximum(1.0, np.abs(scaled))):
            return d
    return None


def _below(x: float, integral: bool, step: float | None = None) -> float:
    if integral:
        return x - 1
    return x - step if step is not None else float(np.nextafter(x, -np.inf))


def numeric_edges(col: Column, public_values: np.ndarray | None, default_bins: int,
                  extra_cuts=(), precision: int | None = None) -> np.ndarray:
    """Right-closed bin edges of a bounded numeric column: the schema's edges, one bin per integer of a
    small range, quantiles of ``public_values`` (integer spikes kept as their own bins), or equal width;
    plus ``extra_cuts`` (edit-rule thresholds, structural changes); on the ``precision`` grid."""
    low, high = col.bounds
    step = None if precision is None else 10.0 ** -precision
    if isinstance(col.bins, tuple):
        cuts = np.asarray(col.bins, dtype=np.float64)
    else:
        n = col.bins or default_bins
        if col.integral and high - low + 1 <= n:
            cuts = np.arange(low, high)
        elif public_values is not None and len(public_values):
            vals = np.clip(public_values, low, high)
            cuts = np.quantile(vals, np.linspace(0, 1, n + 1)[1:-1])
            if col.integral:
                uniq, counts = np.unique(vals, return_counts=True)
                spikes = uniq[counts >= len(vals) / n]
                cuts = np.concatenate([cuts, spikes, spikes - 1])
        else:
            cuts = np.linspace(low, high, n + 1)[1:-1]
    cuts = _grid_cuts(np.concatenate([cuts, np.asarray(extra_cuts, dtype=np.float64)]), col, precision)
    return np.unique(np.concatenate([[_below(low, col.integral, step)], cuts, [high]]))


def _grid_cuts(cuts: np.ndarray, col: Column, precision: int | None) -> np.ndarray:
    """``cuts`` floored onto the column's grid (whole numbers, or ``precision`` decimals), inside [min, max)."""
    if col.integral:
        cuts = np.floor(cuts)
    elif precision is not None:
        step = 10.0 ** -precision
        cuts = on_grid(np.floor(steps(cuts, step)) * step, precision)
    return cuts[(cuts >= col.low) & (cuts < col.high)]


def added_cuts(edges: np.ndarray, cuts: np.ndarray, col: Column, precision: int | None) -> np.ndarray:
    """``edges`` with ``cuts`` added: on the column's grid, inside [min, max)."""
    return np.unique(np.concatenate([edges, _grid_cuts(cuts, col, precision)]))


def _pool(values: np.ndarray | None, col: Column, precision: int | None) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct public values (on the grid, inside [min, max]) and their cumulative counts."""
    if values is None or not len(values):
        return None
    values = on_grid(values, precision)
    values = values[(values >= col.low) & (values <= col.high)]
    uniq, counts = np.unique(values, return_counts=True)
    return uniq, np.concatenate([[0], np.cumsum(counts)])


@dataclass(frozen=True)
class Encoder:
    """One ColumnCoder per schema column, in schema order."""

    coders: tuple[ColumnCoder, ...]

    @classmethod
    def fit(cls, schema: Schema, public: pd.DataFrame | None = None, default_bins: int = DEFAULT_BINS,
            structural_cuts: Mapping[str, list[float]] | None = None) -> "Encoder":
        """Build coders from the schema (which must have every range), its edit rules and optional
        public data; ``structural_cuts`` adds edges to columns whose edges are derived."""
        schema.require_ranges()
        coders = []
        edges_of: dict[str, np.ndarray] = {}  # before comparisons' cuts: what a compared column adds to the other
        against = compared(schema.rules)
        for col in schema.columns:
            if col.kind == CATEGORICAL:
                cats = tuple(category_list(col))
                coders.append(ColumnCoder(col, len(cats), categories=cats))
                continue
            pub = None
            if public is not None:
                pub = public[col.name].to_numpy(dtype=np.float64)
                pub = pub[~np.isnan(pub)]
            precision = column_precision(col, pub)
            cuts = rule_cuts(col, schema.rules, precision)
            if not isinstance(col.bins, tuple):
                cuts += list((structural_cuts or {}).get(col.name, []))
            edges = edges_of[col.name] = numeric_edges(col, pub, default_bins, cuts, precision)
            pool = _pool(pub, col, precision)
            coders.append(ColumnCoder(col, len(edges) - 1 + (col.null is not None), edges=edges,
                                      pool=None if pool is None else pool[0],
                                      pool_cum=None if pool is None else pool[1], precision=precision))
        # two compared columns are each cut at the other's edges: a pair of their bins then decides the comparison
        # or is one interval (decoding orders the two values there: dataloader/comparisons.py)
        for j, c in enumerate(coders):
            if c.column.name in against:
                others = np.concatenate([edges_of[o] for o in sorted(against[c.column.name])])
                edges = added_cuts(c.bin_edges, others, c.column, c.precision)
                coders[j] = ColumnCoder(c.column, len(edges) - 1 + (c.column.null is not None), edges=edges,
                                        pool=c.pool, pool_cum=c.pool_cum, precision=c.precision)
        return cls(tuple(coders))

    @property
    def names(self) -> list[str]:
        return [c.column.name for c in self.coders]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c.size for c in self.coders)

    @property
    def domain(self) -> Domain:
        """The public domain methods see: names, code counts, numeric columns' clip ranges, grids and bin edges."""
        numeric = [c for c in self.coders if c.categories is None]
        return Domain(tuple(self.names), self.sizes, {c.column.name: c.column.bounds for c in numeric},
                      frozenset(c.column.name for c in numeric if c.column.null is not None),
                      {c.column.name: c.step for c in numeric if c.step is not None},
                      {c.column.name: tuple(float(x) for x in c.bin_edges) for c in numeric},
                      {c.column.name: c.ordered for c in self.coders if c.ordered})

    def coder(self, name: str) -> ColumnCoder:
        return self.coders[self.names.index(name)]

    def encode(self, typed: pd.DataFrame) -> np.ndarray:
        """n × d int32 codes, columns in schema order."""
        out = np.empty((len(typed), len(self.coders)), dtype=np.int32)
        for j, coder in enumerate(self.coders):
            out[:, j] = coder.encode(typed[coder.column.name])
        return out

    def decode(self, codes: np.ndarray, rng: np.random.Generator,
               raw: Mapping[str, np.ndarray] | None = None) -> pd.DataFrame:
        """Typed frame (schema columns) for n × d codes: Categoricals for categorical columns,
        numbers for numeric ones (nullable Int64 for integer columns; NA or NaN = the null
        token).  ``raw`` gives values for numeric columns synthesized without bins, used instead
        of their codes (clipped to the range, rounded to the column's precision).  Randomness
        only from ``rng``."""
        raw = raw or {}
        out = {}
        for j, c in enumerate(self.coders):
            col = c.column
            if col.name in raw:
                values = c.snap(raw[col.name])
            else:
                values = c.decode(codes[:, j], rng)
            out[col.name] = pd.array(values, dtype="Int64") if c.categories is None and col.integral else values
        return pd.DataFrame(out)
