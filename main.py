"""Differentially private synthetic data release: the command line, a thin wrapper over api.py.

    dpsyn --params parameters.json --private private.csv [--public public.csv] --output out.csv
    dpsyn validate --params parameters.json --submission out.csv

``dpsyn`` is the installed command; in a checkout ``python main.py`` is the same.  Synthesis is the
default command; see ``dpsyn --help``.  The evaluation commands (score, report) import scikit-learn
and matplotlib only when they run.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import sys
from pathlib import Path

if __name__ == "__main__" and not __package__:
    # `python main.py`: this checkout is the package dpsyn for this process, installed or not, so the
    # command runs the code beside it and never another installed copy.
    _spec = importlib.util.spec_from_file_location("dpsyn", Path(__file__).resolve().with_name("__init__.py"),
                                                   submodule_search_locations=[str(Path(__file__).resolve().parent)])
    assert _spec is not None and _spec.loader is not None
    sys.modules["dpsyn"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["dpsyn"])

from dpsyn.api import (BAD_INPUT, DEFAULT_ID_COLUMN, Settings, draft_schema, ledger_path, plan, release,
                       resolve_group_columns)
from dpsyn.dataloader.encoding import DEFAULT_BINS
from dpsyn.dataloader.reading import ON_INVALID, DataError, read_header
from dpsyn.dataloader.schema import NUMERIC, SchemaError, load_schema
from dpsyn.dataloader.submission import check_submission
from dpsyn.dataloader.writing import StagedFiles, check_writable, committed_paths
from dpsyn.lib.runtime.extras import require
from dpsyn.lib.runtime.interrupts import raise_on_stop
from dpsyn.lib.privacy.engine import ENGINES
from dpsyn.lib.tuning import T
from dpsyn.method import METHODS
from dpsyn.method.base import OptionError, flag

COMMANDS = ("synthesize", "validate", "score", "report", "plan", "schema")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default only where it has a real one (not None, not for a required option,
    not where the help already names it)."""

    def _get_help_string(self, action):
        if action.default is None or action.required or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)
