"""Scale: releases of Sprint-2-shaped Parquet tables of many rows, per engine; wall, peak memory, stage times.

    python bench/bench_scale.py [--rows 1000000 5000000] [--engines local dask] [--jobs 2] [--eps 0.1 1 10]
                                [--max-local-rows 20000000]

Writes (once, cached in bench/out/) each private table as Parquet with the seeded generator, a million rows
at a time (individual ids made unique across chunks), and one public table of 200,000 other simulated
people; then runs the ``dpsyn`` command on the Sprint-2 parameters (θ = 7 per sim_individual_id, YEAR
distinct per individual, the runs of ``--eps``, groups PUMA × YEAR) for every engine and prints a markdown
table: wall seconds, the peak resident memory of the largest single process (the release or one Dask worker), and reading, measuring and sampling seconds.
Tables of more than ``--max-local-rows`` rows run on the Dask engine only (past one process's memory).
Rows run in the order given (the largest first fails soonest) and are tabled in increasing order.
The table replaces the "## Scale" section of bench/RESULTS.md (``--no-write`` to print only);
``bench/results.py`` keeps that section when it regenerates the rest.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench import sections  # noqa: E402
from tests.sprint2_generator import SPRINT2_PARAMS, generate  # noqa: E402

CHUNK = 1_000_000
PUBLIC_ROWS = 200_000
SECTION = "## Scale"
STAGES = ("reading", "measuring", "sampling")


def private_table(rows: int) -> Path:
    """bench/out/scale_private_{rows}.parquet, written a chunk at a time."""
    path = HERE / "out" / f"scale_private_{rows}.parquet"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    writer = None
    for k, start in enumerate(range(0, rows, CHUNK)):
        chunk = generate(min(CHUNK, rows - start), seed=1000 + k)
        chunk["sim_individual_id"] = f"{k}-" + chunk["sim_individual_id"].astype(str)
        table = pa.Table.from_pandas(chunk, preserve_index=False)
        writer = writer or pq.ParquetWriter(partial, table.schema)
        writer.write_table(table)
    writer.close()
    partial.rename(path)
    return path


def public_table() -> Path:
    path = HERE / "out" / f"scale_public_{PUBLIC_ROWS}.csv"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate(PUBLIC_ROWS, seed=2).drop(columns="sim_individual_id").to_csv(path, index=False)
    return path


def parameters(eps: list[float]) -> Path:
    params = json.loads(SPRINT2_PARAMS.read_text())
    params["runs"] = [run for run in params["runs"] if run["epsilon"] in eps]
    params["distinct_per_individual"] = ["YEAR"]  # Sprint 2's task shape: one row per person per year
    path = HERE / "out" / f"scale_params_{'_'.join(f'{e:g}' for e in eps)}.json"
    path.write_text(json.dumps(params))
    return path


def release(rows: int, engine: str, jobs: int, eps: list[float]) -> dict:
    """One release in a child process: its wall seconds, peak memory of its largest process, stage seconds."""
    cmd = [sys.executable, str(ROOT / "main.py"), "--params", str(parameters(eps)), "--private",
           str(private_table(rows)), "--public", str(public_table()), "--output",
           str(HERE / "out" / f"scale_{rows}_{engine}" / "submission.csv"), "--on-invalid", "clip",
           "--engine", engine, "--jobs", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", MEASURED, *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    seconds = dict.fromkeys(STAGES, 0.0)
    for stage, value in re.findall(r"\b(" + "|".join(STAGES) + r")(?: and encoding)? ([0-9.]+)s", proc.stderr):
        seconds[stage] += float(value)
    return {"wall": wall, "peak_gb": int(proc.stdout.split()[-1]) / 1024 ** 2, **seconds}


# runs the command given and prints the peak resident KiB of its largest process (itself or a descendant)
MEASURED = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(code)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--engines", nargs="+", default=["local", "dask"], choices=["local", "dask"])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--max-local-rows", type=int, default=20_000_000,
                        help="larger tables run on the Dask engine only")
    parser.add_argument("--no-write", action="store_true", help="print the table; leave bench/RESULTS.md alone")
    args = parser.parse_args()
    done = []
    for rows in args.rows:
        for engine in [e for e in args.engines if e == "dask" or rows <= args.max_local_rows]:
            r = release(rows, engine, args.jobs, args.eps)
            done.append((rows, args.engines.index(engine), f"| {rows:,} | {engine} | {args.jobs} | {r['wall']:.0f} | "
                         f"{r['peak_gb']:.2f} | " + " | ".join(f"{r[s]:.0f}" for s in STAGES) + " |"))
            print(done[-1][-1], flush=True)
    lines = ["| rows | engine | jobs | wall s | peak GB (one process) | " + " | ".join(f"{s} s" for s in STAGES) + " |",
             "|" + "---|" * (5 + len(STAGES)), *(line for _, _, line in sorted(done))]
    eps = ", ".join(f"{e:g}" for e in args.eps)
    text = "\n".join([
        SECTION, "",
        f"`python bench/bench_scale.py --rows {' '.join(map(str, args.rows))} --engines {' '.join(args.engines)} "
        f"--jobs {args.jobs} --eps {' '.join(f'{e:g}' for e in args.eps)} --max-local-rows {args.max_local_rows}`: "
        f"Sprint-2-shaped Parquet tables from the seeded generator (θ = 7, YEAR distinct per individual as in Sprint 2, groups PUMA × YEAR, public file of "
        f"{PUBLIC_ROWS:,} rows), the runs at ε = {eps} in one release; tables of more than "
        f"{args.max_local_rows:,} rows on the Dask engine only. Peak memory is the largest single process's (the "
        "release, or one Dask worker); stage seconds are summed over the runs, reading being the public file's "
        "preparation and the private file's reading and encoding.", "", *lines, ""])
    if args.no_write:
        print(text)
        return
    results = HERE / "RESULTS.md"
    results.write_text(sections.replaced(results.read_text(), SECTION, text))
    print(results)


if __name__ == "__main__":
    main()
