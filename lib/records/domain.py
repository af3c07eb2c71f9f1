"""The public domain of an encoded table: column names, code counts, and numeric ranges.

Frozen and built from the schema and public data only (never from private data), after
private-pgm's ``Domain``.  Every column has integer codes 0..size-1; a numeric column
also keeps its raw values, whose public clip range [low, high] scales them to [0, 1]
for queries that skip bins (the private table's threshold and sum queries).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np


@dataclass(frozen=True)
class Domain:
    """``names[j]`` has codes 0..``sizes[j]``-1; ``ranges[name]`` = (low, high) of a numeric column;
    ``nullable``: the numeric columns that have a null token (their last code); ``steps[name]``: the
    grid a numeric column's raw values lie on (integers: 1; absent where any float may occur);
    ``edges[name]``: a numeric column's bin edges e_0 < ... < e_k (public): code j holds the raw values in
    (e_j, e_j+1], the first and last codes also those beyond e_0 and e_k; ``ordered[name]``: how many of a
    column's first codes stand for values in increasing order (a numeric column's bins, a categorical
    column's increasing numbers; a null token after them is not counted)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    nullable: frozenset[str] = frozenset()
    steps: Mapping[str, float] = field(default_factory=dict)
    edges: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    ordered: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self):
        if len(self.names) != len(self.sizes) or len(set(self.names)) != len(self.names):
            raise ValueError("a domain needs one size per column and unique column names")
        unknown = set(self.ranges) - set(self.names)
        if unknown:
            raise ValueError(f"ranges for columns not in the domain: {sorted(unknown)}")
        if not set(self.steps) <= set(self.ranges):
            raise ValueError(f"grid steps for non-numeric columns: {sorted(set(self.steps) - set(self.ranges))}")
        if not set(self.edges) <= set(self.ranges):
            raise ValueError(f"bin edges for non-numeric columns: {sorted(set(self.edges) - set(self.ranges))}")
        if any(not 0 <= self.ordered[n] <= self.sizes[self.index(n)] for n in self.ordered):
            raise ValueError("ordered codes outside a column's codes")
        if not set(self.nullable) <= set(self.ranges):
            raise ValueError(f"nullable columns that are not numeric: {sorted(set(self.nullable) - set(self.ranges))}")

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"{name} is not a column of the domain") from None

    def indices(self, attrs: Iterable[str]) -> list[int]:
        return [self.index(a) for a in attrs]

    def shape(self, attrs: Iterable[str]) -> tuple[int, ...]:
        return tuple(self.sizes[self.index(a)] for a in attrs)

    def size(self, attrs: Iterable[str] | None = None) -> int:
        """Number of cells of the marginal over ``attrs`` (all columns when None)."""
        return math.prod(self.sizes if attrs is None else self.shape(attrs))

    def is_numeric(self, name: str) -> bool:
        return name in self.ranges

    def scale(self, name: str, values: np.ndarray) -> np.ndarray:
        """Raw values of numeric column ``name`` mapped to [0, 1] by its public range (NaN stays NaN)."""
        return scale_to_unit(values, *self.ranges[name])


def scale_to_unit(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """``values`` mapped to [0, 1] by the range [low, high], clipped to it (NaN stays NaN; all 0 when
    the range is one point)."""
    width = high - low
    values = np.asarray(values, dtype=np.float64)
    if width <= 0:
        return np.where(np.isnan(values), np.nan, 0.0)
    return np.clip((values - low) / width, 0.0, 1.0)
