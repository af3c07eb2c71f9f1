"""The parameters file (NIST Sprint-2 format) parsed into a frozen, validated object.

A parameters file holds ``runs`` (privacy budgets: epsilon, delta, max_records and
max_records_per_individual, all required) and ``schema`` (one entry per column).  Column entries:

* categorical: ``values`` (strings or integers), optional ``dtype``;
* bounded numeric: ``min`` and ``max`` (integers when ``dtype`` is an integer type);
* unbounded numeric: only a ``dtype`` (Sprint 2's INCTOT, HHWT...).  Such a column
  needs a clip range before a release: ``min``/``max`` added to its entry, or the
  range of the public file (see :meth:`Schema.with_public_ranges`).

Any numeric entry may carry ``bins``: a list of increasing edges, or a bin count, and
``precision``: the decimals its values have (0 for whole numbers, -1 for multiples of 10;
default: what the public file shows, integers for integer dtypes).
Any entry may carry ``null``: a token such as ``"N"`` meaning "not applicable",
which is a legal value of that column (numeric columns included).

Our extensions (the NIST format lacks them), all optional: ``function_of`` names the
column this one is a function of (e.g. INDP_CAT of INDP; the mapping comes from the public
file); ``constant_within`` lists group columns within whose cells this column holds one
value (e.g. DENSITY within PUMA); a top-level ``constraints`` list holds edit rules
(dataloader/rules.py); a top-level ``distinct_per_individual`` lists categorical columns in
which no two rows of one individual agree (Sprint 2: ``["YEAR"]``, one row per person per
year), which bounding enforces and which lowers the noise of marginals that include them; a
top-level ``individual`` says how one individual's rows relate (dataloader/individuals.py).

Every problem in the file is reported at once, one line each, by
:class:`SchemaError`.  Nothing here looks at private data.
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from dpsyn.dataloader.individuals import Individual

CATEGORICAL = "categorical"
NUMERIC = "numeric"

INTEGER_DTYPES = {"int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
FLOAT_DTYPES = {"float", "float32", "float64", "double"}
STRING_DTYPES = {"str", "string", "object"}
MAX_MAGNITUDE = float(2 ** 53)  # the largest |value| a numeric column may hold: float64 holds every integer to here
# a parameters file's own keys ("review": the notes `dpsyn schema draft` writes for its reader, never read)
TOP_KEYS = {"runs", "schema", "constraints", "distinct_per_individual", "individual", "review"}
KNOWN_KEYS = {"dtype", "values", "min", "max", "bins", "null", "precision", "function_of", "constant_within"}


class SchemaError(ValueError):
    """Raised with every problem found in a parameters file (``problems``: one line each)."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Column:
    """One column's public domain.

    ``kind`` is CATEGORICAL (``values`` set) or NUMERIC (``low``/``high`` set, or
    both None for an unbounded column whose range is still to be supplied).
    ``integral`` says whether numeric values are whole numbers.  ``bins`` is None,
    a bin count, or a tuple of increasing edges.  ``null`` is the not-applicable
    token or None.
    """

    name: str
    kind: str
    dtype: str
    values: tuple | None = None
    low: float | None = None
    high: float | None = None
    integral: bool = False
    bins: int | tuple[float, ...] | None = None
    null: str | None = None
    precision: int | None = None
    function_of: str | None = None
    constant_within: tuple[str, ...] = ()

    @property
    def bounds(self) -> tuple[float, float]:
        """(min, max) of a bounded numeric column."""
        assert self.low is not None and self.high is not None, f"{self.name} has no range"
        return self.low, self.high

    @property
    def bounded(self) -> bool:
        return self.kind == CATEGORICAL or (self.low is not None and self.high is not None)

    def describe(self) -> str:
        if self.kind == CATEGORICAL:
            text = f"categorical, {len(self.values or ())} values"
        elif self.bounded:
            text = f"{'integer' if self.integral else 'numeric'} in [{self.low:g}, {self.high:g}]"
        else:
            text = f"unbounded {self.dtype}"
        return text + (f", null token {self.null!r}" if self.null is not None else "")


def category_list(col: Column) -> list:
    """Categories of a categorical column in code order: its values, then the null token if separate."""
    cats = list(col.values or ())
    if col.null is not None and col.null not in [str(v) for v in cats]:
        cats.append(col.null)
    return cats


@dataclass(frozen=True)
class Run:
    """One release: its (epsilon, delta) budget, row cap and per-individual bound theta."""

    epsilon: float
    delta: float
    max_records: int
    max_records_per_individual: int


