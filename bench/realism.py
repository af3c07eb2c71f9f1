"""Realistic records on the demo release: rules, derived columns, DENSITY, precision, score.

    python bench/realism.py [--seeds 3] [--no-derive]

Releases the bundled demo data (parameters.json, data/demo, --on-invalid drop) with the
default method for each seed and scores every run against the private file with the
evaluation bins of ``main.py score``.  Prints one markdown row per epsilon (mean over seeds):
Sprint-2 score, mean 2-way TVD, DENSITY's 1-way TVD and its most distinct values in a
PUMA × YEAR group, rule violations (all declared rules), INDP_CAT's agreement with the
public INDP -> INDP_CAT mapping, PINCP_DECILE's null agreement with PINCP, and the worst gap,
over numeric columns, between the real and synthetic share of values on the public data's
precision grid (the largest power of ten holding at least half of the public values).
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsyn.api import release  # noqa: E402
from dpsyn.dataloader.rules import violations  # noqa: E402
from dpsyn.dataloader.schema import NUMERIC, load_schema  # noqa: E402
from dpsyn.evaluation.metrics import marginal_tvd  # noqa: E402
from dpsyn.evaluation.scoring import EvaluationOptions, Evaluator  # noqa: E402

DEMO = ROOT / "data" / "demo"


def grid_of(values: np.ndarray) -> float:
    """The largest power of ten (10^3 down to 10^-6) that at least half of ``values`` are multiples of."""
    for k in range(3, -7, -1):
        g = 10.0 ** k
        if np.mean(np.abs(values / g - np.round(values / g)) < 1e-6) >= 0.5:
            return g
    return 0.0


def on_grid(values: np.ndarray, g: float) -> float:
    return float(np.mean(np.abs(values / g - np.round(values / g)) < 1e-6)) if g else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-derive", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    schema = load_schema(ROOT / "parameters.json")
    columns = {c.name: c for c in schema.columns}
    real = pd.read_csv(DEMO / "private.csv", dtype=str)
    public = pd.read_csv(DEMO / "public.csv", dtype=str)
    evaluator = Evaluator(schema, real, EvaluationOptions(group_columns=("PUMA", "YEAR")))
    names = [c.column.name for c in evaluator.coders]
    density = names.index("DENSITY")
    mapping = public[public.INDP != "N"].groupby("INDP").INDP_CAT.first()
    numeric = [c.name for c in schema.columns if c.kind == NUMERIC]
    grids = {c: grid_of(pd.to_numeric(public[c], errors="coerce").dropna().to_numpy()) for c in numeric}
    real_share = {c: on_grid(pd.to_numeric(real[c], errors="coerce").dropna().to_numpy(), grids[c]) for c in numeric}
    rows: dict[str, list] = {}
    for seed in range(args.seeds):
        for run in release(DEMO / "private.csv", ROOT / "parameters.json", public=DEMO / "public.csv", seed=seed,
                           on_invalid="drop", derive=not args.no_derive):
            table = run.table
            scored = evaluator.evaluate_runs({"x": (table, *evaluator.encode_runs(
                table.assign(epsilon=run.epsilon))[f"{run.epsilon:g}"][1:])})["runs"]["x"]
            codes = evaluator.encode_runs(table.assign(epsilon=run.epsilon))[f"{run.epsilon:g}"][1]
            text = table.astype(str)
            worked = text[text.INDP != "<NA>"]
            agree = (worked.INDP_CAT.to_numpy() == worked.INDP.map(mapping).fillna("N").to_numpy()).mean()
            nulls = (table.PINCP.isna().to_numpy() == (text.PINCP_DECILE == "N").to_numpy()).mean()
            gaps = [abs(on_grid(table[c].dropna().to_numpy(dtype=float), grids[c]) - real_share[c]) for c in numeric]
            rows.setdefault(f"{run.epsilon:g}", []).append([
                scored["sprint2_score"], scored["tvd"]["2-way"]["mean"],
                marginal_tvd(evaluator.real_codes, codes, evaluator.sizes, (density,)),
                table.groupby(["PUMA", "YEAR"], observed=True).DENSITY.nunique().max(),
                sum(violations(table, schema.rules, columns).values()), agree, nulls, max(gaps)])
    variant = "--no-derive" if args.no_derive else "default"
    print(f"| eps ({variant}, {args.seeds} seeds) | Sprint-2 | 2-way TVD | DENSITY TVD | DENSITY values per group "
          f"(max) | rule violations | INDP_CAT agrees | PINCP_DECILE null agrees | worst precision-grid gap |")
    print("|---|---|---|---|---|---|---|---|---|")
    for eps, values in rows.items():
        m = np.mean(np.array(values, dtype=float), axis=0)
        print(f"| {eps} | {m[0]:.1f} | {m[1]:.4f} | {m[2]:.3f} | {m[3]:.0f} | {m[4]:.0f} | {m[5]:.1%} | {m[6]:.1%} | "
              f"{m[7]:.3f} |")


if __name__ == "__main__":
    main()
