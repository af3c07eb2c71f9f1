"""The Python API: release a private table under every run of a parameters file.

    import pandas as pd
    from dpsyn.api import release
    runs = release(pd.read_csv("private.csv", dtype=str), "parameters.json",
                   public=pd.read_csv("public.csv", dtype=str))
    for run in runs:
        print(run.epsilon, len(run.table), run.ledger.spent)

``release`` reads (a DataFrame or a CSV path), validates against the schema, encodes
with domains from the schema and public data only, and for each run builds the private
table (contribution bounding to theta rows per individual, the run's ledger, fresh
noise), lets the method synthesize through it, and decodes.  Nothing touches the disk
unless ``output`` is given; then the submission CSV and one ledger JSON per run are
written together or not at all.  main.py's synthesize command is a thin wrapper.

Randomness: one SeedSequence per release (fresh OS entropy, or ``seed`` for tests only),
split into one child per run and each run's child into four: bounding, noise (the
private table's own generator, which nothing else draws from), the method's synthesis,
decoding.  A run's output depends neither on the other runs nor on how many worker
processes a method uses, and no released randomness comes from the noise's stream.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from pyarrow import ArrowException

from dpsyn.dataloader.comparisons import settle_comparisons
from dpsyn.dataloader.encoding import DEFAULT_BINS, Encoder
from dpsyn.dataloader.draft import draft_parameters
from dpsyn.dataloader.private_rows import BatchEncoder, check_rows, dask_partitions, join, settle
from dpsyn.dataloader.reading import (ON_INVALID, DataError, as_text, check_columns, column_batches, public_ranges,
                                      read_csv_text, read_header, read_table, validate, withheld)
from dpsyn.dataloader.rules import violations
from dpsyn.dataloader.schema import (NUMERIC, Run, Schema, SchemaError, check_distinct, delta_warnings, load_schema,
                                     parse_schema)
from dpsyn.dataloader.structure import Structure, detect, null_switches, switch_cuts
from dpsyn.dataloader.writing import StagedFiles, SubmissionWriter, check_writable
from dpsyn.budget import METHOD, plan_run
from dpsyn.lib.constraints import Boxes
from dpsyn.lib.extras import MissingExtra, require
from dpsyn.lib.privacy.accounting import BudgetExceeded, Ledger, classic_rho_from_eps_delta
from dpsyn.lib.privacy.mechanisms import NoiseTooLarge
from dpsyn.lib.privacy.engine import ENGINES, DaskEngine, Loaded, make_engine
from dpsyn.lib.privacy.plan import Plan
from dpsyn.lib.marginals import cell_index
from dpsyn.lib.privacy.private_table import Measurement, PrivateTable, Selection
from dpsyn.lib.progress import log_above_bars, progress
from dpsyn.method import METHODS
from dpsyn.method.base import Method, OptionError, PublicData, RunContext, SynthesisResult
from dpsyn.stages import Env
from dpsyn.stages.pipeline import Pipeline, records_of, stages_of
from dpsyn.stages.reweight import ReweightSpec, parse_reweight, reweight_cell_problems, with_bounds

log = logging.getLogger("dpsyn")

DEFAULT_ID_COLUMN = "sim_individual_id"
DEFAULT_GROUP_COLUMNS = ("PUMA", "YEAR")
BAD_INPUT = (SchemaError, DataError, OptionError, NoiseTooLarge, BudgetExceeded, MissingExtra)
"""What ``release`` raises for bad input; each has a message of one line per problem."""


@dataclass(frozen=True)
class EncodedTable:
    """Encoded private records (n × d codes), the raw values of numeric columns and each row's
    individual (the ids' text as an Arrow string array, or None), or the same left on the Dask engine's
    workers (``loaded``).  Held by the pipeline; a method sees them only through a PrivateTable."""

    codes: np.ndarray | None
    numeric: Mapping[str, np.ndarray] | None
    ids: pa.Array | None
    loaded: Loaded | None = None  # instead of the three above: rows the Dask engine read onto its workers


@dataclass(frozen=True)
class RunRelease:
    """One run's release: its parameters, the synthetic table (schema columns; categorical columns
    as Categoricals of the schema's values, numeric ones as numbers with NA for the null token),
    the ledger, every measurement the method made, and seconds per stage."""

    run: Run
    table: pd.DataFrame
    ledger: Ledger
    measurements: tuple[Measurement | Selection, ...]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        return self.run.epsilon


@dataclass(frozen=True)
class Settings:
    """How a release runs, beyond the data, the parameters and the method; main.py builds one from its
    options.

    ``seed``: for tests only (seeded noise is not private).  ``id_column``: the column naming
    individuals (default: sim_individual_id when present), each kept to at most
    max_records_per_individual random rows.  ``group_columns``: synthesize per cell of these (default
    PUMA, YEAR where the schema has them; () for none).  ``jobs``: worker processes.  ``on_invalid``:
    error, clip or drop values outside the schema.  ``bins``: bins for numeric columns whose schema
    gives none.  ``show_private_counts``: say how many private rows were invalid (the log is then
    for the curator only).  ``derive``: detect derived, null-linked and group-level columns from the
    public file (and apply the declared ones) and set them after synthesis (False: every column
    synthesized as it is; edit rules hold either way).  ``distinct_per_individual``: categorical
    columns in which no two rows of one individual agree (default: the parameters'), enforced by
    bounding, which needs an id column where theta > 1.  ``reweight``: measures to resample the
    method's rows toward (stages/reweight.py: ``moments:COLS`` with optional clipping bounds
    ``COL[low,high]``, ``marginals:A×B,...``), measured with ``reweight_share`` of each run's rho
    (default: the tuning table's), the tilt stopped where the effective sample size would fall below
    ``reweight_floor`` of the rows.  ``bin_values``: where numeric columns have no public values,
    spend a share of each run's rho on how the rows fall inside their bins and draw values by it
    (stages/bin_values.py; False draws them evenly).  ``output``: also write the submission CSV there
    and one ledger JSON per run beside it, each run's rows written as soon as it is done.  ``keep_tables``
    False (with ``output``): a run's table is not kept once written (``RunRelease.table`` is empty), so
    memory holds one run's rows at a time.  ``engine``: where the private records are held and counted,
    and the groups synthesized (lib/privacy/engine.py): "local" (this process and ``jobs`` forked
    workers) or "dask" (a LocalCluster of ``jobs`` workers, or the running cluster at ``scheduler``);
    either gives the same release under one seed.
    """

    seed: int | None = None
    id_column: str | None = None
    group_columns: Sequence[str] | None = None
    jobs: int = 1
    on_invalid: str = "error"
    bins: int = DEFAULT_BINS
    show_private_counts: bool = False
    derive: bool = True
    distinct_per_individual: Sequence[str] | None = None
    reweight: str | Sequence[str] | None = None
    reweight_share: float | None = None
    reweight_floor: float | None = None
    bin_values: bool = True
    output: str | Path | None = None
    keep_tables: bool = True
    engine: str = "local"
    scheduler: str | None = None


def release(private: pd.DataFrame | str | Path, params: Mapping | str | Path | Schema,
            public: pd.DataFrame | str | Path | None = None, method: str = "dpsyn",
            options: Mapping[str, Any] | Any | None = None, settings: Settings | None = None,
            **given: Any) -> list[RunRelease]:
    """One synthetic table per run of ``params`` (a parameters dict, a path to one, or a Schema).

    ``private`` / ``public``: a DataFrame (any dtypes; missing cells are missing values) or a
    CSV path.  ``method`` and its ``options`` (a dict or the method's options class).
    ``settings`` (``Settings``), with any of its fields given as keywords on top (``seed=1``).

    Privacy: each run is (epsilon, delta)-DP for one individual with up to theta rows, as
    its ledger records (PRIVACY.md).  Bad input raises one of ``BAD_INPUT``, before anything
    is written.
    """
    started = time.perf_counter()
    s = dataclasses.replace(settings or Settings(), **given)
    schema, spec, method_options = _request(params, method, options)
    groups = _check_settings(schema, s.group_columns, s.id_column, s.jobs, s.on_invalid, s.bins, s.engine,
                             s.scheduler)
    for warning in delta_warnings(schema.runs):
        log.warning("warning: %s", warning)
    distinct = _distinct(schema, s.distinct_per_individual)
    reweighting = _reweighting(schema, s)
    output = None if s.output is None else check_writable(Path(s.output))
    if output is None and not s.keep_tables:
        raise OptionError(["keep_tables=False needs output: the tables would not be kept anywhere"])
    seed_seq = _seed_sequence(s.seed)

    side = _public_side(public, schema, s.bins, groups, s.derive)
    header = list(private.columns) if isinstance(private, pd.DataFrame) else read_header(private)
    id_column = s.id_column or (DEFAULT_ID_COLUMN if DEFAULT_ID_COLUMN in header else None)
    stages = _stages(side, spec, reweighting, s.bin_values)
    _check_before_measuring(side, stages, id_column, distinct)
    plans = [plan_run(run, stages, spec, method_options, bool(groups)) for run in side.schema.runs]
    engine = make_engine(s.engine, s.jobs, s.scheduler)
    with contextlib.ExitStack() as stack:
        stack.callback(engine.close)
        files = None if output is None else stack.enter_context(ReleaseFiles(output, side.schema, id_column))
        if engine.name != "local":
            log.info("engine: %s, %d partitions of the private rows", engine.name, engine.partitions)
        data = _read_private(private, side, id_column, s.on_invalid, s.show_private_counts, engine,
                             stages.raw_columns(spec, tuple(side.encoder.domain.ranges)))
        _log_plan(side.schema, side.encoder, groups, id_column, spec.name, side.structure, distinct)
        if stages.reweighting is not None:
            _log_reweighting(stages.reweighting)
        for line in (line for p in plans for line in p.lines()):  # fixed above, before the private file was read
            log.info("plan: %s", line)
        runs = list(data.schema.runs)
        seeds = [seq.spawn(4) for seq in seed_seq.spawn(len(runs))]
        releases = []
        with log_above_bars(log), progress(len(runs), "runs", "run", log) as bar:
            for run, run_plan, run_seeds in zip(runs, plans, seeds):
                r = _release_run(data, run, spec, method_options, groups, s.jobs, run_seeds, distinct, stages,
                                 run_plan, engine)
                if files is not None:
                    files.add(r)  # staged: nothing appears until the commit below
                _summarise(r, spec.name)
                releases.append(r if s.keep_tables else dataclasses.replace(r, table=r.table.iloc[:0]))
                bar.update()
        log.info("reading and encoding %.2fs; total %.1fs", data.reading, time.perf_counter() - started)
        if files is not None:  # the last step: after it the release is on disk whatever happens
            files.commit()
    return releases


def plan(params: Mapping | str | Path | Schema, public: pd.DataFrame | str | Path | None = None,
         method: str = "dpsyn", options: Mapping[str, Any] | Any | None = None, settings: Settings | None = None,
         **given: Any) -> list[Plan]:
    """Each run's budget plan (lib/privacy/plan.py) as ``release`` with the same arguments would spend
    it, from the parameters, the method, the public file and the settings that move a share (group
    columns, bins, derive, reweighting, values inside bins) alone: no private data is read.  Bad input
    raises one of ``BAD_INPUT``."""
    s = dataclasses.replace(settings or Settings(), **given)
    schema, spec, method_options = _request(params, method, options)
    groups = _check_settings(schema, s.group_columns, None, 1, "error", s.bins)
    reweighting = _reweighting(schema, s)
    side = _public_side(public, schema, s.bins, groups, s.derive)
    stages = _stages(side, spec, reweighting, s.bin_values)
    _check_before_measuring(side, stages, None, ())
    return [plan_run(run, stages, spec, method_options, bool(groups)) for run in side.schema.runs]


def _reweighting(schema: Schema, s: Settings) -> ReweightSpec | None:
    """The settings' reweighting request checked against the schema (None without one)."""
    if s.reweight is None:
        return None
    require("cvxpy", "reweighting")
    return parse_reweight(s.reweight, schema.names, [c.name for c in schema.columns if c.kind == NUMERIC],
                          s.reweight_share, s.reweight_floor)


def draft_schema(public: pd.DataFrame | str | Path | None, dictionary: Mapping[str, Any] | None = None) -> dict:
    """A parameters draft (dataloader/draft.py) from a public table (a DataFrame or a CSV path) and a data
    dictionary, with what the public file suggests beyond the columns (derived, null-linked and
    group-level columns, candidate edit rules: the release's own detection) added to its ``review``
    list.  Reads no private data; DataError or SchemaError for unreadable input."""
    text = None
    if public is not None:
        text = as_text(public) if isinstance(public, pd.DataFrame) else read_csv_text(public, "public file")
    params = draft_parameters(text, dictionary)
    if text is not None:
        schema = parse_schema({k: v for k, v in params.items() if k != "review"})
        side = _public_side(text, schema, DEFAULT_BINS, tuple(g for g in DEFAULT_GROUP_COLUMNS if g in schema.names))
        params["review"] += [f"suggested by the public file: {note}" for note in side.structure.notes]
    return params


def _request(params, method: str, options) -> tuple[Schema, Method, Any]:
    """The schema, the method and its options, checked against each other (no data read)."""
    schema = params if isinstance(params, Schema) else parse_schema(params) if isinstance(params, Mapping) \
        else load_schema(params)
    spec = _method(method)
    method_options = spec.make_options(options)
    problems = spec.check(method_options, schema) if spec.check is not None else []
    if problems:
        raise OptionError(problems)
    return schema, spec, method_options


def _distinct(schema: Schema, given: Sequence[str] | None) -> tuple[str, ...]:
    """The distinct-per-individual columns: ``given`` (checked) or the parameters' declaration."""
    if given is None:
        return schema.distinct_per_individual
    problems: list[str] = []
    distinct = check_distinct(list(given), {c.name: c for c in schema.columns}, "--distinct-per-individual",
                              problems)
    if problems:
        raise OptionError(problems)
    return distinct


def _method(name: str) -> Method:
    if name not in METHODS:
        raise OptionError([f"unknown method {name!r}; methods: {', '.join(sorted(METHODS))}"])
    return METHODS[name]


def _check_settings(schema: Schema, group_columns, id_column, jobs, on_invalid, bins, engine: str = "local",
                    scheduler: str | None = None) -> tuple[str, ...]:
    """The group columns to use; OptionError listing every bad setting (MissingExtra where the Dask engine
    is asked for and not installed)."""
    problems = []
    if engine not in ENGINES:
        problems.append(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    elif engine == "dask":
        for module in ("dask", "distributed"):
            require(module, "the Dask engine")
    if scheduler is not None and (engine != "dask" or "://" not in scheduler):
        problems.append(f"a scheduler address needs the Dask engine and a protocol (tcp://host:8786), got "
                        f"{scheduler!r}")
    if not isinstance(jobs, int) or jobs < 1:
        problems.append(f"--jobs must be >= 1, got {jobs}")
    if not isinstance(bins, int) or bins < 1:
        problems.append(f"--bins must be >= 1, got {bins}")
    if on_invalid not in ON_INVALID:
        problems.append(f"--on-invalid must be one of {', '.join(ON_INVALID)}, got {on_invalid!r}")
    if id_column is not None and id_column in schema.names:
        problems.append(f"--id-column {id_column} is a schema column; the id column must not be synthesized")
    try:
        groups = resolve_group_columns(schema, group_columns)
    except OptionError as exc:
        problems += exc.problems
    if problems:
        raise OptionError(problems)
    return groups


def resolve_group_columns(schema: Schema, group_columns: Sequence[str] | None) -> tuple[str, ...]:
    """``group_columns`` checked against the schema; None gives PUMA, YEAR where the schema has them."""
    if group_columns is None:
        return tuple(c for c in DEFAULT_GROUP_COLUMNS if c in schema.names)
    groups = tuple(group_columns)
    problems = [f"--group-columns: {c} is not a schema column" for c in groups if c not in schema.names]
    if len(set(groups)) != len(groups):
        problems.append("--group-columns: a column is named twice")
    if problems:
        raise OptionError(problems)
    return groups


def _seed_sequence(seed: int | None) -> np.random.SeedSequence:
    if seed is None:
        return np.random.SeedSequence()  # fresh OS entropy
    log.warning("WARNING: a fixed seed (%d) fixes the noise: use it for tests only, never for a release "
                "(seeded noise is not private)", seed)
    return np.random.SeedSequence(seed)


def _text(source: pd.DataFrame | str | Path, schema: Schema, what: str) -> tuple[pd.DataFrame, str]:
    """(the schema columns as text, extra columns dropped, what the table is called in messages) from a
    DataFrame or a CSV or Parquet path."""
    if isinstance(source, pd.DataFrame):
        name = f"{what} table"
        return check_columns(as_text(source), schema, name, allow_extra=True), name
    name = f"{what} file"
    return read_table(source, schema, name, allow_extra=True), name


@dataclass(frozen=True)
class Prepared:
    """The validated inputs of a release: the schema with public ranges filled, the encoder, the
    encoded private table, the public data, the id column, the record structure, and seconds
    spent reading and encoding."""

    schema: Schema
    encoder: Encoder
    table: EncodedTable
    public: PublicData | None
    id_column: str | None
    reading: float
    structure: Structure = Structure()


@dataclass(frozen=True)
class PublicSide:
    """What a release knows before it opens the private file: the schema with public ranges filled,
    the encoder, the public data (encoded) and the record structure, all from the parameters and the
    public file alone; seconds spent."""

    schema: Schema
    encoder: Encoder
    public: PublicData | None
    structure: Structure
    seconds: float


def _public_side(public, schema: Schema, bins: int, group_columns: tuple[str, ...] = (),
                 derive: bool = True) -> PublicSide:
    """Ranges, bin edges, the encoder and the record structure from the schema and the public data;
    the private file is not opened."""
    start = time.perf_counter()
    public_typed = public_text = None
    if public is not None:
        public_text, name = _text(public, schema, "public")
        public_typed = validate(public_text, schema, name, public=True)
        schema = schema.with_public_ranges(public_ranges(public_typed, schema))
    schema.require_ranges()
    switches = null_switches(schema, public_typed) if public_typed is not None else []
    encoder = Encoder.fit(schema, public_typed, default_bins=bins, structural_cuts=switch_cuts(switches, schema))
    numeric = [c.name for c in schema.columns if c.kind == NUMERIC]
    public_data = None
    if public_typed is not None:
        public_data = PublicData(encoder.encode(public_typed),
                                 {c: public_typed[c].to_numpy(dtype=np.float64) for c in numeric})
    structure = detect(schema, encoder, public_typed, public_data.codes if public_data else None, public_text,
                       group_columns, switches, derive)
    return PublicSide(schema, encoder, public_data, structure, time.perf_counter() - start)


def _read_private(private, side: PublicSide, id_column: str | None, on_invalid: str, show_private_counts: bool,
                  engine=None, raw_columns: tuple[str, ...] = ()) -> Prepared:
    """Read, validate and encode the private table with the public side's encoder a batch of rows at a time
    (dataloader/private_rows.py): each batch becomes codes of the smallest unsigned type that holds the
    domain, the raw values of the numeric columns ``raw_columns`` (those the run's queries read) and the ids'
    text before the next is read, so no whole table of text is ever held.  Under the Dask engine a file
    is read on the workers and stays there.  Values outside the schema are summed over the batches and
    reported once (``validate``'s messages)."""
    start = time.perf_counter()
    schema = side.schema
    label = "private table" if isinstance(private, pd.DataFrame) else f"private file {Path(private)}"
    encode = BatchEncoder(schema, side.encoder, id_column, on_invalid, label, raw_columns)
    if isinstance(engine, DaskEngine) and not isinstance(private, pd.DataFrame):
        parts, typed = dask_partitions(private, label)
        try:
            loaded, summaries = engine.load(parts, dataclasses.replace(encode, as_text=typed, rows_required=False),
                                            id_column is not None, raw_columns)
        except DataError:  # raised by BatchEncoder on a worker: already the local engine's line
            raise
        except (ValueError, OSError, ArrowException) as exc:  # its own message may name a private row: not shown
            raise DataError(f"{label}: {withheld(exc, 'Parquet' if typed else 'CSV')}") from None
        settle(summaries, label, on_invalid, hide_counts=not show_private_counts)
        check_rows(sum(loaded.rows), summaries, label)
        table = EncodedTable(None, None, None, loaded)
    else:
        batches = [as_text(private)] if isinstance(private, pd.DataFrame) else \
            column_batches(private, "private file", private=True)
        parts, summaries = [], []
        for batch in batches:
            part, summary = encode(batch)
            parts.append(part)
            summaries.append(summary)
        settle(summaries, label, on_invalid, hide_counts=not show_private_counts)
        check_rows(sum(len(p.codes) for p in parts), summaries, label)
        part = join(parts)
        table = EncodedTable(part.codes, part.numeric, part.ids)
    return Prepared(schema, side.encoder, table, side.public, id_column,
                    time.perf_counter() - start + side.seconds, side.structure)


def _check_before_measuring(side: PublicSide, stages: Pipeline, id_column: str | None,
                            distinct: tuple[str, ...]) -> None:
    """Every refusal that needs only public facts, before the private file is read: the distinct
    declaration needs ids where theta > 1; reweighting's marginals fit the cell cap; the stages around
    the method leave it enough of each run's rho.  OptionError lists each problem."""
    schema, problems = side.schema, []
    theta = max(r.max_records_per_individual for r in schema.runs)
    if distinct and id_column is None and theta > 1:
        problems.append(f"distinct_per_individual ({', '.join(distinct)}) with max_records_per_individual {theta} "
                        f"needs an id column (--id-column): without ids the declaration cannot be enforced, and its "
                        f"sqrt(theta) noise would be too small if it were false; name the id column, or drop the "
                        f"declaration (--distinct-per-individual none)")
    if stages.reweighting is not None:
        problems += reweight_cell_problems(stages.reweighting, side.encoder.domain)
    problems += stages.problems()
    if problems:
        raise OptionError(problems)


@dataclass(frozen=True)
class RunOutput:
    """What one run's synthesis produced: the method's result, the ledger, the measurements, stage times."""

    result: SynthesisResult
    ledger: Ledger
    measurements: tuple[Measurement | Selection, ...]
    timings: dict[str, float]


def synthesize_run(table: EncodedTable, encoder: Encoder, public: PublicData | None, run: Run, spec: Method,
                   options, group_columns: tuple[str, ...], jobs: int,
                   seeds: list[np.random.SeedSequence], structure: Structure = Structure(),
                   distinct: tuple[str, ...] = (), pipeline: Pipeline | None = None,
                   plan: Plan | None = None, engine=None) -> RunOutput:
    """Build the run's private table (bounding, a ledger holding ``plan``, its own noise generator, the
    columns ``distinct`` per individual), then run the stages around the method (stages/): every
    stage's ``before``, the method, every stage's ``after``, each stage and the method inside its own
    plan node (budget.py), so each spends exactly that node's rho.  ``pipeline``: default, the
    structure's group-level columns and values inside bins, no reweighting; ``plan``: default,
    ``budget.plan_run`` of it.  ``seeds``: bounding, noise, synthesis (decoding is the fourth, used by
    the caller).  ``engine``: bounds, holds and counts the records and runs the groups' tasks (default: a
    LocalEngine of ``jobs``)."""
    if pipeline is None:
        pipeline = stages_of(encoder, structure, spec, None, True)
    plan = plan or plan_run(run, pipeline, spec, options, bool(group_columns))
    ledger, domain = Ledger(run.epsilon, run.delta, plan=plan), encoder.domain
    start = time.perf_counter()
    private = PrivateTable(table.codes, table.numeric, domain, run.max_records_per_individual, ledger,
                           np.random.default_rng(seeds[1]), ids=table.ids, bound_rng=np.random.default_rng(seeds[0]),
                           distinct=distinct, engine=engine, loaded=table.loaded)
    bounding = time.perf_counter() - start
    skip = structure.skipped(domain.names)
    skipped = set(domain.indices(skip))
    ctx = RunContext(domain, run.epsilon, run.delta, run.max_records, group_columns, jobs,
                     np.random.default_rng(seeds[2]), skip=skip,
                     boxes=Boxes(tuple(b for b in structure.boxes.boxes if not skipped & set(b.columns))),
                     tasks=engine.map if engine is not None else None)
    stages, env = pipeline.stages(), Env(encoder, ctx, structure)
    with ctx.timed("measuring"):
        for stage in stages:
            if stage.node is not None:
                with private.spending(stage.node):
                    stage.before(private, env)
    with private.spending(METHOD):
        result = spec.synthesize(private, public, ctx, options)
    with ctx.timed("structure"):
        records = records_of(result.codes, result.raw, encoder)
    for stage in stages:
        with ctx.timed(stage.timer), (private.spending(stage.node) if stage.node else contextlib.nullcontext()):
            records = stage.after(private, records, env)
    return RunOutput(SynthesisResult(records.codes, records.raw), ledger, private.released,
                     {"bounding": bounding, **ctx.timings})


def _stages(side: PublicSide, spec: Method, reweighting: ReweightSpec | None, bin_values: bool) -> Pipeline:
    """The stages around the method, reweighting's moment bounds filled from public facts."""
    if reweighting is not None:
        reweighting = with_bounds(reweighting, side.encoder.domain.ranges, side.public.numeric if side.public else None)
    return stages_of(side.encoder, side.structure, spec, reweighting, bin_values)


def _release_run(data: Prepared, run: Run, spec: Method, options, group_columns, jobs, seeds,
                 distinct: tuple[str, ...], stages: Pipeline, plan: Plan, engine) -> RunRelease:
    out = synthesize_run(data.table, data.encoder, data.public, run, spec, options, group_columns, jobs, seeds,
                         data.structure, distinct, stages, plan, engine)
    start = time.perf_counter()
    typed = decode_release(data.encoder, out.result, data.structure, data.schema.rules,
                           np.random.default_rng(seeds[3]))
    broken = {rule: n for rule, n in violations(typed, data.schema.rules,
                                                {c.name: c for c in data.schema.columns}).items() if n}
    if broken:  # repair guarantees none; this is the final check
        raise RuntimeError(f"released records break edit rules: {broken}")
    return RunRelease(run, typed, out.ledger, out.measurements,
                      {**out.timings, "decoding": time.perf_counter() - start})


def decode_release(encoder: Encoder, result: SynthesisResult, structure: Structure, rules,
                   rng: np.random.Generator) -> pd.DataFrame:
    """The typed synthetic table; a group-level column is decoded once per cell of its ``within``
    columns (every row of a cell shares the first row's value); values that break a comparison between two
    columns inside one interval are moved within their bins (dataloader/comparisons.py)."""
    typed = encoder.decode(result.codes, rng, result.raw)
    domain = encoder.domain
    for column, within in structure.group_level:
        cells = cell_index(result.codes[:, domain.indices(within)], domain.shape(within))
        _, first, inverse = np.unique(cells, return_index=True, return_inverse=True)
        typed[column] = typed[column].iloc[first[inverse]].reset_index(drop=True)
    return settle_comparisons(typed, rules, {c.column.name: c for c in encoder.coders})


def ledger_path(output: Path, epsilon: float) -> Path:
    """Where the ledger of the run with ``epsilon`` goes, beside the submission."""
    output = Path(output)
    return output.with_name(f"{output.stem}.ledger.eps{epsilon:g}.json")


class ReleaseFiles:
    """The submission CSV (every run; fresh ids when the private table had an id column) and one ledger JSON
    per run, written run by run into a staging folder (dataloader/writing.py): all files appear together at
    ``commit`` or none does (leaving the ``with`` block without a commit removes them)."""

    def __init__(self, output: Path, schema: Schema, id_column: str | None):
        self.output, self.schema, self.id_column = output, schema, id_column

    def __enter__(self) -> "ReleaseFiles":
        self.staged = StagedFiles(self.output).__enter__()
        self.writer = SubmissionWriter(self.staged.path(self.output), self.schema, self.id_column)
        return self

    def add(self, r: RunRelease) -> None:
        """Writes one run's rows and ledger (staged); its seconds go to ``r.timings['writing']``."""
        start = time.perf_counter()
        self.writer.write(r.epsilon, r.table)
        self.staged.path(ledger_path(self.output, r.epsilon)).write_text(r.ledger.to_json() + "\n")
        r.timings["writing"] = time.perf_counter() - start

    def commit(self) -> list[Path]:
        self.writer.close()
        return self.staged.commit()

    def __exit__(self, *exc) -> None:
        self.writer.close()
        self.staged.__exit__(*exc)


def _log_plan(schema: Schema, encoder: Encoder, group_columns, id_column, method, structure: Structure,
              distinct: tuple[str, ...] = ()) -> None:
    log.info("schema: %d columns; encoded domain: %s", len(schema.columns),
             ", ".join(f"{c.column.name} {c.describe()}" for c in encoder.coders))
    log.info("groups: %s", " × ".join(group_columns) if group_columns else "none (one group)")
    if id_column:
        log.info("individuals: rows are grouped by %s; each keeps at most max_records_per_individual rows "
                 "(chosen at random) and the output gets fresh ids", id_column)
    else:
        log.info("individuals: no id column; each individual is taken to contribute at most "
                 "max_records_per_individual rows as the parameters declare, and noise is scaled by it")
    if distinct:
        log.info("individuals: no two rows of one individual share %s (%s); marginals that include %s "
                 "get L2 sensitivity sqrt(theta) instead of theta", " × ".join(distinct),
                 "enforced: one random row per individual per value is kept" if id_column else
                 "as the parameters declare; without an id column this cannot be checked",
                 "it" if len(distinct) == 1 else "all of them")
    for note in structure.notes:
        log.info("%s", note)
    log.info("method: %s; runs: %s", method,
             "; ".join(f"eps={r.epsilon:g} delta={r.delta:.3g} theta={r.max_records_per_individual} "
                       f"max_records={r.max_records}" for r in schema.runs))


def _log_reweighting(spec: ReweightSpec) -> None:
    """The moment columns' clipping bounds and where they came from (the plan gives their noise)."""
    if spec.sources:
        log.info("reweighting: moment columns clipped per record to %s", ", ".join(
            f"{c} [{lo:g}, {hi:g}] ({dict(spec.sources)[c]})" for c, lo, hi in spec.bounds))


def _summarise(r: RunRelease, method: str) -> None:
    led = r.ledger
    times = ", ".join(f"{k} {v:.2f}s" for k, v in r.timings.items())
    log.info("run eps=%g delta=%.3g theta=%d: rho budget %.5g (the classic conversion would give %.5g), "
             "spent %.5g = eps %.4g; method %s; %d rows; %s",
             r.epsilon, r.run.delta, r.run.max_records_per_individual, led.budget,
             classic_rho_from_eps_delta(r.epsilon, r.run.delta), led.spent, led.epsilon_spent(), method,
             len(r.table), times)
