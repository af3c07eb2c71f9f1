"""Reversible, vectorised encoding of typed columns to integer codes 0..k-1.

Fitted on the schema and (optionally) public data only: never on private data.

* categorical: code = position in ``category_list(column)`` (values, then a separate null token);
* numeric: right-closed bins (e_j, e_{j+1}] over the column's [min, max]; the edges are
  the schema's ``bins`` (edges or a count) or ``default_bins``; a bin count becomes
  quantile edges of the public data when given (public data is free), otherwise
  equal-width edges.  In integer columns a value holding at least 1/bins of the
  public rows gets a bin of its own (zero incomes, top codes), and a column with
  no more integers than bins keeps one bin per integer.  The null token, when the
  column has one, gets the last code.

``decode`` samples uniformly inside a bin, keeps integers integral and never
leaves [min, max]; encode(decode(c)) == c for every code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from dataloader.schema import CATEGORICAL, Column, Schema, category_list
from lib.domain import Domain

DEFAULT_BINS = 20


@dataclass(frozen=True)
class ColumnCoder:
    """Codes of one column.  ``edges`` (numeric only): bin j covers (edges[j], edges[j+1]]."""

    column: Column
    size: int
    edges: np.ndarray | None = None
    categories: tuple | None = None

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
        nbins = len(self.edges) - 1
        codes = np.clip(np.searchsorted(self.edges, v, side="left") - 1, 0, nbins - 1).astype(np.int32)
        if self.column.null is not None:
            codes[np.isnan(v)] = self.null_code
        return codes

    def decode(self, codes: np.ndarray, rng: np.random.Generator):
        """Typed values for ``codes``: a Categorical, or float64 (NaN = null) sampled inside each bin."""
        codes = np.asarray(codes)
        if self.categories is not None:
            return pd.Categorical.from_codes(codes, categories=list(self.categories))
        nbins = len(self.edges) - 1
        is_null = codes == nbins
        b = np.minimum(codes, nbins - 1)
        lo, hi = self.edges[b], self.edges[b + 1]
        if self.column.integral:  # integers lo+1 .. hi
            out = rng.integers(lo.astype(np.int64) + 1, hi.astype(np.int64) + 1).astype(np.float64)
        else:  # (lo, hi], falling back to hi where rounding lands on lo (one-value bins)
            out = hi - rng.random(len(b)) * (hi - lo)
            out = np.where(out <= lo, hi, out)
        out = np.clip(out, self.column.low, self.column.high)
        out[is_null] = np.nan
        return out

    def describe(self) -> str:
        if self.categories is not None:
            return f"{self.size} categories"
        return f"{len(self.edges) - 1} bins" + (" + null" if self.column.null is not None else "")


def _below(x: float, integral: bool) -> float:
    return x - 1 if integral else float(np.nextafter(x, -np.inf))


def numeric_edges(col: Column, public_values: np.ndarray | None, default_bins: int) -> np.ndarray:
    """Right-closed bin edges of a bounded numeric column: the schema's edges, one bin per integer of a
    small range, quantiles of ``public_values`` (integer spikes kept as their own bins), or equal width."""
    low, high = col.low, col.high
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
    if col.integral:
        cuts = np.floor(cuts)
    cuts = cuts[(cuts >= low) & (cuts < high)]
    return np.unique(np.concatenate([[_below(low, col.integral)], cuts, [high]]))


@dataclass(frozen=True)
class Encoder:
    """One ColumnCoder per schema column, in schema order."""

    coders: tuple[ColumnCoder, ...]

    @classmethod
    def fit(cls, schema: Schema, public: pd.DataFrame | None = None,
            default_bins: int = DEFAULT_BINS) -> "Encoder":
        """Build coders from the schema (which must have every range) and optional public data."""
        schema.require_ranges()
        coders = []
        for col in schema.columns:
            if col.kind == CATEGORICAL:
                cats = tuple(category_list(col))
                coders.append(ColumnCoder(col, len(cats), categories=cats))
                continue
            pub = None
            if public is not None:
                pub = public[col.name].to_numpy(dtype=np.float64)
                pub = pub[~np.isnan(pub)]
            edges = numeric_edges(col, pub, default_bins)
            coders.append(ColumnCoder(col, len(edges) - 1 + (col.null is not None), edges=edges))
        return cls(tuple(coders))

    @property
    def names(self) -> list[str]:
        return [c.column.name for c in self.coders]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(c.size for c in self.coders)

    @property
    def domain(self) -> Domain:
        """The public domain methods see: names, code counts, numeric columns' clip ranges."""
        return Domain(tuple(self.names), self.sizes,
                      {c.column.name: (c.column.low, c.column.high) for c in self.coders if c.categories is None})

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
        of their codes (clipped to the range, rounded in integer columns).  Randomness only
        from ``rng``."""
        raw = raw or {}
        out = {}
        for j, c in enumerate(self.coders):
            col = c.column
            if col.name in raw:
                values = np.clip(np.asarray(raw[col.name], dtype=np.float64), col.low, col.high)
                values = np.round(values) if col.integral else values
            else:
                values = c.decode(codes[:, j], rng)
            out[col.name] = pd.array(values, dtype="Int64") if c.categories is None and col.integral else values
        return pd.DataFrame(out)
