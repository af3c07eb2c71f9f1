"""Every method on the same datasets, epsilons and seeds; writes the accuracy table of bench/RESULTS.md.

    python bench/run_bench.py [--datasets demo adult ct_drug_deaths] [--methods ...] [--eps 0.1 1 10]
                              [--seeds 3] [--out bench/out/run_bench.md]

Each (dataset, method, epsilon, seed) runs in a forked process: wall time is the
synthesis alone (encoded data in, codes out), peak memory is that process's largest
resident set (it includes the loaded dataset).  The codes are decoded to a table and
scored with the ``score`` command's code (lib/evaluation.py) against the real table:
Sprint-2 score (per group when the dataset has groups), mean 1/2/3-way TVD (100 random
3-way marginals) and, with a target, the accuracy of a logistic regression trained on
the synthetic table and tested on held-out real rows.  Means over seeds.

Peers (``--methods mst aim``, bench/peers.py, after ``pip install -r requirements-bench.txt``):
private-pgm's MST and AIM on the same integer codes, group columns as ordinary
attributes, AIM with ``--aim-cap`` seconds of selection rounds.

Datasets:
* demo: the bundled ACS excerpts (national 2018+2019), public MA+TX file, groups
  PUMA × YEAR, delta 1e-10, target OWN_RENT;
* adult: ../shared/data/adult_privatepgm, 14 integer-coded columns (domain from its
  json), no groups, no public file, delta 1e-9, target income>50K;
* ct_drug_deaths: ../shared/data/ct_drug_deaths (DPSyn's preprocessed file, ID
  dropped), groups Date (year), delta 1e-9, target Fentanyl.  Its category sets are
  taken from the file itself (the benchmark convention of private-pgm's domain files;
  a real release would take them from a data dictionary), Age in [0, 100].
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dataloader.encoding import Encoder  # noqa: E402
from dataloader.io import read_table, validate  # noqa: E402
from dataloader.schema import Schema, load_schema, parse_schema  # noqa: E402
from lib.evaluation import EvaluationOptions, Evaluator  # noqa: E402
from lib.privacy import Ledger  # noqa: E402
from method import METHODS  # noqa: E402
from method.context import MethodOptions, RunContext  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
VARIANTS = {"histogram": ("histogram", "all"), "dpsyn": ("dpsyn", "all"), "dpsyn-select": ("dpsyn", "select")}
PEERS = ("mst", "aim")  # bench/peers.py; needs requirements-bench.txt


@dataclass
class Dataset:
    name: str
    schema: Schema
    real: pd.DataFrame  # text, as the score command reads it
    codes: np.ndarray
    public: np.ndarray | None
    encoder: Encoder
    groups: tuple[str, ...]
    delta: float
    target: str | None


def demo() -> Dataset:
    schema = load_schema(ROOT / "parameters.json")
    public = validate(read_table(ROOT / "data/demo/public.csv", schema, "public", allow_extra=True), schema,
                      "public", public=True)
    text = read_table(ROOT / "data/demo/private.csv", schema, "private")
    typed = validate(text, schema, "private", on_invalid="drop")
    encoder = Encoder.fit(schema, public)
    return Dataset("demo", schema, text, encoder.encode(typed), encoder.encode(public), encoder, ("PUMA", "YEAR"),
                   1e-10, "OWN_RENT")


def adult() -> Dataset:
    folder = SHARED / "adult_privatepgm"
    domain = json.loads((folder / "adult-domain.json").read_text())
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10 ** 6}],
                           "schema": {c: {"dtype": "int", "values": list(range(k))} for c, k in domain.items()}})
    text = pd.read_csv(folder / "adult.csv", dtype=str)[list(domain)]
    encoder = Encoder.fit(schema)
    return Dataset("adult", schema, text, encoder.encode(validate(text, schema, "adult")), None, encoder, (), 1e-9,
                   "income>50K")


def ct_drug_deaths() -> Dataset:
    text = pd.read_csv(SHARED / "ct_drug_deaths" / "accidential_drug_deaths_dpsyn_preprocessed.csv", dtype=str,
                       keep_default_na=False).drop(columns="ID")
    text = text.replace("", "NA")
    entries = {c: {"dtype": "str", "values": sorted(text[c].unique())} for c in text.columns if c != "Age"}
    entries["Age"] = {"dtype": "int", "min": 0, "max": 100}
    schema = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-9, "max_records": 10 ** 5}],
                           "schema": {c: entries[c] for c in text.columns}})
    encoder = Encoder.fit(schema)
    return Dataset("ct_drug_deaths", schema, text, encoder.encode(validate(text, schema, "ct")), None, encoder,
                   ("Date",), 1e-9, "Fentanyl")


DATASETS = {"demo": demo, "adult": adult, "ct_drug_deaths": ct_drug_deaths}
_DATA: Dataset | None = None  # the dataset of the current batch, inherited by forked runs


def _one_run(args) -> tuple[np.ndarray, float, float]:
    variant, eps, seed, aim_cap = args
    data = _DATA
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    if variant == "mst":
        from bench import peers
        codes = peers.mst(data.codes, data.encoder.sizes, data.encoder.names, eps, data.delta, rng)
    elif variant == "aim":
        from bench import peers
        codes = peers.aim(data.codes, data.encoder.sizes, data.encoder.names, eps, data.delta, rng, aim_cap)
    else:
        method, marginals = VARIANTS[variant]
        ctx = RunContext(data.encoder, MethodOptions(method, data.groups, marginals=marginals), 1, 10 ** 7,
                         Ledger(eps, data.delta), rng, data.public)
        codes = METHODS[method](data.codes, ctx)
    seconds = time.perf_counter() - start
    return codes, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    global _DATA
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", choices=list(VARIANTS) + list(PEERS), default=list(VARIANTS),
                        help="our methods (default) and the peers mst, aim (requirements-bench.txt)")
    parser.add_argument("--aim-cap", type=float, default=60.0,
                        help="AIM's time cap in seconds: then one last round spends the rest of the budget")
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "run_bench.md")
    args = parser.parse_args()
    lines = ["| dataset | method | eps | Sprint-2 score | TVD 1-way | TVD 2-way | TVD 3-way | accuracy (synthetic-"
             "trained; real-trained) | wall s | peak MB |", "|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    ctx = multiprocessing.get_context("fork")
    for name in args.datasets:
        _DATA = DATASETS[name]()
        evaluator = Evaluator(_DATA.schema, _DATA.real,
                              EvaluationOptions(group_columns=_DATA.groups, target=_DATA.target))
        for variant in args.methods:
            for eps in args.eps:
                rows = []
                for seed in range(args.seeds):
                    with ctx.Pool(1) as pool:
                        codes, seconds, peak = pool.apply(_one_run, ((variant, eps, seed, args.aim_cap),))
                    table = _DATA.encoder.decode(codes, np.random.default_rng(seed))
                    run = next(iter(evaluator.evaluate(table)["runs"].values()))
                    u = run.get("utility", {})
                    rows.append([run.get("sprint2_score", np.nan)] + [run["tvd"][k]["mean"] for k in
                                                                      ("1-way", "2-way", "3-way")]
                                + [u.get("trained_on_synthetic", {}).get("accuracy", np.nan),
                                   u.get("trained_on_real", {}).get("accuracy", np.nan), seconds, peak])
                m = np.mean(rows, axis=0)
                line = (f"| {name} | {variant} | {eps:g} | {m[0]:.1f} | {m[1]:.4f} | {m[2]:.4f} | {m[3]:.4f} | "
                        f"{m[4]:.3f}; {m[5]:.3f} | {m[6]:.1f} | {m[7]:.0f} |")
                lines.append(line)
                print(line, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