OPTION_PREFIX = "method_option_"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=Path(sys.argv[0]).name if sys.argv[0].endswith("dpsyn") else "main.py",
        description="Release a differentially private synthetic copy of a table. The default command, "
                    "'synthesize', reads a parameters file (privacy budgets + schema) and a private CSV, "
                    "and writes one submission CSV holding every run plus one privacy-ledger JSON per run.",
        epilog="Example: python main.py --params parameters.json --private data/demo/private.csv "
               "--public data/demo/public.csv --output output/submission.csv",
        formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="{synthesize,validate,score,report,plan,schema}")

    syn = sub.add_parser("synthesize", help="write a DP synthetic table (default command)",
                         formatter_class=HelpFormatter)
    syn.add_argument("--params", required=True, type=Path,
                     help="parameters JSON (NIST Sprint-2 format): runs (epsilon, delta, max_records, "
                          "max_records_per_individual) and schema")
    syn.add_argument("--private", required=True, type=Path,
                     help="private table with every schema column: a CSV, a Parquet file or a folder of them")
    syn.add_argument("--public", type=Path,
                     help="optional public table with the same columns (CSV or Parquet; no budget spent on it): "
                          "gives ranges of numeric columns the schema leaves open, and quantile bin edges")
    syn.add_argument("--output", type=Path, default=Path("output/submission.csv"),
                     help="submission CSV to write; ledgers go beside it as NAME.ledger.epsE.json")
    syn.add_argument("--method", choices=sorted(METHODS), default="dpsyn",
                     help="synthesis strategy: " + "; ".join(f"{m.name}: {m.summary}" for m in METHODS.values()))
    syn.add_argument("--group-columns", default=None,
                     help="comma-separated columns to synthesize per group (noisy counts per group); "
                          "'none' for no groups; default: PUMA,YEAR where the schema has them")
    syn.add_argument("--id-column", default=None,
                     help=f"column identifying individuals; each keeps at most max_records_per_individual rows; "
                          f"default: {DEFAULT_ID_COLUMN} when the private file has it")
    syn.add_argument("--seed", type=int, default=None,
                     help="fix all randomness (for tests only: seeded noise is NOT private)")
    syn.add_argument("--jobs", type=int, default=1, help="worker processes (for the Dask engine: its local workers)")
    syn.add_argument("--engine", metavar="{local,dask,ADDRESS}", default="local",
                     help="where the private rows are held and counted and the groups synthesized: this process "
                          "(local), a Dask cluster of --jobs local workers (dask), or the running dask.distributed "
                          "cluster whose scheduler is at ADDRESS (tcp://host:8786); the same release either way")
    syn.add_argument("--on-invalid", choices=ON_INVALID, default="error",
                     help="what to do with values outside the schema: stop, clip numbers (dropping rows that "
                          "cannot be clipped), or drop the rows")
    syn.add_argument("--bins", type=int, default=DEFAULT_BINS,
                     help="bins for numeric columns whose schema entry gives none")
    syn.add_argument("--no-derive", action="store_true", help=argparse.SUPPRESS)  # expert: plan --tuning
    syn.add_argument("--distinct-per-individual", default=None, metavar="COLUMNS",
                     help="comma-separated categorical columns in which no two rows of one individual agree "
                          "(Sprint 2: YEAR); bounding keeps one row per individual per value, and marginals that "
                          "include them get L2 sensitivity sqrt(theta) instead of theta; default: the parameters' "
                          "distinct_per_individual; 'none' for none")
    syn.add_argument("--show-private-counts", action="store_true",
                     help="say how many private rows had values outside the schema (exact private counts: the "
                          "log is then for the curator's eyes only), and an unexpected error's message; by "
                          "default the log names columns and problems but no counts")
    syn.add_argument("--reweight", action="append", default=None, metavar="SPEC",
                     help="after synthesis, resample the rows toward noisy answers of these measures: "
                          "'moments:COLS' (means and correlations of numeric columns, each clipped to bounds "
                          "given as COL[low,high], else the public file's 1st-99th percentiles, else its range; "
                          "'moments:*' for all of them) or 'marginals:A×B,C,...' (1- and 2-way; '*' also joins "
                          "columns); several joined with ';' or by repeating the flag")
    syn.add_argument("--reweight-share", type=float, default=None, help=argparse.SUPPRESS)  # expert: plan --tuning
    syn.add_argument("--bin-values", action=argparse.BooleanOptionalAction, default=True,
                     help=argparse.SUPPRESS)  # expert: plan --tuning
    syn.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="experts and benchmarks: override a tuned value for this run (python main.py plan "
                          "--tuning lists them); a release needs none")
    loudness = syn.add_mutually_exclusive_group()
    loudness.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    loudness.add_argument("--verbose", action="store_true",
                          help="debug-level log (every noisy measurement); never prints private counts")
    _add_method_options(syn)

    pln = sub.add_parser("plan", help="print each run's budget plan (shares of rho and their noise) without "
                                      "reading any private data", formatter_class=HelpFormatter)
    pln.add_argument("--params", type=Path, help="parameters JSON (runs and schema); required but with --tuning")
    pln.add_argument("--tuning", action="store_true",
                     help="instead, list every tuned value (lib/tuning.py, settable with --set) and the expert "
                          "options of each method, with what each means")
    pln.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="as for synthesize")
    pln.add_argument("--public", type=Path, help="optional public CSV, as for synthesize")
    pln.add_argument("--method", choices=sorted(METHODS), default="dpsyn", help="the method the release would use")
    pln.add_argument("--group-columns", default=None, help="as for synthesize")
    pln.add_argument("--bins", type=int, default=DEFAULT_BINS, help="as for synthesize")
    pln.add_argument("--no-derive", action="store_true", help=argparse.SUPPRESS)
    pln.add_argument("--reweight", action="append", default=None, metavar="SPEC", help="as for synthesize")
    pln.add_argument("--reweight-share", type=float, default=None, help="as for synthesize")
    pln.add_argument("--bin-values", action=argparse.BooleanOptionalAction, default=True, help=argparse.SUPPRESS)
    pln.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")
    _add_method_options(pln)

    sch = sub.add_parser("schema", help="draft a parameters.json from a public file and a data dictionary (never "
                                        "the private file)", formatter_class=HelpFormatter)
    sch.add_argument("action", choices=("draft",), help="draft: write a parameters.json for you to review")
    sch.add_argument("--public", type=Path, help="public CSV with the columns to release")
    sch.add_argument("--dictionary", type=Path,
                     help="data dictionary JSON: per column a \"values\" object of codes (and \"min\", \"max\")")
    sch.add_argument("--output", type=Path, default=Path("parameters.draft.json"), help="where to write the draft")
    sch.add_argument("--id-column", default=None,
                     help="the public file's individual ids (default sim_individual_id when present): θ, the clock "
                          "and the individual section are proposed from them")
    sch.add_argument("--quiet", action="store_true", help="only warnings and errors on stderr")

    val = sub.add_parser("validate", help="check a submission CSV against a parameters file")
    val.add_argument("--params", required=True, type=Path, help="parameters JSON")
    val.add_argument("--submission", required=True, type=Path, help="submission CSV to check")

    score = sub.add_parser("score", help="compare a synthetic table or submission with the real table "
                                         "(not DP: do not publish the numbers)",
                           formatter_class=HelpFormatter)
    score.add_argument("--real", required=True, type=Path, help="real CSV with every schema column")
    score.add_argument("--synthetic", required=True, type=Path,
                       help="synthetic CSV or submission (an 'epsilon' column splits it into runs)")
    score.add_argument("--json-out", type=Path, help="write the JSON here instead of stdout")
    _evaluation_options(score)

    rep = sub.add_parser("report", help="HTML report with plots: error against epsilon per method, per-column "
                                        "distributions, 2-way error heat maps (not DP: do not publish it)",
                         formatter_class=HelpFormatter)
    rep.add_argument("--real", required=True, type=Path, help="real CSV with every schema column")
    rep.add_argument("--synthetic", required=True, nargs="+", metavar="[LABEL=]PATH",
                     help="one submission per method, optionally labelled (dpsyn=out/a.csv histogram=out/b.csv)")
    rep.add_argument("--output", type=Path, default=Path("output/report.html"),
                     help="HTML file to write (one file; the PNG plots are embedded)")
    rep.add_argument("--sdnist", nargs="+", default=[], metavar="[LABEL=]PATH",
                     help="SDNist reports of these releases (a report folder or its report.json): their figures "
                          "and a link to each")
    _evaluation_options(rep)
    return parser


