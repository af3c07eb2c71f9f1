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

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from dataloader.schema import CATEGORICAL, Schema

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


def classifier_utility(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, target: str,
                       sensitive: str | None = None, positive: str | None = None, test_share: float = 0.3,
                       seed: int = 0, max_train: int = MAX_TRAIN) -> dict:
    """Accuracy and macro-F1 of the real- and synthetic-trained models on held-out real rows; with
    ``sensitive``, per value of that column: accuracy, false-negative and false-positive rate for
    ``positive`` (default: the target's last schema value) and the largest gap between groups."""
    col = schema.column(target)
    if col.kind != CATEGORICAL:
        raise ValueError(f"--target {target} must be a categorical column (it is {col.describe()})")
    positive = str(positive if positive is not None else col.values[-1])
    cats, nums = _features(schema, target)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(real))
    n_test = max(1, int(round(test_share * len(real))))
    test, train = real.iloc[order[:n_test]], real.iloc[order[n_test:]]
    if len(synthetic) > max_train:
        synthetic = synthetic.iloc[rng.choice(len(synthetic), max_train, replace=False)]
    if len(train) > max_train:
        train = train.iloc[:max_train]
    x_test = _frame(test, cats, nums)
    y_test = test[target].astype(str).str.strip().to_numpy()
    out = {"target": target, "positive_class": positive, "test_rows": int(n_test)}
    for name, df in (("trained_on_real", train), ("trained_on_synthetic", synthetic)):
        y = df[target].astype(str).str.strip().to_numpy()
        if len(np.unique(y)) < 2:
            pred = np.full(len(y_test), y[0] if len(y) else "")
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                pred = _model(cats, nums).fit(_frame(df, cats, nums), y).predict(x_test)
        result = {"train_rows": int(len(df)), "accuracy": float(accuracy_score(y_test, pred)),
                  "macro_f1": float(f1_score(y_test, pred, average="macro", zero_division=0))}
        if sensitive is not None:
            values = test[sensitive].astype(str).str.strip().to_numpy()
            groups = {v: _rates(y_test[values == v], pred[values == v], positive) for v in sorted(set(values))}
            result["by_group"] = {"column": sensitive, "groups": groups, "largest_gap": _largest_gaps(groups)}
        out[name] = result
    return out
