"""The Python API: release a private table under every run of a parameters file.

>>> import pandas as pd
>>> from dpsyn.api import plan, release
>>> private = pd.DataFrame({"AGE": [str(20 + i % 50) for i in range(400)],
...                         "SEX": ["1", "2"] * 200})
>>> params = {"runs": [{"epsilon": 1.0, "delta": 1e-6, "max_records": 1000,
...                     "max_records_per_individual": 1}],
...           "schema": {"AGE": {"dtype": "int", "min": 0, "max": 99},
...                      "SEX": {"dtype": "str", "values": ["1", "2"]}}}
>>> [round(sum(node.share for node in p.nodes), 9) for p in plan(params)]   # the budget, before any data
[1.0]
>>> (run,) = release(private, params, seed=1)   # seed: for tests only (seeded noise is not private)
>>> list(run.table.columns), round(run.ledger.spent / run.ledger.budget, 9)   # all of the run's rho
(['AGE', 'SEX'], 1.0)

``release`` reads (a DataFrame or a CSV path), validates against the schema, encodes
with domains from the schema and public data only, and for each run builds the private
table (contribution bounding to theta rows per individual, the run's ledger, fresh
noise), lets the method synthesize through it, and decodes.  Nothing touches the disk
unless ``output`` is given; then the submission CSV and one ledger JSON per run are
written together or not at all.  main.py's synthesize command is a thin wrapper.

The parts, one job each: settings.py (the settings and every check that needs no data),
dataloader/inputs.py (reading and encoding the public and private inputs), stages/run.py (one
run: the private table, the stages around the method, decoding), dataloader/writing.py (the
staged files) and release_log.py (what the log says).

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
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from dpsyn.budget import plan_run
from dpsyn.dataloader.draft import draft_parameters
from dpsyn.dataloader.encoding import DEFAULT_BINS
from dpsyn.dataloader.inputs import public_side, read_private
from dpsyn.dataloader.reading import DataError, as_text, read_csv_text, read_header
from dpsyn.dataloader.schema import Schema, SchemaError, delta_warnings, parse_schema
from dpsyn.dataloader.writing import ReleaseFiles, check_writable, ledger_path
from dpsyn.lib.runtime.extras import MissingExtra
from dpsyn.lib.privacy.accounting import BudgetExceeded
from dpsyn.lib.privacy.engine import DaskEngine, make_engine
from dpsyn.lib.privacy.mechanisms import NoiseTooLarge
from dpsyn.lib.privacy.plan import Plan
from dpsyn.lib.privacy.private_table import PrivateRecords
from dpsyn.lib.runtime.progress import log_above_bars, progress
from dpsyn.lib.runtime.threads import one_blas_thread
from dpsyn.method.base import OptionError
from dpsyn.release_log import log_plan, log_reweighting, summarise
from dpsyn.settings import (DEFAULT_GROUP_COLUMNS, DEFAULT_ID_COLUMN, Settings, check_settings, distinct_columns,
                            request, resolve_group_columns, reweighting_spec, seed_sequence)
from dpsyn.stages.run import (RunRelease, RunSetup, check_before_measuring, pipeline_for, release_run,
                              synthesize_run)

__all__ = ["BAD_INPUT", "DEFAULT_ID_COLUMN", "PrivateRecords", "RunRelease", "Settings", "draft_schema",
           "ledger_path", "plan", "release", "resolve_group_columns", "synthesize_run"]

log = logging.getLogger("dpsyn")

BAD_INPUT = (SchemaError, DataError, OptionError, NoiseTooLarge, BudgetExceeded, MissingExtra)
"""What ``release`` raises for bad input; each has a message of one line per problem."""


@one_blas_thread
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
    is written.  BLAS runs on one thread meanwhile, process-wide (lib/runtime/threads.py: one
    ``seed`` gives the same release on any machine).
    """
    started = time.perf_counter()
    s = dataclasses.replace(settings or Settings(), **given)
    schema, spec, method_options = request(params, method, options)
    groups = check_settings(schema, s)
    for warning in delta_warnings(schema.runs):
        log.warning("warning: %s", warning)
    distinct = distinct_columns(schema, s.distinct_per_individual)
    reweighting = reweighting_spec(schema, s)
    output = None if s.output is None else check_writable(Path(s.output))
    if output is None and not s.keep_tables:
        raise OptionError(["keep_tables=False needs output: the tables would not be kept anywhere"])
    seeds = seed_sequence(s.seed)

    side = public_side(public, schema, s.bins, groups, s.derive)
    header = list(private.columns) if isinstance(private, pd.DataFrame) else read_header(private)
    id_column = s.id_column or (DEFAULT_ID_COLUMN if DEFAULT_ID_COLUMN in header else None)
    pipeline = pipeline_for(side, spec, reweighting, s.bin_values)
    theta = max(r.max_records_per_individual for r in schema.runs)
    if pipeline.linking is not None and id_column is None and theta > 1:
        raise OptionError(["individual: linking rows into individuals needs the private file's id column "
                           f"(--id-column; default {DEFAULT_ID_COLUMN}), or drop the parameters' individual section"])
    setup = RunSetup(spec, method_options, groups, s.jobs, id_column, distinct, pipeline)
    check_before_measuring(side, setup)
    plans = [plan_run(run, pipeline, spec, method_options, bool(groups)) for run in side.schema.runs]
    engine = make_engine(s.engine, s.jobs, s.scheduler)
    setup = dataclasses.replace(setup, engine=engine)
    with contextlib.ExitStack() as stack:
        stack.callback(engine.close)
        files = None if output is None else stack.enter_context(ReleaseFiles(output, side.schema, id_column))
        if isinstance(engine, DaskEngine):
            log.info("engine: %s, %d partitions of the private rows", engine.name, engine.partitions)
        data = read_private(private, side, id_column, s.on_invalid, s.show_private_counts, engine,
                            pipeline.raw_columns(spec, tuple(side.encoder.domain.ranges)))
        log_plan(side, setup)
        if pipeline.reweighting is not None:
            log_reweighting(pipeline.reweighting)
        for line in (line for p in plans for line in p.lines()):  # fixed above, before the private file was read
            log.info("plan: %s", line)
        runs = list(side.schema.runs)
        run_seeds = [seq.spawn(4) for seq in seeds.spawn(len(runs))]
        releases = []
        with log_above_bars(log), progress(len(runs), "runs", "run", log) as bar:
            for run, run_plan, one_run_seeds in zip(runs, plans, run_seeds):
                r = release_run(data, run, setup, one_run_seeds, run_plan)
                if files is not None:
                    files.add(r)  # staged: nothing appears until the commit below
                summarise(r, spec.name)
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
    schema, spec, method_options = request(params, method, options)
    groups = check_settings(schema, dataclasses.replace(s, id_column=None, jobs=1, on_invalid="error",
                                                        engine="local", scheduler=None))
    reweighting = reweighting_spec(schema, s)
    side = public_side(public, schema, s.bins, groups, s.derive)
    pipeline = pipeline_for(side, spec, reweighting, s.bin_values)
    check_before_measuring(side, RunSetup(spec, method_options, groups, pipeline=pipeline))
    return [plan_run(run, pipeline, spec, method_options, bool(groups)) for run in side.schema.runs]


