"""How closely dpsyn's public regime follows the public file's 2-way marginals, Sprint-2 shape.

    python bench/public_shape.py [--rows 100000] [--eps 0.1] [--seeds 3]

The private table is the seeded generator's (tests/sprint2_generator.py, seed 1, theta = 7),
the public table another draw of it (seed 2, a fifth of the rows).  At eps = 0.1 and
theta = 7 the planner picks the public regime: all budget on noisy PUMA × YEAR counts, the
records shaped by the public 2-way marginals alone.  The figure is the mean TVD, over all
pairs of non-group columns (encoded as the release encodes them), between the synthetic
table's 2-way marginals and the public table's: what the release should reproduce.
Prints one markdown row (mean over seeds).
"""
from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsyn.api import release  # noqa: E402
from tests.sprint2_generator import SPRINT2_PARAMS, generate  # noqa: E402
from dpsyn.dataloader.encoding import Encoder  # noqa: E402
from dpsyn.dataloader.reading import as_text, public_ranges, validate  # noqa: E402
from dpsyn.dataloader.schema import parse_schema  # noqa: E402
from dpsyn.lib.records.marginals import count_marginal  # noqa: E402

GROUPS = ("PUMA", "YEAR")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    params = json.loads(SPRINT2_PARAMS.read_text())
    params["runs"] = [dict(params["runs"][0], epsilon=args.eps, max_records=10 ** 7)]
    private = generate(args.rows, seed=1)
    public = generate(args.rows // 5, seed=2).drop(columns="sim_individual_id")

    schema = parse_schema(params)
    public_typed = validate(as_text(public), schema, "public", public=True)
    encoder = Encoder.fit(schema.with_public_ranges(public_ranges(public_typed, schema)), public_typed)
    public_codes = encoder.encode(public_typed)
    others = [j for j, name in enumerate(encoder.names) if name not in GROUPS]
    sizes = encoder.sizes

    def distribution(codes, a, b):
        rows = codes[:, [a, b]]
        rows = rows[(rows >= 0).all(axis=1)]
        return count_marginal(rows, (sizes[a], sizes[b])) / max(len(rows), 1)

    tvds, steps = [], set()
    for seed in range(args.seeds):
        (run,) = release(private, params, public, seed=seed, on_invalid="clip")
        steps.add(", ".join(c.step for c in run.ledger.charges))
        synthetic = encoder.encode(run.table)
        tvds.append(np.mean([0.5 * np.abs(distribution(synthetic, a, b) - distribution(public_codes, a, b)).sum()
                             for a, b in itertools.combinations(others, 2)]))
    print("| rows | eps | theta | measurements | mean 2-way TVD to the public marginals (mean of seeds) |")
    print("|---|---|---|---|---|")
    print(f"| {args.rows:,} | {args.eps:g} | {params['runs'][0]['max_records_per_individual']} | "
          f"{'; '.join(sorted(steps))} | {np.mean(tvds):.3f} ({', '.join(f'{t:.3f}' for t in tvds)}) |")


if __name__ == "__main__":
    main()
