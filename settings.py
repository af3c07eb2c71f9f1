"""How a release runs beyond its data and parameters (``Settings``), and every check of a request that needs
no data: the method and its options against the schema, the settings, the group and distinct columns, the
reweighting request, and the seed.  Each check raises OptionError (or SchemaError, MissingExtra) listing every
problem, one line each."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from dpsyn.dataloader.encoding import DEFAULT_BINS
from dpsyn.dataloader.reading import ON_INVALID
from dpsyn.dataloader.schema import NUMERIC, Schema, check_distinct, load_schema, parse_schema
from dpsyn.lib.runtime.extras import require
from dpsyn.lib.privacy.engine import ENGINES
from dpsyn.method import METHODS
from dpsyn.method.base import Method, OptionError
from dpsyn.stages.reweight import ReweightSpec, parse_reweight

log = logging.getLogger("dpsyn")

DEFAULT_ID_COLUMN = "sim_individual_id"
DEFAULT_GROUP_COLUMNS = ("PUMA", "YEAR")


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


def request(params: Mapping | str | Path | Schema, method: str, options) -> tuple[Schema, Method, Any]:
    """The schema, the method and its options, checked against each other (no data read)."""
    schema = params if isinstance(params, Schema) else parse_schema(params) if isinstance(params, Mapping) \
        else load_schema(params)
    if method not in METHODS:
        raise OptionError([f"unknown method {method!r}; methods: {', '.join(sorted(METHODS))}"])
    spec = METHODS[method]
    method_options = spec.make_options(options)
    problems = spec.check(method_options, schema) if spec.check is not None else []
    if problems:
        raise OptionError(problems)
    return schema, spec, method_options


def check_settings(schema: Schema, s: Settings) -> tuple[str, ...]:
    """The group columns to use; OptionError listing every bad setting (MissingExtra where the Dask engine
    is asked for and not installed)."""
    problems = []
    if s.engine not in ENGINES:
        problems.append(f"--engine must be one of {', '.join(ENGINES)}, got {s.engine!r}")
    elif s.engine == "dask":
        for module in ("dask", "distributed"):
            require(module, "the Dask engine")
    if s.scheduler is not None and (s.engine != "dask" or "://" not in s.scheduler):
        problems.append(f"a scheduler address needs the Dask engine and a protocol (tcp://host:8786), got "
                        f"{s.scheduler!r}")
    if not isinstance(s.jobs, int) or s.jobs < 1:
        problems.append(f"--jobs must be >= 1, got {s.jobs}")
    if not isinstance(s.bins, int) or s.bins < 1:
        problems.append(f"--bins must be >= 1, got {s.bins}")
    if s.on_invalid not in ON_INVALID:
        problems.append(f"--on-invalid must be one of {', '.join(ON_INVALID)}, got {s.on_invalid!r}")
    if s.id_column is not None and s.id_column in schema.names:
        problems.append(f"--id-column {s.id_column} is a schema column; the id column must not be synthesized")
    try:
        groups = resolve_group_columns(schema, s.group_columns)
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


def distinct_columns(schema: Schema, given: Sequence[str] | None) -> tuple[str, ...]:
    """The distinct-per-individual columns: ``given`` (checked) or the parameters' declaration."""
    if given is None:
        return schema.distinct_per_individual
    problems: list[str] = []
    distinct = check_distinct(list(given), {c.name: c for c in schema.columns}, "--distinct-per-individual",
                              problems)
    if problems:
        raise OptionError(problems)
    return distinct


def reweighting_spec(schema: Schema, s: Settings) -> ReweightSpec | None:
    """The settings' reweighting request checked against the schema (None without one)."""
    if s.reweight is None:
        return None
    require("cvxpy", "reweighting")
    return parse_reweight(s.reweight, schema.names, [c.name for c in schema.columns if c.kind == NUMERIC],
                          s.reweight_share, s.reweight_floor)


def seed_sequence(seed: int | None) -> np.random.SeedSequence:
    """Fresh OS entropy, or ``seed`` with a warning that seeded noise is not private."""
    if seed is None:
        return np.random.SeedSequence()  # fresh OS entropy
    log.warning("WARNING: a fixed seed (%d) fixes the noise: use it for tests only, never for a release "
                "(seeded noise is not private)", seed)
    return np.random.SeedSequence(seed)