@dataclass(frozen=True)
class Schema:
    """Columns in file order plus the runs; pure, hashable, never changed in place."""

    columns: tuple[Column, ...]
    runs: tuple[Run, ...]
    rules: tuple = ()  # dataloader.rules.Rule, from the "constraints" section
    distinct_per_individual: tuple[str, ...] = ()  # no two rows of one individual agree on all of these
    individual: Individual | None = None  # from the "individual" section

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def unbounded(self) -> list[str]:
        """Names of numeric columns that still lack a clip range."""
        return [c.name for c in self.columns if not c.bounded]

    def with_public_ranges(self, ranges: dict[str, tuple[float, float]]) -> "Schema":
        """Fill the clip range of unbounded columns from public-data ranges (public data is free)."""
        cols = tuple(
            replace(c, low=float(ranges[c.name][0]), high=float(ranges[c.name][1]))
            if not c.bounded and c.name in ranges else c
            for c in self.columns
        )
        return replace(self, columns=cols)

    def require_ranges(self) -> None:
        """Raise SchemaError naming every numeric column that still has no clip range, or whose declared precision
        is finer than float64 holds at the range the public file gave it (``finer_than_float64``)."""
        problems = [f"column {name}: numeric with no range; add \"min\" and \"max\" to its schema entry "
                    f"or give a --public file that has this column" for name in self.unbounded()]
        problems += [f"column {c.name}: {why}" for c in self.columns if c.kind == NUMERIC and c.bounded
                     and c.precision is not None and (why := finer_than_float64(*c.bounds, c.precision))]
        if problems:
            raise SchemaError(problems)


def load_schema(path: str | Path) -> Schema:
    """Read and validate a parameters file; raise SchemaError listing every problem."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SchemaError([f"cannot read parameters file {path}: {exc.strerror or exc}"]) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError([f"parameters file {path} is not valid JSON: {exc.msg} "
                           f"(line {exc.lineno}, column {exc.colno})"]) from None
    return parse_schema(raw)


def parse_schema(raw: object) -> Schema:
    """Validate an already-decoded parameters object; raise SchemaError listing every problem."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise SchemaError(["parameters must be a JSON object with \"runs\" and \"schema\""])
    for key in ("runs", "schema"):
        if key not in raw:
            problems.append(f"parameters: missing \"{key}\"")
    for key in sorted(set(raw) - TOP_KEYS, key=str):  # a misspelt declaration must not vanish without a word
        problems.append(f"parameters: unknown key \"{key}\" (known: {', '.join(sorted(TOP_KEYS))})")
    runs = _parse_runs(raw.get("runs", []), problems)
    columns = _parse_columns(raw.get("schema", {}), problems)
    by_name = {c.name: c for c in columns}
    _check_declarations(columns, by_name, problems)
    if problems:
        raise SchemaError(problems)
    from dpsyn.dataloader.rules import parse_rules  # rules parse against the columns parsed here
    rules = parse_rules(raw.get("constraints"), by_name, problems)
    distinct = check_distinct(raw.get("distinct_per_individual", []), by_name, "distinct_per_individual",
                              problems)
    from dpsyn.dataloader.individuals import parse_individual
    individual = parse_individual(raw.get("individual"), by_name, distinct, problems)
    if problems:
        raise SchemaError(problems)
    return Schema(columns=tuple(columns), runs=tuple(runs), rules=rules, distinct_per_individual=distinct,
                  individual=individual)


