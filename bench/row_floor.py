"""The raw-value query errors of a table built from n real rows (bench/RESULTS.md "RAP++").

rap draws its records from n-hat relaxed rows (default 4,000): each record's numeric values are a
relaxed row's.  However well those rows were fitted, such a table cannot answer the random mixed
marginals and linear thresholds of evaluation/mixed.py better than one built from n real rows, each
copied to fill the table's size.  This script measures that floor: n rows drawn at random from the
real table, then as many records drawn from them as the real table has rows, scored against the real
table (mean over seeds 0-2).  No privacy, no synthesizer: it reads the real data, as evaluation does.

    python bench/row_floor.py [--datasets demo adult_raw] [--rows 2000 4000 8000 16000]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run_bench import DATASETS  # noqa: E402
from dpsyn.dataloader.schema import parse_schema  # noqa: E402
from dpsyn.evaluation.mixed import MixedWorkload  # noqa: E402

SEEDS = 3


def floor(name: str, rows: list[int]) -> list[tuple[int, float, float]]:
    """(n, mean mixed-marginal error, mean linear-threshold error) of tables built from n real rows,
    and of a bootstrap of the whole table (n = its size)."""
    d = DATASETS[name]()
    workload = MixedWorkload(parse_schema(d.params(1.0)), d.real, d.groups, d.target, seed=0)
    size = len(d.real)
    out = []
    for n in sorted(set(r for r in rows if r < size)) + [size]:
        mixed, linear = [], []
        for seed in range(SEEDS):
            rng = np.random.default_rng(seed)
            kept = rng.integers(0, size, n)
            errors = workload.errors(d.real.iloc[kept[rng.integers(0, n, size)]])
            mixed.append(errors["mixed_marginals"]["mean"])
            linear.append(errors.get("linear_thresholds", {}).get("mean", np.nan))
        out.append((n, float(np.mean(mixed)), float(np.mean(linear))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["demo", "adult_raw"], choices=list(DATASETS))
    parser.add_argument("--rows", nargs="+", type=int, default=[2000, 4000, 8000, 16000])
    args = parser.parse_args()
    print("| dataset | rows drawn from | mixed-marginal error | linear-threshold error |")
    print("|---|---|---|---|")
    for name in args.datasets:
        for n, mixed, linear in floor(name, args.rows):
            print(f"| {name} | {n:,} | {mixed:.4f} | {linear:.4f} |", flush=True)


if __name__ == "__main__":
    main()
