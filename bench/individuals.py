"""Synthetic individuals: the default release with and without rows linked into individuals (stages/individuals.py).

    python bench/individuals.py [--seeds 3] [--sprint2-rows 200000] [--out bench/RESULTS.md]

Two panels with ids: the Sprint-2 generator (tests/sprint2_generator.py, θ = 7 per sim_individual_id, YEAR
distinct per individual, groups PUMA × YEAR; declared SEX, RACE, HISPAN stable, AGE advancing with YEAR,
PUMA, EMPSTAT and INCTOT followed) and the generalization suite's person panel rwm5yr (θ = 5 per id, year
distinct; female stable, age advancing with year, outwork, married and hhninc followed).  For each ε and seed,
one release without the parameters' ``individual`` section (every row its own individual) and one with it,
scored against the real table by ``dpsyn score``'s evaluator: the Sprint-2 score per group (rwm5yr: per
year), seconds, and for the linked release the TVD of rows per individual, the share of individuals (two rows
or more) whose stable columns agree and whose advancing columns advance, and each followed column's
transition-table TVD.  The transition tables' noise floor is the TVD their measurement's noise alone would
give the table pooled over the clock, at most 1: E|N(0, σ²)| = σ·sqrt(2/π) per pooled cell (σ the noise sd
times the square root of the clock values that start pairs) over twice the real table's pairs; for a column
measured as stays only (PUMA), the floor of its stays table, which is not the whole table scored.  Beside it,
the margins floor (``dpsyn score``'s, evaluation/individuals.py ``margins_floor``): the least TVD of any table
whose pairs start from and end at the synthetic pairs' codes at each step, below which no linking of the same
rows gets, so the error up to it is the rows' own.  The page section "## Synthetic individuals" of ``--out`` is
replaced by the table.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from dpsyn.api import release  # noqa: E402
from dpsyn.dataloader.schema import parse_schema  # noqa: E402
from dpsyn.evaluation.scoring import EvaluationOptions, Evaluator  # noqa: E402
from bench.sections import replaced  # noqa: E402

SECTION = "## Synthetic individuals"
DECLARED = {
    "sprint2": {"stable": ["SEX", "RACE", "HISPAN"], "advances": {"AGE": "YEAR"},
                "follow": ["PUMA", "EMPSTAT", "INCTOT"]},
    "gen_rwm5yr": {"stable": ["female"], "advances": {"age": "year"}, "follow": ["outwork", "married", "hhninc"]},
}


def dataset(name: str, rows: int):
    """The bench Dataset (bench/run_bench.py, bench/generalization.py); rwm5yr's year as numbers (its clock)."""
    if name == "sprint2":
        from bench.run_bench import sprint2
        return sprint2(rows)
    from bench.generalization import dataset as suite_table
    data = suite_table(name)
    data.schema["year"] = {"dtype": "int", "values": sorted(int(v) for v in data.schema["year"]["values"])}
    return data


def floor(measurement, real_pairs: int) -> float:
    """The TVD the noise of ``measurement`` alone gives its table pooled over the clock (module doc)."""
    clock_values, *cells = measurement.noisy.shape
    pooled_sd = measurement.sigma * math.sqrt(clock_values - 1)  # the last clock value starts no pair
    return min(1.0, math.sqrt(2 / math.pi) * pooled_sd * int(np.prod(cells)) / (2 * max(real_pairs, 1)))


def one(data, params: dict, seed: int, evaluator: Evaluator) -> tuple[dict, float, list]:
    start = time.perf_counter()
    (run,) = release(data.private, params, data.public, "dpsyn", seed=seed, group_columns=data.groups,
                     on_invalid=data.on_invalid, id_column=data.id_column)
    seconds = time.perf_counter() - start
    ids = run.individuals if run.individuals is not None else np.arange(len(run.table))
    table = run.table.assign(**{data.id_column: ids.astype(str)})
    result = next(iter(evaluator.evaluate(table)["runs"].values()))
    return result, seconds, [m for m in run.measurements if "between consecutive" in m.label]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--sprint2-rows", type=int, default=200_000)
    parser.add_argument("--datasets", nargs="+", default=list(DECLARED))
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    header = ["| dataset | ε | score without / with | seconds without / with | rows per individual TVD | "
              "stable agree | advance | transition TVD (noise floor; margins floor) |",
              "|---|---|---|---|---|---|---|---|"]
    lines = list(header)
    print("\n".join(lines), flush=True)
    for name in args.datasets:
        data = dataset(name, args.sprint2_rows)
        linked = dict(data.params(1.0), individual=DECLARED[name])
        evaluator = Evaluator(parse_schema(linked), data.private,
                              EvaluationOptions(group_columns=data.groups, id_column=data.id_column))
        real = evaluator.real_individuals
        pairs = sum((k - 1) * n for k, n in real.sizes.items())
        for eps in args.eps:
            runs = {"without": [], "with": []}
            for seed in range(1, args.seeds + 1):
                for variant in runs:
                    params = dict(data.params(eps), individual=DECLARED[name]) if variant == "with" \
                        else data.params(eps)
                    runs[variant].append(one(data, params, seed, evaluator))
            people = [r["individuals"] for r, _, _ in runs["with"]]
            follow = DECLARED[name]["follow"]
            floors = {m.query.column: floor(m, pairs) for m in runs["with"][0][2]}
            transitions = ", ".join(
                f"{c} {np.mean([p['transitions_tvd'][c] for p in people]):.3f} ({floors[c]:.3f}; "
                f"{np.mean([p['transitions_margins_floor'][c] for p in people]):.3f})" for c in follow)
            line = (f"| {name} | {eps:g} | "
                    + " / ".join(f"{np.mean([r['sprint2_score'] for r, _, _ in runs[v]]):.1f}" for v in runs) + " | "
                    + " / ".join(f"{np.mean([s for _, s, _ in runs[v]]):.1f}" for v in runs) + " | "
                    f"{np.mean([p['rows_per_individual_tvd'] for p in people]):.3f} | "
                    f"{np.mean([p['stable_agree'] for p in people]):.1%} | "
                    f"{np.mean([p['advance'] for p in people]):.1%} "
                    f"| {transitions} |")
            lines.append(line)
            print(line, flush=True)
    command = " ".join(["python bench/individuals.py"] + sys.argv[1:])
    text = [SECTION, "", f"Rows linked into individuals (stages/individuals.py), mean of {args.seeds} seeds, "
            f"from `{command}` (2 cores; module doc of bench/individuals.py for what each column is).", ""] + lines
    page = args.out.read_text() if args.out.exists() else ""
    args.out.write_text(replaced(page, SECTION, "\n".join(text) + "\n"))


if __name__ == "__main__":
    main()