def check_distinct(names: object, by_name: dict[str, "Column"], where: str, problems: list[str]) -> tuple[str, ...]:
    """The declared distinct-per-individual columns (categorical schema columns, each named once), adding
    one line to ``problems`` per bad entry."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        problems.append(f"{where}: must be a list of column names, got {names!r}")
        return ()
    for name in names:
        if name not in by_name:
            problems.append(f"{where}: {name!r} is not a schema column")
        elif by_name[name].kind != CATEGORICAL:
            problems.append(f"{where}: {name} must be a categorical column (its rows are told apart by value)")
    if len(set(names)) != len(names):
        problems.append(f"{where}: a column is named twice")
    return tuple(names)


def _check_declarations(columns: list[Column], by_name: dict[str, Column], problems: list[str]) -> None:
    for col in columns:
        where = f"column {col.name}"
        parent = col.function_of
        if parent is not None and (parent not in by_name or parent == col.name):
            problems.append(f"{where}: function_of names {parent!r}, which is not another schema column")
        elif parent is not None and (col.kind != CATEGORICAL or by_name[parent].kind != CATEGORICAL):
            problems.append(f"{where}: function_of needs a categorical column and a categorical parent")
        for g in col.constant_within:
            if g not in by_name or g == col.name:
                problems.append(f"{where}: constant_within names {g!r}, which is not another schema column")


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _parse_runs(raw_runs: object, problems: list[str]) -> list[Run]:
    if not isinstance(raw_runs, list) or not raw_runs:
        problems.append("runs: must be a non-empty list")
        return []
    runs = []
    seen = set()
    for i, r in enumerate(raw_runs):
        where = f"runs[{i}]"
        if not isinstance(r, dict):
            problems.append(f"{where}: must be an object")
            continue
        bad = len(problems)
        eps: Any = r.get("epsilon")  # JSON values, checked below
        delta: Any = r.get("delta")
        mr: Any = r.get("max_records")
        theta: Any = r.get("max_records_per_individual")
        if not _number(eps) or eps <= 0:
            problems.append(f"{where}: epsilon must be a number > 0, got {eps!r}")
        if not _number(delta) or not 0 < delta < 1:
            problems.append(f"{where}: delta must be a number in (0, 1), got {delta!r}")
        if not isinstance(mr, int) or isinstance(mr, bool) or mr < 1:
            problems.append(f"{where}: max_records must be an integer >= 1, got {mr!r}")
        if theta is None:
            problems.append(f"{where}: missing \"max_records_per_individual\" (the most rows one individual "
                            f"may have; every noise scale follows it, so it has no default: write 1 for one "
                            f"row per individual)")
        elif not isinstance(theta, int) or isinstance(theta, bool) or theta < 1:
            problems.append(f"{where}: max_records_per_individual must be an integer >= 1, got {theta!r}")
        for key in sorted(set(r) - {"epsilon", "delta", "max_records", "max_records_per_individual"}):
            problems.append(f"{where}: unknown key \"{key}\"")
        if len(problems) == bad:
            if eps in seen:
                problems.append(f"{where}: epsilon {eps} appears in more than one run")
            seen.add(eps)
            runs.append(Run(float(eps), float(delta), mr, theta))
    return runs


def delta_warnings(runs: Sequence[Run]) -> list[str]:
    """One line per run whose delta exceeds 1 / max_records (a public stand-in for 1 / rows)."""
    return [f"run eps={r.epsilon:g}: delta {r.delta:.3g} is above 1/max_records = {1 / r.max_records:.3g}; delta is "
            f"the chance the guarantee fails outright, and a release that publishes one random record whole is "
            f"already (0, 1/n)-DP for n rows, so delta should be far below 1/n (1e-10 to 1/n^2 is usual)"
            for r in runs if r.delta > 1 / r.max_records]


def _parse_columns(raw_schema: object, problems: list[str]) -> list[Column]:
    if not isinstance(raw_schema, dict) or not raw_schema:
        problems.append("schema: must be a non-empty object mapping column names to entries")
        return []
    columns = []
    for name, entry in raw_schema.items():
        col = _parse_column(name, entry, problems)
        if col is not None:
            columns.append(col)
    return columns


def _parse_column(name: str, entry: object, problems: list[str]) -> Column | None:
    where = f"column {name}"
    if name == "epsilon":
        problems.append(f"{where}: the name \"epsilon\" is reserved for the submission's first column")
        return None
    if not isinstance(entry, dict):
        problems.append(f"{where}: entry must be an object")
        return None
    bad = len(problems)
    for key in sorted(set(entry) - KNOWN_KEYS):
        problems.append(f"{where}: unknown key \"{key}\"")
    dtype = str(entry.get("dtype", "")).lower()
    null = entry.get("null")
    if null is not None and not isinstance(null, str):
        problems.append(f"{where}: null token must be a string such as \"N\", got {null!r}")
    if "values" in entry:
        return _categorical(name, entry, dtype, null, problems, bad)
    if dtype not in INTEGER_DTYPES | FLOAT_DTYPES:
        problems.append(f"{where}: needs \"values\" (categorical) or a numeric dtype "
                        f"(int*, uint*, float), got dtype {entry.get('dtype')!r}")
        return None
    integral = dtype in INTEGER_DTYPES
    low, high = entry.get("min"), entry.get("max")
    if (low is None) != (high is None):
        problems.append(f"{where}: give both \"min\" and \"max\" or neither")
    elif low is not None:
        if not (_number(low) and _number(high)) or low > high:
            problems.append(f"{where}: min and max must be numbers with min <= max, got {low!r}, {high!r}")
        elif max(abs(low), abs(high)) > MAX_MAGNITUDE:
            problems.append(f"{where}: min and max must lie within ±{MAX_MAGNITUDE:.4g} (2^53, where float64 stops "
                            f"holding every integer), got {low!r}, {high!r}")
        elif integral and (low != int(low) or high != int(high)):
            problems.append(f"{where}: integer column needs integer min and max, got {low!r}, {high!r}")
    bins = _parse_bins(where, entry.get("bins"), low, high, problems)
    precision = entry.get("precision")
    if precision is not None and (not isinstance(precision, int) or isinstance(precision, bool)
                                  or not -9 <= precision <= 15):
        problems.append(f"{where}: precision must be an integer number of decimals in [-9, 15], got {precision!r}")
    elif precision is not None and len(problems) == bad and _number(low) and _number(high):
        too_fine = finer_than_float64(low, high, precision)
        if too_fine:
            problems.append(f"{where}: {too_fine}")
    if "function_of" in entry:
        problems.append(f"{where}: function_of applies to categorical columns only")
    within = _within(where, entry, problems)
    if len(problems) > bad:
        return None
    return Column(name, NUMERIC, dtype, None,
                  None if low is None else float(low), None if high is None else float(high),
                  integral, bins, null, precision, None, within)


GRID_STEPS = float(2 ** 50)  # the most grid steps a value of decimals may be from zero (below, float64 counts them)


def finer_than_float64(low: float, high: float, precision: int) -> str:
    """Why a grid of ``precision`` decimals is too fine for values in [low, high] ("" where it is not): counting a
    value's steps of 10^-precision must stay exact in float64 (dataloader/grid.py), so |value|·10^precision at most
    GRID_STEPS (2^50: from 2^51 on, a value of decimals divided by its step can fall half-way between two whole
    numbers); whole numbers and coarser grids up to 2^53 (MAX_MAGNITUDE).  A finer grid gave empty or split bins."""
    largest = max(abs(float(low)), abs(float(high)), 1.0)
    limit = GRID_STEPS if precision > 0 else MAX_MAGNITUDE
    if largest * 10.0 ** precision <= limit:
        return ""
    most = math.floor(math.log10(GRID_STEPS / largest))
    return (f"precision {precision} is finer than float64 holds for values up to {largest:.6g} (at most "
            f"{most if most > 0 else 0} decimals there)")


def _within(where: str, entry: dict, problems: list[str]) -> tuple[str, ...]:
    within = entry.get("constant_within", [])
    if not isinstance(within, list) or not all(isinstance(w, str) for w in within):
        problems.append(f"{where}: constant_within must be a list of column names")
        return ()
    return tuple(within)


def _categorical(name, entry, dtype, null, problems, bad) -> Column | None:
    where = f"column {name}"
    values = entry["values"]
    if not isinstance(values, list) or not values:
        problems.append(f"{where}: \"values\" must be a non-empty list")
        return None
    ok = all(isinstance(v, str) for v in values) or all(
        isinstance(v, int) and not isinstance(v, bool) for v in values)
    if not ok:
        problems.append(f"{where}: \"values\" must be all strings or all integers")
    elif len(set(values)) != len(values):
        problems.append(f"{where}: \"values\" has duplicates")
    for key in ("min", "max", "bins", "precision"):
        if key in entry:
            problems.append(f"{where}: \"{key}\" does not apply to a categorical column")
    parent = entry.get("function_of")
    if parent is not None and not isinstance(parent, str):
        problems.append(f"{where}: function_of must be a column name")
    within = _within(where, entry, problems)
    if len(problems) > bad:
        return None
    return Column(name, CATEGORICAL, dtype or "str", tuple(values), null=null, function_of=parent,
                  constant_within=within)


def _parse_bins(where, bins, low, high, problems):
    if bins is None:
        return None
    if isinstance(bins, int) and not isinstance(bins, bool):
        if bins < 1:
            problems.append(f"{where}: bin count must be >= 1, got {bins}")
        return bins
    if isinstance(bins, list) and len(bins) >= 2 and all(_number(b) for b in bins):
        if all(b2 > b1 for b1, b2 in zip(bins[:-1], bins[1:])):
            return tuple(float(b) for b in bins)
        problems.append(f"{where}: bin edges must be strictly increasing")
        return None
    problems.append(f"{where}: \"bins\" must be a bin count or a list of at least two edges")
    return None
