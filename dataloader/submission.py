"""Checks a submission CSV the way Sprint 2 did: columns, values, all epsilons, row limits."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dpsyn.dataloader.reading import DataError, validate
from dpsyn.dataloader.schema import Schema


def check_submission(schema: Schema, path: str | Path) -> list[str]:
    """Every problem found in the submission at ``path``, one line each; empty when it passes.

    Columns must be ``epsilon``, the schema columns in order, then at most one id
    column; every run's epsilon must be present and no other; rows per epsilon at
    most that run's max_records; every value inside the schema (categories, min/max,
    null tokens; numbers in columns still without a range are only checked to be numbers).
    """
    path = Path(path)
    try:
        df = pd.read_csv(path, dtype=str, engine="pyarrow", keep_default_na=False)
    except (OSError, ValueError) as exc:
        return [f"submission {path}: cannot read as CSV: {str(exc).strip().splitlines()[0]}"]
    problems = []
    expected = ["epsilon"] + schema.names
    header = list(df.columns)
    if header[:len(expected)] != expected or len(header) > len(expected) + 1:
        problems.append(f"submission: columns must be {', '.join(expected)} and at most one id column; "
                        f"got {', '.join(header)}")
        return problems
    eps = pd.to_numeric(df["epsilon"], errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(eps).any():
        problems.append(f"submission: {int(np.isnan(eps).sum())} row(s) with a non-numeric epsilon")
    matched = np.zeros(len(df), dtype=bool)
    for run in schema.runs:
        rows = np.isclose(eps, run.epsilon, rtol=1e-9, atol=0)
        matched |= rows
        n = int(rows.sum())
        if n == 0:
            problems.append(f"submission: no rows for epsilon {run.epsilon:g}")
        elif n > run.max_records:
            problems.append(f"submission: epsilon {run.epsilon:g} has {n} rows, more than max_records "
                            f"{run.max_records}")
    others = sorted({float(e) for e in eps[~matched & ~np.isnan(eps)]})
    if others:
        problems.append(f"submission: epsilon value(s) not in the parameters: "
                        f"{', '.join(f'{e:g}' for e in others if math.isfinite(e))}")
    if len(df):
        try:
            validate(df[schema.names], schema, "submission", on_invalid="error", hint="")
        except DataError as exc:
            problems.append(str(exc))
    return problems
