"""Raw values -> integer codes shared by a real and a synthetic table, for evaluation only.

Scoring compares tables, so both sides must be binned alike, and the Sprint-2 score
fixes its own bins (../shared/data/sprint2/SCORING.md), right-closed:

* AGE: (-inf, 20], (20, 25], ..., (95, 100], (100, inf);
* INCTOT, INCWAGE, INCWELFR, INCINVST, INCEARN: (-inf, 0], (0, 5000], ..., (95000, 100000], (100000, inf);
* POVERTY, HHWT, PERWT: (-inf, 0], (0, 20], ..., (480, 500], (500, inf);
* DEPARTS, ARRIVES: (-inf, 0] then every quarter hour h*100+m (h 0..23, m 0/15/30/45), then (2345, inf).

Other numeric columns take the schema's bin edges when it lists them, one bin per integer
of a small range, or else quantiles of the real values (as many as the schema's bin
count or ``bins``; integer spikes such as zero incomes keep their own bin; the range
from the schema or, failing that, the real values), with the outer edges opened to
+-inf.  Evaluation may read real data: it spends no budget and its numbers are not DP.
A null (empty or the column's null token) gets its own code.  Categorical columns code
the schema's values in order; anything else on either side shares one extra "outside the schema" code, counted.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from dpsyn.dataloader.encoding import DEFAULT_BINS, numeric_edges
from dpsyn.dataloader.reading import category_codes
from dpsyn.dataloader.schema import CATEGORICAL, Column, Schema, category_list

_QUARTER_HOURS = [h * 100 + m for h in range(24) for m in (0, 15, 30, 45)]
SPRINT2_EDGES = {
    "AGE": [-np.inf, *range(20, 101, 5), np.inf],
    **{c: [-np.inf, *range(0, 100_001, 5000), np.inf] for c in ("INCTOT", "INCWAGE", "INCWELFR", "INCINVST",
                                                                "INCEARN")},
    **{c: [-np.inf, *range(0, 501, 20), np.inf] for c in ("POVERTY", "HHWT", "PERWT")},
    **{c: [-np.inf, *_QUARTER_HOURS, np.inf] for c in ("DEPARTS", "ARRIVES")},
}


@dataclass(frozen=True)
class EvaluationCoder:
    """Codes of one column for scoring: ``labels[k]`` names code k."""

    column: Column
    edges: np.ndarray | None  # numeric: bin k is (edges[k], edges[k+1]]; null = len(edges) - 1
    labels: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.labels)

    def encode(self, values: pd.Series) -> tuple[np.ndarray, int]:
        """(codes, how many values fell outside the schema) for text or typed ``values``."""
        col = self.column
        if self.edges is None:
            codes = category_codes(values.astype(str), col) if len(values) else np.zeros(0, np.int32)
            outside = codes < 0
            codes[outside] = self.size - 1
            return codes, int(outside.sum())
        text = values.astype(str).str.strip() if values.dtype == object or isinstance(values.dtype, pd.StringDtype) \
            else None
        numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        nbins = len(self.edges) - 1
        codes = (np.searchsorted(self.edges, numbers, side="left") - 1).clip(0, nbins - 1).astype(np.int32)
        is_null = np.isnan(numbers)
        codes[is_null] = nbins
        unreadable = 0
        if text is not None:
            token = (text == "") | (text == col.null) if col.null is not None else text == ""
            unreadable = int((is_null & ~token.to_numpy()).sum())
        return codes, unreadable


def evaluation_coders(schema: Schema, real: pd.DataFrame, bins: int = DEFAULT_BINS) -> list[EvaluationCoder]:
    """One coder per schema column (see the module doc); ``real`` gives the quantile edges (and the range
    of unbounded columns) of numeric columns without Sprint-2 or explicit schema bins."""
    coders = []
    for col in schema.columns:
        if col.kind == CATEGORICAL:
            coders.append(EvaluationCoder(col, None, tuple(str(c) for c in category_list(col)) + ("<outside>",)))
            continue
        if col.name in SPRINT2_EDGES:
            edges = np.array(SPRINT2_EDGES[col.name], dtype=np.float64)
        else:
            values = pd.to_numeric(real[col.name], errors="coerce").to_numpy(dtype=np.float64)
            values = values[~np.isnan(values)]
            if not col.bounded:
                low, high = (values.min(), values.max()) if len(values) else (0.0, 1.0)
                col = replace(col, low=float(low), high=float(high))
            edges = numeric_edges(col, values, bins).astype(np.float64)
            edges[0], edges[-1] = -np.inf, np.inf
        labels = tuple(_bin_label(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])) + ("<null>",)
        coders.append(EvaluationCoder(schema.column(col.name), edges, labels))
    return coders


def _bin_label(lo: float, hi: float) -> str:
    return f"({lo:g}, {hi:g}]" if np.isfinite(hi) else f"({lo:g}, inf)"


def encode_for_evaluation(coders: list[EvaluationCoder], df: pd.DataFrame) -> tuple[np.ndarray, dict[str, int]]:
    """n × d codes in coder order, and per column the number of values outside the schema."""
    out = np.empty((len(df), len(coders)), dtype=np.int32)
    outside = {}
    for j, coder in enumerate(coders):
        out[:, j], n = coder.encode(df[coder.column.name])
        if n:
            outside[coder.column.name] = n
    return out, outside
