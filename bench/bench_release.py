"""Time a full release on a Sprint-2-shaped table: wall time, peak memory, time per stage.

    python bench/bench_release.py [--rows 1000000] [--method histogram] [--jobs 1]

Generates (once, cached in bench/out/) a private table with the seeded generator
(sim_individual_id, up to 7 rows per person) and a public table of other simulated
people (no ids) that supplies the ranges of the Sprint-2 columns without one; then
runs ``main.py`` on the Sprint-2 parameters (all three runs) and prints one
markdown table row.  Numbers, not opinions: copy the row into bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from tests.sprint2_generator import SPRINT2_PARAMS, generate  # noqa: E402

STAGES = ("reading", "encoding", "bounding", "measuring", "consistency", "sampling", "decoding", "writing")


def ensure_tables(rows: int) -> tuple[Path, Path]:
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    private, public = out / f"sprint2_private_{rows}.csv", out / f"sprint2_public_{rows // 5}.csv"
    if not private.exists():
        generate(rows, seed=1).to_csv(private, index=False)
    if not public.exists():
        generate(rows // 5, seed=2).drop(columns="sim_individual_id").to_csv(public, index=False)
    return private, public


def run_timed(cmd: list[str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run ``cmd`` (exit with its stderr if it fails); its result, wall seconds and peak resident GB."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    return proc, wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 ** 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--method", default="histogram")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()
    private, public = ensure_tables(args.rows)
    output = HERE / "out" / "bench_submission.csv"
    cmd = [sys.executable, str(ROOT / "main.py"), "--params", str(SPRINT2_PARAMS), "--private", str(private),
           "--public", str(public), "--output", str(output), "--method", args.method, "--jobs", str(args.jobs),
           "--on-invalid", "clip"]
    proc, wall, peak_gb = run_timed(cmd)
    seconds = dict.fromkeys(STAGES, 0.0)
    for stage, value in re.findall(r"\b(" + "|".join(STAGES) + r") ([0-9.]+)s", proc.stderr):
        seconds[stage] += float(value)
    rows_written = sum(int(n) for n in re.findall(r"(\d+) rows;", proc.stderr))
    print("| rows | method | jobs | wall s | peak GB | " + " | ".join(f"{s} s" for s in STAGES) + " | rows written |")
    print("|" + "---|" * (6 + len(STAGES)))
    print(f"| {args.rows:,} | {args.method} | {args.jobs} | {wall:.1f} | {peak_gb:.2f} | "
          + " | ".join(f"{seconds[s]:.1f}" for s in STAGES) + f" | {rows_written:,} |")


if __name__ == "__main__":
    main()
