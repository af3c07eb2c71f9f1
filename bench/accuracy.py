"""Accuracy of each method at each epsilon, mean over seeds (numbers for bench/RESULTS.md).

    python bench/accuracy.py demo  [--seeds 1] [--methods histogram dpsyn]
    python bench/accuracy.py adult [--seeds 3]

demo: the bundled ACS excerpts (national 2018+2019, groups PUMA × YEAR), Sprint-2 style
k-marginal score on the encoded columns (50 pairs drawn with RandomState(123456)).
adult: ../shared/data/adult_privatepgm, 14 integer columns, no groups, no public file,
delta 1e-9, theta 1; mean TVD over all 91 2-way marginals.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dataloader.encoding import Encoder  # noqa: E402
from dataloader.io import read_table, validate  # noqa: E402
from dataloader.schema import load_schema, parse_schema  # noqa: E402
from lib.metrics import draw_pairs, k_marginal_score, mean_tvd  # noqa: E402
from lib.privacy import Ledger  # noqa: E402
from method import METHODS  # noqa: E402
from method.context import MethodOptions, RunContext  # noqa: E402

ADULT = ROOT.parent / "shared" / "data" / "adult_privatepgm"


def demo_data():
    schema = load_schema(ROOT / "parameters.json")
    public = validate(read_table(ROOT / "data/demo/public.csv", schema, "public", allow_extra=True), schema,
                      "public", public=True)
    private = validate(read_table(ROOT / "data/demo/private.csv", schema, "private"), schema, "private",
                       on_invalid="drop")
    encoder = Encoder.fit(schema, public)
    return schema, encoder, encoder.encode(private), encoder.encode(public), ("PUMA", "YEAR"), 1e-10


def adult_data():
    domain = json.loads((ADULT / "adult-domain.json").read_text())
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10 ** 6}],
                           "schema": {c: {"dtype": "int", "values": list(range(k))} for c, k in domain.items()}})
    encoder = Encoder.fit(schema)
    codes = pd.read_csv(ADULT / "adult.csv")[list(domain)].to_numpy(np.int32)
    return schema, encoder, codes, None, (), 1e-9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", choices=["demo", "adult"])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--methods", nargs="+", default=sorted(METHODS))
    parser.add_argument("--regime", default=None)
    parser.add_argument("--marginals", default="all", choices=["all", "select"])
    args = parser.parse_args()
    schema, encoder, codes, public, groups, delta = demo_data() if args.dataset == "demo" else adult_data()
    names, sizes = encoder.names, encoder.sizes
    group_idx = [names.index(g) for g in groups]
    others = [j for j in range(len(names)) if j not in group_idx]
    pairs = [(names.index(a), names.index(b)) for a, b in draw_pairs([names[j] for j in others])]
    print("| dataset | method | eps | Sprint-2-style score | mean 2-way TVD | seconds |")
    print("|---|---|---|---|---|---|")
    for method in args.methods:
        for eps in args.eps:
            scores, tvds, secs = [], [], []
            for seed in range(args.seeds):
                ctx = RunContext(encoder, MethodOptions(method, groups, regime=args.regime,
                                                              marginals=args.marginals), 1, 10 ** 7,
                                 Ledger(eps, delta), np.random.default_rng(seed), public)
                start = time.perf_counter()
                synth = METHODS[method](codes, ctx)
                secs.append(time.perf_counter() - start)
                scores.append(k_marginal_score(codes, synth, sizes, group_idx, pairs))
                tvds.append(mean_tvd(codes, synth, sizes, 2, others))
            print(f"| {args.dataset} | {method} | {eps:g} | {np.mean(scores):.1f} | {np.mean(tvds):.4f} | "
                  f"{np.mean(secs):.1f} |", flush=True)


if __name__ == "__main__":
    main()
