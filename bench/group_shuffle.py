"""The Sprint-2 score of the real table with its rows shuffled across groups.

Every group keeps its real number of rows, and its records are drawn at random from the whole real
table (the non-group columns of a random permutation of the rows).  On the Sprint-2 generator
(tests/sprint2_generator.py), whose people do not depend on their PUMA, this is what a synthesizer
that knew the exact group counts and the exact joint distribution would score: the gap to 1,000 is
the sampling spread of groups of a few dozen or hundred rows.  On real data (the demo) groups do
differ, and the shuffle shows what ignoring that costs.  No privacy, no synthesizer: it reads the
real data, as evaluation does.

    python bench/group_shuffle.py [--datasets sprint2 demo] [--sprint2-rows 100000 1000000]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run_bench import DATASETS, sprint2  # noqa: E402
from dpsyn.dataloader.schema import parse_schema  # noqa: E402
from dpsyn.evaluation.scoring import EvaluationOptions, Evaluator  # noqa: E402

SEEDS = 2


def shuffled_score(data) -> float:
    """Mean Sprint-2 score over SEEDS shuffles of the non-group columns across all rows."""
    evaluator = Evaluator(parse_schema(data.params(1.0)), data.real, EvaluationOptions(group_columns=data.groups))
    others = [c for c in data.real.columns if c not in data.groups]
    scores = []
    for seed in range(SEEDS):
        table = data.real.copy()
        table[others] = data.real[others].to_numpy()[np.random.default_rng(seed).permutation(len(table))]
        scores.append(next(iter(evaluator.evaluate(table)["runs"].values()))["sprint2_score"])
    return float(np.mean(scores))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["sprint2", "demo"], choices=list(DATASETS))
    parser.add_argument("--sprint2-rows", nargs="+", type=int, default=[100_000, 1_000_000])
    args = parser.parse_args()
    print("| dataset | rows | Sprint-2 score, rows shuffled across groups |")
    print("|---|---|---|")
    for name in args.datasets:
        for data in ([sprint2(n) for n in args.sprint2_rows] if name == "sprint2" else [DATASETS[name]()]):
            if data.groups:
                print(f"| {name} | {len(data.real):,} | {shuffled_score(data):.1f} |", flush=True)


if __name__ == "__main__":
    main()
