"""Raw-value query errors (RAP++'s evaluation): mixed marginals and class-conditional linear thresholds.

Evaluation only: reads the real table, spends no budget, and its numbers are not DP.  The
queries read numbers as written, not bins, so binned and unbinned methods answer the same
questions:

* a 2-way mixed marginal picks two non-group columns, at least one numeric; a categorical
  column gets a value (that of a random real row), a numeric one a threshold (the real values'
  quantile at a uniform random level); its answer is the share of rows with that value and at
  most that threshold (a null meets no threshold);
* a class-conditional linear threshold picks a target value (that of a random real row), a
  random direction w over the numeric columns (standardised by the real means and deviations)
  and a threshold (the real projections' quantile at a uniform random level); its answer is the
  share of rows with that target value and w·x at most the threshold (rows with a null meet none).

The error of a query is |real answer - synthetic answer|; reported as the mean and the max.
Alongside, the correlation error: |real - synthetic| Pearson correlation of each pair of numeric
columns (the reweighting paper's utility measure, as a mean instead of its L1 sum).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dpsyn.dataloader.schema import CATEGORICAL, Schema

QUERIES = 1000


def _numbers(df: pd.DataFrame, columns: list[str]) -> np.ndarray:
    return np.column_stack([pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64) for c in columns]) \
        if columns else np.zeros((len(df), 0))


def _labels(df: pd.DataFrame, column: str) -> np.ndarray:
    return df[column].astype(str).str.strip().to_numpy()


class MixedWorkload:
    """The random queries of the module doc, drawn once from the real table (``seed``), and their
    real answers; ``errors(synthetic)`` scores a table on them."""

    def __init__(self, schema: Schema, real: pd.DataFrame, group_columns: tuple[str, ...] = (),
                 target: str | None = None, seed: int = 0, queries: int = QUERIES):
        rng = np.random.default_rng(seed)
        others = [c for c in schema.names if c not in group_columns]
        self.numeric = [c for c in others if schema.column(c).kind != CATEGORICAL]
        pairs = [(a, b) for i, a in enumerate(others) for b in others[i + 1:]
                 if a in self.numeric or b in self.numeric]
        self.marginals = []  # (column, value or threshold) pairs
        values = _numbers(real, self.numeric)
        labels = {c: _labels(real, c) for c in others if c not in self.numeric}
        for _ in range(queries if pairs and len(real) else 0):
            query = []
            for column in pairs[rng.integers(len(pairs))]:
                if column in self.numeric:
                    v = values[:, self.numeric.index(column)]
                    v = v[~np.isnan(v)]
                    query.append((column, float(np.quantile(v, rng.random())) if len(v) else 0.0))
                else:
                    query.append((column, labels[column][rng.integers(len(real))]))
            self.marginals.append(tuple(query))
        self.target = target if target is not None and self.numeric and len(real) else None
        self.thresholds = []  # (target value, direction, threshold)
        if self.target is not None:
            self.mean = np.nanmean(values, axis=0)
            self.scale = np.where(np.nanstd(values, axis=0) > 0, np.nanstd(values, axis=0), 1.0)
            z = (values - self.mean) / self.scale
            target_labels = labels[self.target] if self.target in labels else _labels(real, self.target)
            for _ in range(queries):
                w = rng.normal(size=len(self.numeric)) / np.sqrt(len(self.numeric))
                p = z @ w
                p = p[~np.isnan(p)]
                self.thresholds.append((target_labels[rng.integers(len(real))], w,
                                        float(np.quantile(p, rng.random())) if len(p) else 0.0))
        self.real = self._answers(real)
        self.real_correlation = _correlation(real, self.numeric)

    def _answers(self, df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        n = max(len(df), 1)
        values = _numbers(df, self.numeric)
        labels = {}
        marginal = np.empty(len(self.marginals))
        for i, query in enumerate(self.marginals):
            hit = np.ones(len(df), dtype=bool)
            for column, x in query:
                if column in self.numeric:
                    hit &= values[:, self.numeric.index(column)] <= x  # NaN compares False
                else:
                    if column not in labels:
                        labels[column] = _labels(df, column)
                    hit &= labels[column] == x
            marginal[i] = hit.sum() / n
        linear = np.empty(len(self.thresholds))
        if self.thresholds:
            z = (values - self.mean) / self.scale
            assert self.target is not None, "thresholds are drawn only with a target"
            target = _labels(df, self.target)
            for i, (y, w, t) in enumerate(self.thresholds):
                linear[i] = ((target == y) & (z @ w <= t)).sum() / n
        return marginal, linear

    def errors(self, synthetic: pd.DataFrame) -> dict:
        """Mean and max absolute error of each query class and of the correlation matrix's entries
        (absent classes left out)."""
        out = {}
        answers = self._answers(synthetic) + (_correlation(synthetic, self.numeric),)
        for name, real, synth in zip(("mixed_marginals", "linear_thresholds", "correlation"),
                                     self.real + (self.real_correlation,), answers):
            if len(real):
                err = np.abs(real - synth)
                out[name] = {"queries": int(len(err)), "mean": float(err.mean()), "max": float(err.max())}
        return out


def _correlation(df: pd.DataFrame, numeric: list[str]) -> np.ndarray:
    """The Pearson correlations of each pair of ``numeric`` columns (rows where both are present; 0
    where a column is constant), upper triangle."""
    if len(numeric) < 2:
        return np.zeros(0)
    corr = pd.DataFrame(_numbers(df, numeric)).corr().to_numpy()
    i, j = np.triu_indices(len(numeric), k=1)
    return np.nan_to_num(corr[i, j], nan=0.0)