def option_owners() -> dict[str, list[str]]:
    """Each method option's field name -> the methods that declare it."""
    owners: dict[str, list[str]] = {}
    for spec in METHODS.values():
        for f in dataclasses.fields(spec.options):
            owners.setdefault(f.name, []).append(spec.name)
    return owners


def _add_method_options(parser: argparse.ArgumentParser) -> None:
    """One argument group per method with options; a flag shared by methods is listed once; expert
    options are accepted but left out of --help (``plan --tuning`` lists them)."""
    added = set()
    for spec in METHODS.values():
        fields = [f for f in dataclasses.fields(spec.options) if f.name not in added]
        if not fields:
            continue
        shown = any(not f.metadata["expert"] for f in fields)
        group = parser.add_argument_group(f"{spec.name} options", f"only with --method {spec.name}") if shown \
            else parser
        owners = option_owners()
        for f in fields:
            meta = f.metadata
            default = "" if f.default is None else f" (default: {f.default})"
            also = [m for m in owners[f.name] if m != spec.name]
            shared = f" (also with --method {' and '.join(also)})" if also else ""
            group.add_argument(flag(f.name), dest=OPTION_PREFIX + f.name, type=meta["type"], choices=meta["choices"],
                               metavar=None if meta["choices"] else f.name.upper(), default=argparse.SUPPRESS,
                               help=argparse.SUPPRESS if meta["expert"] else meta["help"] + default + shared)
            added.add(f.name)


