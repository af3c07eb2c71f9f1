"""How well noisy moments alone pin down correlations (bench/RESULTS.md "Reweighting toward noisy moments").

``--reweight moments:*`` measures, for p numeric columns scaled to [0, 1] by their public range
(nulls as 0), the count, the p sums and the p(p+1)/2 sums of products: K = 1 + p + p(p+1)/2
coordinates at sensitivity theta·sqrt(K) (lib/privacy/queries.py, Moments).  This script adds that
Gaussian noise to the exact sums at a share of the run's rho and computes the correlation matrix
from the noisy sums directly, with no synthesizer: the mean |error| over column pairs (mean of 200
draws) against the same correlations from the exact sums.  It is the noise alone; a reweighting
that moves the synthetic records to these answers cannot recover correlations more precisely than
the answers themselves carry them.

    python bench/moment_floor.py [--datasets adult_raw demo] [--eps 1 10] [--shares 0.1 0.3 1]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run_bench import DATASETS  # noqa: E402
from dpsyn.dataloader.schema import NUMERIC, parse_schema  # noqa: E402
from dpsyn.lib.privacy.accounting import gaussian_sigma, rho_from_eps_delta  # noqa: E402
from dpsyn.lib.privacy.queries import Moments  # noqa: E402
from dpsyn.lib.privacy.unit import PrivacyUnit  # noqa: E402

DRAWS = 200


def _correlations(sums: np.ndarray, p: int) -> np.ndarray:
    """Upper-triangle correlations from one Moments answer (count, p sums, sums of products i <= j)."""
    mean = sums[1:1 + p] / sums[0]
    products = np.zeros((p, p))
    products[np.triu_indices(p)] = sums[1 + p:]
    products = np.triu(products) + np.triu(products, 1).T
    cov = products / sums[0] - np.outer(mean, mean)
    sd = np.sqrt(np.clip(np.diag(cov), 1e-12, None))
    return np.clip(cov / np.outer(sd, sd), -1, 1)[np.triu_indices(p, 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=["adult_raw", "demo"])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| dataset | numeric columns | rows | eps | share of rho | noise sd / rows | correlation error |\n"
          "|---|---|---|---|---|---|---|")
    for name in args.datasets:
        data = DATASETS[name]()
        schema = parse_schema(data.params(1.0))
        columns = [c for c in schema.columns if c.kind == NUMERIC]
        x = np.column_stack([((data.real[c.name].replace(c.null, np.nan) if c.null else data.real[c.name])
                              .astype(float).to_numpy() - c.low) / (c.high - c.low) for c in columns])
        query = Moments(tuple(c.name for c in columns))
        exact = query.row_values(x).sum(axis=0)  # the query's answer on the whole table (nulls as 0)
        n, p = x.shape
        truth = _correlations(exact, p)
        for eps in args.eps:
            rho = rho_from_eps_delta(eps, data.delta)
            for share in args.shares:
                sigma = gaussian_sigma(query.sensitivity(PrivacyUnit(data.theta)).l2, share * rho)
                errors = [np.abs(_correlations(exact + rng.normal(0, sigma, exact.size), p) - truth).mean()
                          for _ in range(DRAWS)]
                print(f"| {name} | {p} | {n} | {eps:g} | {share:g} | {sigma / n:.2e} | {np.mean(errors):.4f} |",
                      flush=True)


if __name__ == "__main__":
    main()