def draft_schema(public: pd.DataFrame | str | Path | None, dictionary: Mapping[str, Any] | None = None,
                 id_column: str | None = None) -> dict:
    """A parameters draft (dataloader/draft.py) from a public table (a DataFrame or a CSV path) and a data
    dictionary, with what the public file suggests beyond the columns (derived, null-linked and
    group-level columns, candidate edit rules: the release's own detection) added to its ``review``
    list.  ``id_column`` (default: sim_individual_id when the public file has it): the public file's individual
    ids, from which θ, the clock and how an individual's rows relate are proposed.  Reads no private data;
    DataError or SchemaError for unreadable input, OptionError for an id column the public file does not have."""
    text = None
    if public is not None:
        text = as_text(public) if isinstance(public, pd.DataFrame) else read_csv_text(public, "public file")
        id_column = id_column or (DEFAULT_ID_COLUMN if DEFAULT_ID_COLUMN in text.columns else None)
    if id_column is not None and (text is None or id_column not in text.columns):
        raise OptionError([f"--id-column {id_column}: not a column of the public file (the draft reads individuals "
                           f"from the public file only)"])
    params = draft_parameters(text, dictionary, id_column=id_column)
    if text is not None:
        schema = parse_schema({k: v for k, v in params.items() if k != "review"})
        text = text.drop(columns=[id_column]) if id_column in text.columns else text
        side = public_side(text, schema, DEFAULT_BINS, tuple(g for g in DEFAULT_GROUP_COLUMNS if g in schema.names))
        params["review"] += [f"suggested by the public file: {note}" for note in side.structure.notes]
    return params
