"""What a classifier learns: train on synthetic, test on real, beside the same model trained on real.

Evaluation only: reads the real table, spends no budget, and its numbers are not DP.
The model is a logistic regression on every column but the target: categorical
columns one-hot encoded (values unseen in training ignored), numeric columns
standardised with nulls imputed by the median plus a missing flag.  The real table is
split once (``test_share`` held out, seeded); the "real" model trains on the rest, the
"synthetic" model on (up to ``max_train`` rows of) the synthetic table, and both are
scored on the same held-out real rows.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from dpsyn.dataloader.schema import CATEGORICAL, Schema

MAX_TRAIN = 100_000


def _features(schema: Schema, target: str) -> tuple[list[str], list[str]]:
    cats = [c.name for c in schema.columns if c.name != target and c.kind == CATEGORICAL]
    nums = [c.name for c in schema.columns if c.name != target and c.kind != CATEGORICAL]
    return cats, nums


def _model(cats: list[str], nums: list[str]):
    prep = ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore"), cats),
        ("num", make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler()), nums),
    ])
    return make_pipeline(prep, LogisticRegression(max_iter=300))


def _frame(df: pd.DataFrame, cats: list[str], nums: list[str]) -> pd.DataFrame:
    out = {c: df[c].astype(str).str.strip().to_numpy() for c in cats}
    out.update({c: pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64) for c in nums})
    return pd.DataFrame(out)


def _rates(y_true: np.ndarray, y_pred: np.ndarray, positive: str) -> dict[str, float | None]:
    """Accuracy, and false-negative / false-positive rates for the ``positive`` class."""
    pos, pred_pos = y_true == positive, y_pred == positive
    return {"rows": int(len(y_true)),
            "accuracy": float((y_true == y_pred).mean()) if len(y_true) else None,
            "false_negative_rate": float((~pred_pos[pos]).mean()) if pos.any() else None,
            "false_positive_rate": float(pred_pos[~pos].mean()) if (~pos).any() else None}


def _largest_gaps(groups: dict[str, dict]) -> dict[str, float | None]:
    gaps = {}
    for key in ("accuracy", "false_negative_rate", "false_positive_rate"):
        values = [g[key] for g in groups.values() if g[key] is not None]
        gaps[key] = float(max(values) - min(values)) if len(values) > 1 else None
    return gaps


class UtilityTest:
    """The held-out real rows and the real-trained model's results, computed once per real table;
    ``score(synthetic)`` adds the synthetic-trained model's results.  Raises ValueError when the
    target is not categorical."""

    def __init__(self, real: pd.DataFrame, schema: Schema, target: str, sensitive: str | None = None,
                 positive: str | None = None, test_share: float = 0.3, seed: int = 0, max_train: int = MAX_TRAIN):
        col = schema.column(target)
        if col.kind != CATEGORICAL:
            raise ValueError(f"--target {target} must be a categorical column (it is {col.describe()})")
        self.target, self.sensitive, self.max_train, self.seed = target, sensitive, max_train, seed
        self.positive = str(positive if positive is not None else (col.values or ("",))[-1])
        self.cats, self.nums = _features(schema, target)
        order = np.random.default_rng(seed).permutation(len(real))
        n_test = max(1, int(round(test_share * len(real))))
        test, train = real.iloc[order[:n_test]], real.iloc[order[n_test:]].iloc[:max_train]
        self.x_test = _frame(test, self.cats, self.nums)
        self.y_test = test[target].astype(str).str.strip().to_numpy()
        self.groups = test[sensitive].astype(str).str.strip().to_numpy() if sensitive else None
        self.real_result = self._fit_and_test(train)

    def score(self, synthetic: pd.DataFrame) -> dict:
        """Both models' results on the held-out real rows (see the module doc)."""
        if len(synthetic) > self.max_train:
            rng = np.random.default_rng(self.seed)
            synthetic = synthetic.iloc[rng.choice(len(synthetic), self.max_train, replace=False)]
        return {"target": self.target, "positive_class": self.positive, "test_rows": int(len(self.y_test)),
                "trained_on_real": self.real_result, "trained_on_synthetic": self._fit_and_test(synthetic)}

    def _fit_and_test(self, df: pd.DataFrame) -> dict:
        y = df[self.target].astype(str).str.strip().to_numpy()
        if len(np.unique(y)) < 2:
            pred = np.full(len(self.y_test), y[0] if len(y) else "")
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                pred = _model(self.cats, self.nums).fit(_frame(df, self.cats, self.nums), y).predict(self.x_test)
        result: dict[str, Any] = {"train_rows": int(len(df)), "accuracy": float(accuracy_score(self.y_test, pred)),
                  "macro_f1": float(f1_score(self.y_test, pred, average="macro", zero_division=0))}
        if self.groups is not None:
            groups = {v: _rates(self.y_test[self.groups == v], pred[self.groups == v], self.positive)
                      for v in sorted(set(self.groups))}
            result["by_group"] = {"column": self.sensitive, "groups": groups, "largest_gap": _largest_gaps(groups)}
        return result
