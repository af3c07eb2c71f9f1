"""Differentially private synthetic data release: the single entry point.

    python main.py --params parameters.json --private private.csv [--public public.csv] --output out.csv
    python main.py validate --params parameters.json --submission out.csv

Synthesis is the default command; see ``python main.py --help``.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dataloader.encoding import DEFAULT_BINS, Encoder
from dataloader.io import ON_INVALID, DataError, StagedFiles, public_ranges, read_header, read_table, validate
from dataloader.schema import NUMERIC, Schema, SchemaError, load_schema
from dataloader.submission import check_submission
from lib.evaluation import EvaluationOptions, Evaluator, format_table, read_for_evaluation
from lib.privacy import BudgetExceeded
from lib.report import write_report
from method import METHODS
from method.planner import MARGINAL_CHOICES, REGIMES
from method.context import MethodOptions
from method.release import PrivateData, release

log = logging.getLogger("dpsyn")

DEFAULT_ID_COLUMN = "sim_individual_id"
DEFAULT_GROUP_COLUMNS = ("PUMA", "YEAR")
COMMANDS = ("synthesize", "validate", "score", "report")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="main.py",
        description="Release a differentially private synthetic copy of a table. The default command, "
                    "'synthesize', reads a parameters file (privacy budgets + schema) and a private CSV, "
                    "and writes one submission CSV holding every run plus one privacy-ledger JSON per run.",
        epilog="Example: python main.py --params parameters.json --private data/demo/private.csv "
               "--public data/demo/public.csv --output output/submission.csv",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="{synthesize,validate,score,report}")

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
    syn.add_argument("--marginals", choices=MARGINAL_CHOICES, default="all",
                     help="dpsyn, one-way and two-way regimes: measure the regime's marginals (all 1-way or all "
                          "2-way), or 'select': all 1-way plus the 2-way pairs chosen from noisy dependency "
                          "scores (PrivSyn), budget per marginal ∝ cells^(2/3); the scores are charged")
    syn.add_argument("--group-floor", type=int, default=0,
                     help="dpsyn: raise every positive noisy group size to at least this many rows")
    syn.add_argument("--group-round", type=int, default=1,
                     help="dpsyn: round noisy group sizes to a multiple of this (the write-up's K); where groups "
                          "share the global targets (public and one-way regimes) groups of equal size then share "
                          "one synthesized set of records, which saves time")
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
    syn.add_argument("--show-private-counts", action="store_true",
                     help="say how many private rows had values outside the schema (exact private counts: the "
                          "log is then for the curator's eyes only); by default the log names columns and "
                          "problems but no counts")
    loudness = syn.add_mutually_exclusive_group()
    loudness.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    loudness.add_argument("--verbose", action="store_true",
                          help="debug-level log (every noisy measurement); never prints private counts")

    val = sub.add_parser("validate", help="check a submission CSV against a parameters file")
    val.add_argument("--params", required=True, type=Path, help="parameters JSON")
    val.add_argument("--submission", required=True, type=Path, help="submission CSV to check")

    score = sub.add_parser("score", help="compare a synthetic table or submission with the real table "
                                         "(not DP: do not publish the numbers)",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    score.add_argument("--real", required=True, type=Path, help="real CSV with every schema column")
    score.add_argument("--synthetic", required=True, type=Path,
                       help="synthetic CSV or submission (an 'epsilon' column splits it into runs)")
    score.add_argument("--json-out", type=Path, help="write the JSON here instead of stdout")
    _evaluation_options(score)

    rep = sub.add_parser("report", help="HTML report with plots: error against epsilon per method, per-column "
                                        "distributions, 2-way error heat maps (not DP: do not publish it)",
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    rep.add_argument("--real", required=True, type=Path, help="real CSV with every schema column")
    rep.add_argument("--synthetic", required=True, nargs="+", metavar="[LABEL=]PATH",
                     help="one submission per method, optionally labelled (dpsyn=out/a.csv histogram=out/b.csv)")
    rep.add_argument("--output", type=Path, default=Path("output/report.html"),
                     help="HTML file to write (one file; the PNG plots are embedded)")
    _evaluation_options(rep)
    return parser


def _evaluation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", required=True, type=Path, help="parameters JSON (its schema)")
    p.add_argument("--group-columns", default=None,
                   help="columns the Sprint-2 score groups by; 'none' for one group; default: PUMA,YEAR "
                        "where the schema has them")
    p.add_argument("--three-way", type=int, default=100, help="random 3-way marginals in the workload")
    p.add_argument("--workload-seed", type=int, default=0, help="seed of the 3-way draw")
    p.add_argument("--bins", type=int, default=DEFAULT_BINS,
                   help="bins for numeric columns with neither Sprint-2 nor schema bins")
    p.add_argument("--target", help="categorical column to predict (classifier utility)")
    p.add_argument("--sensitive", help="with --target: column whose groups get per-group error rates")
    p.add_argument("--positive", help="with --target: the positive class (default: its last schema value)")
    p.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")


def parse_args(argv: list[str]) -> argparse.Namespace:
    if not argv or argv[0] not in COMMANDS + ("-h", "--help"):
        argv = ["synthesize"] + list(argv)
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    level = (logging.WARNING if getattr(args, "quiet", False)
             else logging.DEBUG if getattr(args, "verbose", False) else logging.INFO)
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr, force=True)
    logging.getLogger("numba").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        if args.command == "validate":
            return validate_command(args)
        if args.command == "score":
            return score_command(args)
        if args.command == "report":
            return report_command(args)
        return synthesize_command(args)
    except SchemaError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
    except (DataError, BudgetExceeded, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("error: interrupted; no output written", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug or a failed worker: one line, no partial output (files are staged)
        print(f"error: unexpected failure ({type(exc).__name__}: {exc}); no output written", file=sys.stderr)
        return 1
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


def _evaluation_setup(args) -> tuple[Schema, EvaluationOptions, pd.DataFrame]:
    schema = load_schema(args.params)
    problems = [f"--{flag} {name}: not a schema column" for flag, name in
                (("target", args.target), ("sensitive", args.sensitive)) if name and name not in schema.names]
    if args.target in schema.names and schema.column(args.target).kind == NUMERIC:
        problems.append(f"--target {args.target} must be a categorical column")
    for flag in ("sensitive", "positive"):
        if getattr(args, flag) is not None and not args.target:
            problems.append(f"--{flag} needs --target")
    if args.positive is not None and args.target in schema.names and schema.column(args.target).kind != NUMERIC \
            and args.positive not in [str(v) for v in schema.column(args.target).values]:
        problems.append(f"--positive {args.positive} is not a value of {args.target}")
    if args.three_way < 0:
        problems.append(f"--three-way must be >= 0, got {args.three_way}")
    if args.bins < 1:
        problems.append(f"--bins must be >= 1, got {args.bins}")
    if problems:
        raise SchemaError(problems)
    options = EvaluationOptions(_group_columns(args.group_columns, schema), args.three_way, args.workload_seed,
                                args.bins, args.target, args.sensitive, args.positive)
    return schema, options, read_for_evaluation(args.real, schema, "real file")


def score_command(args) -> int:
    schema, options, real = _evaluation_setup(args)
    if args.json_out is not None:
        _prepare_output(args.json_out)
    synthetic = read_for_evaluation(args.synthetic, schema, "synthetic file")
    result = Evaluator(schema, real, options).evaluate(synthetic)
    result.update(real=str(args.real), synthetic=str(args.synthetic))
    print(format_table(result), file=sys.stderr)
    text = json.dumps(result, indent=2)
    if args.json_out is None:
        print(text)
    else:
        with StagedFiles() as staged:
            staged.path(args.json_out).write_text(text + "\n")
            staged.commit()
        print(args.json_out)
    return 0


def report_command(args) -> int:
    schema, options, real = _evaluation_setup(args)
    output = _prepare_output(args.output)
    methods = {}
    for spec in args.synthetic:
        label, _, path = spec.rpartition("=")
        path = Path(path)
        methods[label or path.stem] = read_for_evaluation(path, schema, f"synthetic file {path}")
    write_report(output, schema, real, methods, options)
    print(output)
    return 0


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
    id_column = args.id_column or (DEFAULT_ID_COLUMN if DEFAULT_ID_COLUMN in read_header(args.private) else None)
    private = validate(read_table(args.private, schema, "private file", id_column=id_column, private=True),
                       schema, "private file", on_invalid=args.on_invalid, hide_counts=not args.show_private_counts)
    timings["reading"] = time.perf_counter() - start

    start = time.perf_counter()
    encoder = Encoder.fit(schema, public, default_bins=args.bins)
    data = PrivateData(encoder.encode(private), private[id_column].to_numpy() if id_column else None,
                       encoder.encode(public) if public is not None else None)
    del private
    timings["encoding"] = time.perf_counter() - start
    _log_plan(schema, encoder, group_columns, id_column, args.method)

    options = MethodOptions(args.method, group_columns, args.jobs, args.regime, args.group_floor, args.group_round,
                            args.marginals)
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
        raise DataError(f"output {output} is a folder; give a file path")
    if not os.access(folder, os.W_OK):
        raise DataError(f"cannot write output: folder {folder} is not writable")
    return output


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
