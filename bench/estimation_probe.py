"""dpsyn's records against a graphical model fitted to the same released measurements.

Each seed runs one dpsyn release through the API and keeps what it released (``RunRelease.measurements``:
every noisy marginal with its noise sd).  private-pgm's estimator (mbi's mirror descent, as AIM and MST
use it; bench/peers.py) is then fitted to those marginals, its synthetic records are drawn (as many as
dpsyn released) and decoded as the peers' are, and both tables are scored with the bench's scorer.
Marginals read coarsely (split columns, method/split_columns.py) enter as the matrix that sums the
exact cells into coarse ones; measurements over columns the encoder does not have (a declared
group-level value's refinement) and the noisy row count are left out.  The estimate is post-processing
of released values only: it says how much a max-entropy estimation step would gain over consistency
and GUM on the same measurements, not what a release does.  Needs requirements-bench.txt (mbi, jax);
the estimation takes seconds on ct_drug_deaths at eps 1 (a junction tree under 1 MB), and a seed whose
measured marginals make a tree over MAX_MODEL_MB is reported with dpsyn's row alone (adult at eps 1: 244 MB,
over 15 minutes a seed on 2 cores when fitted anyway; ct_drug_deaths at eps 10: petabytes).  dpsyn's rows
repeat exactly; the graphical model's move a little from run to run (mbi's fit is not bit-reproducible,
though its draw is seeded).

    python bench/estimation_probe.py [--dataset ct_drug_deaths] [--eps 1] [--seeds 3] [--first-seed 0]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsyn.api import release  # noqa: E402
from bench import peers  # noqa: E402
from bench.run_bench import DATASETS  # noqa: E402
from dpsyn.dataloader.schema import parse_schema  # noqa: E402
from dpsyn.evaluation.scoring import EvaluationOptions, Evaluator  # noqa: E402
from dpsyn.lib.records.marginals import coarse_matrix  # noqa: E402
from dpsyn.lib.privacy.private_table import Measurement  # noqa: E402
from dpsyn.lib.privacy.queries import Marginal  # noqa: E402

ITERATIONS = 2000  # mirror-descent steps (AIM's final fit takes 3000 from a warm start)
MAX_MODEL_MB = peers.AIM_MAX_MODEL_MB  # a larger junction tree is not fitted (AIM's own limit)


@dataclasses.dataclass(frozen=True, eq=False)
class CoarseQuery:
    """A marginal read coarsely, as mbi's measurement query: ``matrix`` sums the exact cells into coarse ones."""

    matrix: np.ndarray
    use_for_total_estimation: bool = True

    def __call__(self, factor):
        import jax.numpy as jnp
        return jnp.asarray(self.matrix) @ factor.datavector()

    def op_norm_sq(self) -> float:
        return float(self.matrix.sum(axis=1).max())  # the largest block: each column of the matrix has one 1


def measurements_for_pgm(mbi, released, names: list[str], sizes: list[int]) -> list:
    """mbi measurements for every released marginal over the encoder's columns (the others are left out)."""
    out = []
    for m in released:
        if not isinstance(m, Measurement) or not isinstance(m.query, Marginal):
            continue
        query = m.query
        if not query.attrs or not set(query.attrs) <= set(names):
            continue
        widths = query.column_widths()
        extra = {} if max(widths) == 1 else \
            {"query": CoarseQuery(coarse_matrix([sizes[names.index(a)] for a in query.attrs], widths))}
        out.append(mbi.LinearMeasurement(np.asarray(m.noisy, dtype=np.float64).ravel(), tuple(query.attrs),
                                         float(m.sigma), **extra))
    return out


def probe(data, encoder, evaluator: Evaluator, eps: float, seed: int) -> dict[str, dict]:
    """Scores of dpsyn's table and of the graphical model's, from one release's measurements (``encoder``: the
    codes a release uses, as the peers get them; ``evaluator``: the bench's scorer on the real table)."""
    mbi = peers._mbi()
    names, sizes = list(encoder.names), [int(s) for s in encoder.sizes]
    (run,) = release(data.private, data.params(eps), data.public, "dpsyn", {}, seed=seed,
                     group_columns=data.groups, on_invalid=data.on_invalid, id_column=data.id_column)
    measured = measurements_for_pgm(mbi, run.measurements, names, sizes)
    domain = mbi.Domain(names, sizes)
    size_mb = peers._model_mb(mbi, domain, [m.clique for m in measured])
    tables = [("dpsyn", run.table)]
    if size_mb <= MAX_MODEL_MB:
        model = mbi.estimation.MirrorDescent().estimate(domain, measured, iters=ITERATIONS)
        np.random.seed(seed)  # mbi draws its records from numpy's global generator
        drawn = peers._to_codes(model.synthetic_data(len(run.table)), names)
        tables.append(("graphical model", encoder.decode(drawn, np.random.default_rng(seed))))
    else:
        print(f"seed {seed}: the junction tree of the {len(measured)} measured marginals would take "
              f"{size_mb:.3g} MB; not fitted", file=sys.stderr)
    out = {}
    for label, table in tables:
        scores = next(iter(evaluator.evaluate(table)["runs"].values()))
        trained = scores.get("utility", {}).get("trained_on_synthetic", {})
        out[label] = {"score": scores.get("sprint2_score", np.nan), "tvd2": scores["tvd"]["2-way"]["mean"],
                      "tvd3": scores["tvd"]["3-way"]["mean"], "accuracy": trained.get("accuracy", np.nan),
                      "macro_f1": trained.get("macro_f1", np.nan), "measurements": len(measured)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ct_drug_deaths", choices=sorted(DATASETS))
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    data = DATASETS[args.dataset]()
    _, encoder = data.codes(np.random.default_rng(0))
    evaluator = Evaluator(parse_schema(data.params(1.0)), data.real,
                          EvaluationOptions(group_columns=data.groups, target=data.target))
    rows = {"dpsyn": [], "graphical model": []}
    print("| seed | estimate | measurements | Sprint-2 score | TVD 2-way | TVD 3-way | accuracy | macro F1 |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for label, r in probe(data, encoder, evaluator, args.eps, seed).items():  # dpsyn alone where the tree is too large
            rows[label].append([r["score"], r["tvd2"], r["tvd3"], r["accuracy"], r["macro_f1"]])
            print(f"| {seed} | {label} | {r['measurements']} | {r['score']:.1f} | {r['tvd2']:.4f} | {r['tvd3']:.4f} | "
                  f"{r['accuracy']:.3f} | {r['macro_f1']:.3f} |", flush=True)
    for label, values in rows.items():
        if not values:
            continue
        m = np.mean(values, axis=0)
        print(f"| mean | {label} | | {m[0]:.1f} | {m[1]:.4f} | {m[2]:.4f} | {m[3]:.3f} | {m[4]:.3f} |")


if __name__ == "__main__":
    main()
