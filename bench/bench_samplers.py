"""Speed and goodness of fit of the exact samplers (lib/privacy/samplers.py), and OpenDP's for comparison.

    python bench/bench_samplers.py [--cells 1000000]

For each scale: seconds to draw ``--cells`` discrete Gaussian samples (after one warm-up
call that compiles the kernels), the χ² goodness-of-fit p-value of those samples against
the exact distribution (tests/privacy_audit.chi_square_gof; blocks of sigma/8 integers above
sigma = 8), and the sample variance over the exact variance.  The same for the discrete
Laplace sampler.  When the optional ``opendp`` package is installed
(requirements-bench.txt), the time of its integer Gaussian / Laplace measurements on the
same vector.  Prints markdown tables.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.privacy_audit import chi_square_gof, discrete_gaussian_pmf, discrete_laplace_pmf  # noqa: E402
from dpsyn.lib.privacy.samplers import discrete_gaussian, discrete_laplace, gaussian_parameters  # noqa: E402

SIGMAS = (0.5, 3.0, 40.0, 1e4, 1e6)
LAPLACE = ((1, 2), (3, 1), (40, 1), (7, 3))


def opendp_seconds(kind: str, scale: float, cells: int) -> float | None:
    """Wall seconds of OpenDP's integer-vector Gaussian or Laplace measurement, None without opendp."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), (dp.l2_distance if kind == "gaussian" else dp.l1_distance)(T=int)
    measure = (dp.m.make_gaussian if kind == "gaussian" else dp.m.make_laplace)(*space, scale=scale)
    zeros = [0] * cells
    start = time.perf_counter()
    measure(zeros)
    return time.perf_counter() - start


def fmt(seconds: float | None) -> str:
    return "not installed" if seconds is None else f"{seconds:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=1_000_000)
    args = parser.parse_args()
    rng = np.random.default_rng(20261122)
    discrete_gaussian(gaussian_parameters(1.0), 10, rng)
    discrete_laplace(1, 1, 10, rng)
    print(f"discrete Gaussian, {args.cells:,} cells\n")
    print("| sigma | ours s | opendp s | χ² p-value | var / exact var |\n|---|---|---|---|---|")
    for sigma in SIGMAS:
        start = time.perf_counter()
        params = gaussian_parameters(sigma)
        x = discrete_gaussian(params, args.cells, rng)
        ours = time.perf_counter() - start
        support, pmf = discrete_gaussian_pmf(params.sigma)
        p = chi_square_gof(x, support, pmf, width=max(1, int(sigma // 8)))
        var = float((support.astype(float) ** 2 * pmf).sum())
        print(f"| {sigma:g} | {ours:.2f} | {fmt(opendp_seconds('gaussian', sigma, args.cells))} | {p:.3f} | "
              f"{x.var() / var:.4f} |")
    print(f"\ndiscrete Laplace, {args.cells:,} cells\n")
    print("| scale t/s | ours s | opendp s | χ² p-value | var / exact var |\n|---|---|---|---|---|")
    for t, s in LAPLACE:
        start = time.perf_counter()
        x = discrete_laplace(t, s, args.cells, rng)
        ours = time.perf_counter() - start
        support, pmf = discrete_laplace_pmf(t, s)
        var = float((support.astype(float) ** 2 * pmf).sum())
        print(f"| {t}/{s} | {ours:.2f} | {fmt(opendp_seconds('laplace', t / s, args.cells))} | "
              f"{chi_square_gof(x, support, pmf):.3f} | {x.var() / var:.4f} |")


if __name__ == "__main__":
    main()
