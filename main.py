"""Differentially private synthetic data release: the single entry point.

    python main.py --params parameters.json --private private.csv [--public public.csv] --output out.csv
    python main.py validate --params parameters.json --submission out.csv

Synthesis is the default command; see ``python main.py --help``.
"""
from __future__ import annotations

import argparse
import csv
import logging
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from dataloader.encoding import DEFAULT_BINS, Encoder
from dataloader.io import ON_INVALID, DataError, public_ranges, read_table, validate
from dataloader.schema import Schema, SchemaError, load_schema
from dataloader.submission import check_submission
from lib.privacy import BudgetExceeded
from method import METHODS
from method.planner import REGIMES
from method.context import MethodOptions
from method.release import PrivateData, release

log = logging.getLogger("dpsyn")

DEFAULT_ID_COLUMN = "sim_individual_id"
DEFAULT_GROUP_COLUMNS = ("PUMA", "YEAR")
COMMANDS = ("synthesize", "validate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="Release a differentially private synthetic copy of a table. The default command, "
                    "'synthesize', reads a parameters file (privacy budgets + schema) and a private CSV, "
                    "and writes one submission CSV holding every run plus one privacy-ledger JSON per run.",
        epilog="Example: python main.py --params parameters.json --private data/demo/private.csv "
               "--public data/demo/public.csv --output output/submission.csv",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="{synthesize,validate}")

    syn = sub.add_parser("synthesize", help="write a DP synthetic table (default command)",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    syn.add_argument("--params", required=True, type=Path,
                     help="parameters JSON (NIST Sprint-2 format): runs (epsilon, delta, max_records, "
                          "max_records_per_individual) and schema")
    syn.add_argument("--private", required=True, type=Path, help="private CSV with every schema column")
    syn.add_argument("--public", type=Path,
                     help="optional public CSV with the same columns (no budget spent on it): gives ranges of "
                          "numeric columns the schema leaves open, and quantile bin edges")
    syn.add_argument("--output", type=Path, default=Path("output/submission.csv"),
                     help="submission CSV to write; ledgers go beside it as NAME.ledger.epsE.json")
    syn.add_argument("--method", choices=sorted(METHODS), default="dpsyn",
                     help="synthesis strategy: dpsyn (planned noisy marginals + GUM) or histogram (baseline)")
    syn.add_argument("--regime", choices=REGIMES, default=None,
                     help="dpsyn: force the planner's regime (for experiments); default: chosen from the budget")
    syn.add_argument("--group-floor", type=int, default=0,
                     help="dpsyn: raise every positive noisy group size to at least this many rows")
    syn.add_argument("--group-round", type=int, default=1,
                     help="dpsyn: round noisy group sizes to a multiple of this (the write-up's K)")
    syn.add_argument("--group-columns", default=None,
                     help="comma-separated columns to synthesize per group (noisy counts per group); "
                          "'none' for no groups; default: PUMA,YEAR where the schema has them")
    syn.add_argument("--id-column", default=None,
                     help=f"column identifying individuals; each keeps at most max_records_per_individual rows; "
                          f"default: {DEFAULT_ID_COLUMN} when the private file has it")
    syn.add_argument("--seed", type=int, default=None,
                     help="fix all randomness (for tests only: seeded noise is NOT private)")
    syn.add_argument("--jobs", type=int, default=1, help="worker processes")
    syn.add_argument("--on-invalid", choices=ON_INVALID, default="error",
                     help="what to do with values outside the schema: stop, clip numbers (dropping rows that "
                          "cannot be clipped), or drop the rows")
    syn.add_argument("--bins", type=int, default=DEFAULT_BINS,
                     help="bins for numeric columns whose schema entry gives none")
    syn.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")

    val = sub.add_parser("validate", help="check a submission CSV against a parameters file")
    val.add_argument("--params", required=True, type=Path, help="parameters JSON")
    val.add_argument("--submission", required=True, type=Path, help="submission CSV to check")
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    if not argv or argv[0] not in COMMANDS + ("-h", "--help"):
        argv = ["synthesize"] + list(argv)
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING if getattr(args, "quiet", False) else logging.INFO,
                        format="%(message)s", stream=sys.stderr, force=True)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        if args.command == "validate":
            return validate_command(args)
        return synthesize_command(args)
    except SchemaError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
    except (DataError, BudgetExceeded, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("error: interrupted; no output written", file=sys.stderr)
        return 130
    return 2


def _exit_on_signal(signum, frame):
    raise KeyboardInterrupt


def validate_command(args) -> int:
    schema = load_schema(args.params)
    problems = check_submission(schema, args.submission)
    for problem in problems:
        print(f"invalid: {problem}", file=sys.stderr)
    if not problems:
        print(f"ok: {args.submission} is a valid submission for {args.params}", file=sys.stderr)
    return 1 if problems else 0


def synthesize_command(args) -> int:
    started = time.perf_counter()
    schema = load_schema(args.params)
    _check_options(args, schema)
    group_columns = _group_columns(args.group_columns, schema)
    output = _prepare_output(args.output)
    if args.seed is not None:
        log.warning("WARNING: --seed %d fixes the noise: use it for tests only, never for a release "
                    "(seeded noise is not private)", args.seed)
        seed_seq = np.random.SeedSequence(args.seed)
    else:
        seed_seq = np.random.SeedSequence()  # fresh OS entropy

    timings = {}
    start = time.perf_counter()
    public = None
    if args.public:
        public = validate(read_table(args.public, schema, "public file", allow_extra=True), schema,
                          "public file", public=True)
        schema = schema.with_public_ranges(public_ranges(public, schema))
    schema.require_ranges()
    id_column = args.id_column or (DEFAULT_ID_COLUMN if DEFAULT_ID_COLUMN in _header(args.private) else None)
    private = validate(read_table(args.private, schema, "private file", id_column=id_column),
                       schema, "private file", on_invalid=args.on_invalid)
    timings["reading"] = time.perf_counter() - start

    start = time.perf_counter()
    encoder = Encoder.fit(schema, public, default_bins=args.bins)
    data = PrivateData(encoder.encode(private), private[id_column].to_numpy() if id_column else None,
                       encoder.encode(public) if public is not None else None)
    del private
    timings["encoding"] = time.perf_counter() - start
    _log_plan(schema, encoder, group_columns, id_column, args.method)

    options = MethodOptions(args.method, group_columns, args.jobs, args.regime, args.group_floor, args.group_round)
    paths = release(schema, encoder, data, options, seed_seq, output, id_column)
    log.info("reading %.2fs, encoding %.2fs; total %.1fs", timings["reading"], timings["encoding"],
             time.perf_counter() - started)
    for path in paths:
        print(path)
    return 0


def _check_options(args, schema: Schema) -> None:
    problems = []
    if args.jobs < 1:
        problems.append(f"--jobs must be >= 1, got {args.jobs}")
    if args.bins < 1:
        problems.append(f"--bins must be >= 1, got {args.bins}")
    if args.group_floor < 0:
        problems.append(f"--group-floor must be >= 0, got {args.group_floor}")
    if args.group_round < 1:
        problems.append(f"--group-round must be >= 1, got {args.group_round}")
    if args.id_column is not None and args.id_column in schema.names:
        problems.append(f"--id-column {args.id_column} is a schema column; the id column must not be synthesized")
    if problems:
        raise SchemaError(problems)


def _group_columns(option: str | None, schema: Schema) -> tuple[str, ...]:
    if option is None:
        return tuple(c for c in DEFAULT_GROUP_COLUMNS if c in schema.names)
    if option.strip().lower() in ("", "none"):
        return ()
    names = tuple(c.strip() for c in option.split(",") if c.strip())
    unknown = [c for c in names if c not in schema.names]
    if unknown:
        raise SchemaError([f"--group-columns: {c} is not a schema column" for c in unknown])
    if len(set(names)) != len(names):
        raise SchemaError(["--group-columns: a column is named twice"])
    return names


def _prepare_output(output: Path) -> Path:
    """Create the output folder if needed and check it is writable, before any private data is read."""
    folder = output.parent if str(output.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot create output folder {folder}: {exc.strerror or exc}") from None
    if output.is_dir():
        raise DataError(f"output {output} is a folder; give a CSV file path")
    if not os.access(folder, os.W_OK):
        raise DataError(f"cannot write output: folder {folder} is not writable")
    return output


def _header(path: Path) -> list[str]:
    try:
        with open(path, newline="") as f:
            return [c.strip() for c in next(csv.reader(f), [])]
    except (OSError, UnicodeDecodeError):
        return []  # read_table reports the problem with the file


def _log_plan(schema: Schema, encoder: Encoder, group_columns, id_column, method) -> None:
    log.info("schema: %d columns; encoded domain: %s", len(schema.columns),
             ", ".join(f"{c.column.name} {c.describe()}" for c in encoder.coders))
    log.info("groups: %s", " × ".join(group_columns) if group_columns else "none (one group)")
    if id_column:
        log.info("individuals: rows are grouped by %s; each keeps at most max_records_per_individual rows "
                 "(chosen at random) and the output gets fresh ids", id_column)
    else:
        log.info("individuals: no id column; each individual is taken to contribute at most "
                 "max_records_per_individual rows as the parameters declare, and noise is scaled by it")
    log.info("method: %s; runs: %s", method,
             "; ".join(f"eps={r.epsilon:g} delta={r.delta:.3g} theta={r.max_records_per_individual} "
                       f"max_records={r.max_records}" for r in schema.runs))


if __name__ == "__main__":
    sys.exit(main())