def method_options(args: argparse.Namespace) -> dict:
    """The method options given on the command line; OptionError for an option of another method."""
    given = {k[len(OPTION_PREFIX):]: v for k, v in vars(args).items() if k.startswith(OPTION_PREFIX)}
    owners = option_owners()
    wrong = [name for name in given if args.method not in owners[name]]
    if wrong:
        raise OptionError([f"{flag(name)} is an option of --method {' or '.join(owners[name])}, not of "
                           f"--method {args.method}" for name in wrong])
    return given


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
    p.add_argument("--id-column", default=None,
                   help="column naming each row's individual in the real and synthetic files: scores rows per "
                        f"individual and the parameters' individual section; default: {DEFAULT_ID_COLUMN} "
                        "when the real file has it")
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
    raise_on_stop()
    already = len(committed_paths())
    try:
        if args.command == "validate":
            return validate_command(args)
        if args.command in ("score", "report"):
            for module in ("sklearn", "matplotlib"):
                require(module, f"dpsyn {args.command}")
        if args.command == "score":
            return score_command(args)
        if args.command == "report":
            return report_command(args)
        if args.command == "plan":
            return plan_command(args)
        if args.command == "schema":
            return schema_command(args)
        return synthesize_command(args)
    except (SchemaError, OptionError) as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
    except BAD_INPUT + (OSError,) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        written = committed_paths()[already:]
        if written:  # the stop came after the commit: the files are whole, and the status says so
            print(f"warning: interrupted after the output was committed; it is complete: "
                  f"{', '.join(map(str, written))}", file=sys.stderr)
            return 0
        print("error: interrupted; no output written", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug or a failed worker: one line, no partial output (files are staged)
        written = committed_paths()[already:]
        state = f"the output was already committed: {', '.join(map(str, written))}" if written else "no output written"
        # a release's log may be shared: the message of an unexpected error can quote private values
        withheld = args.command == "synthesize" and not getattr(args, "show_private_counts", False)
        what = (f"{type(exc).__name__}; its message is withheld, as it may quote private data: "
                f"--show-private-counts shows it" if withheld else f"{type(exc).__name__}: {exc}")
        print(f"error: unexpected failure ({what}); {state}", file=sys.stderr)
        return 1
    return 2


def synthesize_command(args) -> int:
    with T.overridden(overrides(args.set)):
        return _synthesize(args)


def release_settings(args, synthesize: bool = True) -> Settings:
    """The api's Settings from the synthesize (or, ``synthesize`` False, the plan) command's options."""
    if args.reweight is None and args.reweight_share is not None:
        raise OptionError(["--reweight-share needs --reweight SPEC"])
    common = Settings(group_columns=_column_list(args.group_columns), bins=args.bins, derive=not args.no_derive,
                      reweight=args.reweight, reweight_share=args.reweight_share, bin_values=args.bin_values)
    if not synthesize:
        return common
    return dataclasses.replace(common, seed=args.seed, id_column=args.id_column, jobs=args.jobs,
                               engine=args.engine if args.engine in ENGINES else "dask",
                               scheduler=None if args.engine in ENGINES else args.engine, on_invalid=args.on_invalid, show_private_counts=args.show_private_counts,
                               distinct_per_individual=_column_list(args.distinct_per_individual),
                               output=args.output, keep_tables=False)


def _synthesize(args) -> int:
    runs = release(args.private, args.params, args.public, args.method, method_options(args), release_settings(args))
    for path in [args.output] + [ledger_path(args.output, r.epsilon) for r in runs]:
        print(path)
    return 0


def plan_command(args) -> int:
    """Print each run's budget plan on stdout (or, with --tuning, the tuned values and expert options);
    reads the parameters and the public file only."""
    with T.overridden(overrides(args.set)):
        return _plan(args)


def _plan(args) -> int:
    if args.tuning:
        print("\n".join(tuning_lines()))
        return 0
    if args.params is None:
        raise OptionError(["plan needs --params (or --tuning)"])
    plans = plan(args.params, args.public, args.method, method_options(args), release_settings(args, False))
    print("\n".join(line for p in plans for line in p.lines()))
    return 0


def overrides(assignments: list[str]) -> dict[str, object]:
    """``--set NAME=VALUE`` items as {name: value} (lib/tuning.py ``parse``), each logged as a warning;
    OptionError lists every bad one (an unknown name, a value of the wrong type)."""
    problems, out = [], {}
    for item in assignments:
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep:
            problems.append(f"--set {item}: give NAME=VALUE")
            continue
        try:
            out[name] = T.parse(name, value)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise OptionError(problems)
    for name, value in out.items():
        logging.getLogger("dpsyn").warning("warning: --set %s=%r overrides a tuned value (experiments only)",
                                           name, value)
    return out


def tuning_lines() -> list[str]:
    """The tuning table (name = value: meaning) and each method's expert options (flag, default, meaning)."""
    lines = ["tuned values (--set NAME=VALUE; where each came from: docs/tuning.md):"]
    lines += [f"  {name} = {value!r}: {meaning}" for name, value, meaning in T.rows()]
    for spec in METHODS.values():
        expert = [f for f in dataclasses.fields(spec.options) if f.metadata["expert"]]
        if expert:
            lines.append(f"expert options of --method {spec.name}:")
            lines += [f"  {flag(f.name)} (default {f.default}): {f.metadata['help']}" for f in expert]
    lines.append("expert release options: --no-derive (synthesize every column as it is: no derived, null-linked "
                 "or group-level columns), --no-bin-values (draw numeric values evenly inside their bins)")
    return lines


def schema_command(args) -> int:
    """``schema draft``: write a parameters draft from public material; the lines to review on stderr."""
    if args.public is None and args.dictionary is None:
        raise OptionError(["schema draft needs --public CSV or --dictionary JSON (or both)"])
    dictionary = None
    if args.dictionary is not None:
        try:
            dictionary = json.loads(args.dictionary.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read dictionary {args.dictionary}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"dictionary {args.dictionary} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        if not isinstance(dictionary, dict):
            raise DataError(f"dictionary {args.dictionary} must be a JSON object of columns")
    output = check_writable(args.output)
    params = draft_schema(args.public, dictionary, args.id_column)
    with StagedFiles(output) as staged:
        staged.path(output).write_text(json.dumps(params, indent=2) + "\n")
        staged.commit()
    for line in params["review"]:
        logging.getLogger("dpsyn").info("review: %s", line)
    print(output)
    return 0


def _column_list(option: str | None) -> tuple[str, ...] | None:
    """A comma-separated column option as given: None (the default), () for 'none', or the named columns."""
    if option is None:
        return None
    if option.strip().lower() in ("", "none"):
        return ()
    return tuple(c.strip() for c in option.split(",") if c.strip())


def validate_command(args) -> int:
    schema = load_schema(args.params)
    problems = check_submission(schema, args.submission)
    for problem in problems:
        print(f"invalid: {problem}", file=sys.stderr)
    if not problems:
        print(f"ok: {args.submission} is a valid submission for {args.params}", file=sys.stderr)
    return 1 if problems else 0


def _evaluation_setup(args):
    from dpsyn.evaluation.scoring import EvaluationOptions, read_for_evaluation
    schema = load_schema(args.params)
    problems = [f"--{opt} {name}: not a schema column" for opt, name in
                (("target", args.target), ("sensitive", args.sensitive)) if name and name not in schema.names]
    if args.target in schema.names and schema.column(args.target).kind == NUMERIC:
        problems.append(f"--target {args.target} must be a categorical column")
    for name in ("sensitive", "positive"):
        if getattr(args, name) is not None and not args.target:
            problems.append(f"--{name} needs --target")
    if args.positive is not None and args.target in schema.names and schema.column(args.target).kind != NUMERIC \
            and args.positive not in [str(v) for v in schema.column(args.target).values]:
        problems.append(f"--positive {args.positive} is not a value of {args.target}")
    if args.three_way < 0:
        problems.append(f"--three-way must be >= 0, got {args.three_way}")
    if args.bins < 1:
        problems.append(f"--bins must be >= 1, got {args.bins}")
    header = read_header(args.real)
    id_column = args.id_column or (DEFAULT_ID_COLUMN if DEFAULT_ID_COLUMN in header else None)
    if args.id_column is not None and (args.id_column not in header or args.id_column in schema.names):
        problems.append(f"--id-column {args.id_column}: not a column of {args.real} outside the schema")
    if problems:
        raise SchemaError(problems)
    options = EvaluationOptions(resolve_group_columns(schema, _column_list(args.group_columns)), args.three_way,
                                args.workload_seed, args.bins, args.target, args.sensitive, args.positive,
                                id_column)
    return schema, options, read_for_evaluation(args.real, schema, "real file", id_column)


def score_command(args) -> int:
    from dpsyn.evaluation.scoring import Evaluator, format_table, read_for_evaluation
    schema, options, real = _evaluation_setup(args)
    if args.json_out is not None:
        check_writable(args.json_out)
    synthetic = read_for_evaluation(args.synthetic, schema, "synthetic file", options.id_column)
    result = Evaluator(schema, real, options).evaluate(synthetic)
    result.update(real=str(args.real), synthetic=str(args.synthetic))
    print(format_table(result), file=sys.stderr)
    text = json.dumps(result, indent=2)
    if args.json_out is None:
        print(text)
    else:
        with StagedFiles(args.json_out) as staged:
            staged.path(args.json_out).write_text(text + "\n")
            staged.commit()
        print(args.json_out)
    return 0


def _labelled(spec: str) -> tuple[str, Path]:
    """``LABEL=PATH`` or ``PATH`` (labelled by its name without the extension)."""
    label, _, path = spec.rpartition("=")
    return label or Path(path).stem, Path(path)


def report_command(args) -> int:
    from dpsyn.evaluation.report import ledgers_beside, write_report
    from dpsyn.evaluation.scoring import read_for_evaluation
    from dpsyn.evaluation.sdnist import summary
    schema, options, real = _evaluation_setup(args)
    output = check_writable(args.output)
    methods, inputs, ledgers = {}, {"parameters": str(args.params), "real": str(args.real)}, {}
    for label, path in map(_labelled, args.synthetic):
        methods[label] = read_for_evaluation(path, schema, f"synthetic file {path}", options.id_column)
        inputs[f"synthetic: {label}"] = str(path)
        ledgers[label] = ledgers_beside(path)
    sdnist = {label: summary(path) for label, path in map(_labelled, args.sdnist)}
    write_report(output, schema, real, methods, options, inputs, {k: v for k, v in ledgers.items() if v}, sdnist)
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
