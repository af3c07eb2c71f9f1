"""RAP++'s projection on the CPU (numpy) and the GPU (cupy): agreement and speed (bench/RESULTS.md "RAP++").

For each relaxed-table size n: one starting table and noise-free targets from a second table (both
random, seeded, shaped like raw Adult: nine categorical columns of Adult's sizes, the label among them,
and six numeric columns, two of them nullable), the same queries as rap measures (every 1-way
marginal, 2-way marginals with the label, numeric interval counts alone, per label and along random
directions).  The same float32 start is projected once per device (lib/estimation/relaxed.project, rap's
defaults); the table gives the largest difference between the two devices' answers after the
projection, the final losses, and the seconds each took (after one untimed warm-up projection per
device, which compiles cupy's kernels).

    python bench/rap_devices.py [--rows 2000 20000 100000] [--devices cpu gpu]

Whole releases on either device: ``bench/run_bench.py --methods rap --rap-device gpu``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsyn.lib.estimation.measurement import Target  # noqa: E402
from dpsyn.lib.estimation import relaxed  # noqa: E402

SIZES = (9, 16, 7, 15, 6, 5, 2, 42, 2)  # Adult's categorical columns; the last is the label
NUMERIC, NULLABLE = 6, (False, False, False, False, True, True)


def _table(xp, n: int, seed: int) -> relaxed.RelaxedTable:
    rng = np.random.default_rng(seed)
    cats = [rng.dirichlet(np.ones(k), n) for k in SIZES]
    return relaxed.new_table(xp, cats, rng.random((n, NUMERIC)), rng.random((n, NUMERIC)) * 0.2, NULLABLE)


def _queries(seed: int = 0) -> list[relaxed.RelaxedQuery]:
    rng = np.random.default_rng(seed)
    label = len(SIZES) - 1
    cuts = tuple(np.linspace(0, 1, 17)[1:-1])
    out = [relaxed.RelaxedQuery((i,)) for i in range(len(SIZES))]
    out += [relaxed.RelaxedQuery((i, label)) for i in range(label)]
    out += [relaxed.RelaxedQuery((), (j,), (1.0,), cuts) for j in range(NUMERIC)]
    out += [relaxed.RelaxedQuery((label,), (j,), (1.0,), cuts) for j in range(NUMERIC)]
    for _ in range(8):
        w = rng.normal(size=NUMERIC)
        w /= np.linalg.norm(w)
        span = np.linspace(w.clip(None, 0).sum(), w.clip(0).sum(), 18)[1:-1]
        out.append(relaxed.RelaxedQuery((label,), tuple(range(NUMERIC)), tuple(w), tuple(span)))
    return out


def _project(xp, n: int, queries: list) -> tuple[np.ndarray, float, float]:
    """Answers after one projection of the seeded start toward the seeded goal, its loss and seconds."""
    goal = _table(np, n, seed=2)
    fits = [Target(q, a.astype(np.float64), weight=1.0) for q, a in zip(queries, relaxed.answers(goal, queries, 1024.0))]
    table = _table(xp, n, seed=1)
    start = time.perf_counter()
    stats = relaxed.project(table, fits)
    if xp is not np:
        xp.cuda.Device().synchronize()
    seconds = time.perf_counter() - start
    return np.concatenate([a.ravel() for a in relaxed.answers(table, queries, 1024.0)]), stats["loss"], seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 20000, 100000])
    parser.add_argument("--devices", nargs="+", choices=relaxed.DEVICES, default=list(relaxed.DEVICES))
    args = parser.parse_args()
    modules = {d: relaxed.array_module(d) for d in args.devices}
    queries = _queries()
    for xp in modules.values():
        _project(xp, 200, queries)  # warm-up: cupy compiles its kernels on first use
    header = " | ".join(f"{d} loss | {d} s" for d in args.devices)
    print(f"| rows | {header} | largest answer difference |\n|---|" + "---|" * (2 * len(args.devices) + 1))
    for n in args.rows:
        results = {d: _project(xp, n, queries) for d, xp in modules.items()}
        cells = " | ".join(f"{r[1]:.3g} | {r[2]:.1f}" for r in results.values())
        answers = [r[0] for r in results.values()]
        gap = np.abs(answers[0] - answers[-1]).max() if len(answers) > 1 else 0.0
        print(f"| {n} | {cells} | {gap:.2g} |", flush=True)


if __name__ == "__main__":
    main()
