"""Time ``main.py score`` on one epsilon of a 1,000,000-row Sprint-2-shaped table against another.

    python bench/bench_score.py [--rows 1000000]

Real: the seeded generator's private table (bench/bench_release.py caches it in bench/out/).
Synthetic: another draw of the generator (seed 3) of the same size, written as a one-epsilon
submission.  Prints one markdown row: wall seconds and peak memory of the score process.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench.bench_release import ensure_tables, run_timed  # noqa: E402
from tests.sprint2_generator import SPRINT2_PARAMS, generate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    real, _ = ensure_tables(args.rows)
    synthetic = HERE / "out" / f"sprint2_synthetic_{args.rows}.csv"
    if not synthetic.exists():
        table = generate(args.rows, seed=3).drop(columns="sim_individual_id")
        table.insert(0, "epsilon", 1.0)
        table.to_csv(synthetic, index=False)
    cmd = [sys.executable, str(ROOT / "main.py"), "score", "--params", str(SPRINT2_PARAMS), "--real", str(real),
           "--synthetic", str(synthetic), "--json-out", str(HERE / "out" / "score.json")]
    proc, wall, peak_gb = run_timed(cmd)
    print(proc.stderr.strip())
    print("| rows (real, synthetic) | wall s | peak GB |\n|---|---|---|")
    print(f"| {args.rows:,}, {args.rows:,} | {wall:.1f} | {peak_gb:.2f} |")


if __name__ == "__main__":
    main()
