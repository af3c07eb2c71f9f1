"""Reading tables and validating them against the schema.

``read_csv_text`` reads a CSV with every cell as text (pyarrow engine), or a Parquet file's values
as the text its CSV would hold; ``column_batches`` reads either a batch of rows at a time, a
column's text made only when it is read; ``as_text`` turns a DataFrame handed to the Python API
into the same text form; ``check_columns`` checks
either one's header; ``validate`` turns the text into typed columns: categorical columns
become pandas Categoricals whose categories are ``category_list(column)`` (the schema's
values, plus the null token when it is not one of them); numeric columns become float64
with NaN standing for the null token.  Values outside the schema are counted per
column and handled by the ``on_invalid`` policy (error, clip, drop); nothing is
changed without a log line saying what and how many (for the private file the counts
are withheld unless the curator asks for them: see ``validate``).
"""
from __future__ import annotations

import csv
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dpsyn.dataloader.schema import CATEGORICAL, MAX_MAGNITUDE, Column, Schema, category_list
from dpsyn.lib.runtime.progress import progress

log = logging.getLogger(__name__)

ON_INVALID = ("error", "clip", "drop")


class DataError(ValueError):
    """Bad input data: the message is one line that names the file and the problem."""


def is_parquet(path: str | Path) -> bool:
    """Whether ``path`` is a Parquet file (``.parquet``) or a folder of them."""
    path = Path(path)
    return path.suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet")))


def read_header(path: str | Path) -> list[str]:
    """Column names of a CSV's first line or a Parquet dataset's schema; [] when it cannot be read
    (read_csv_text then says why)."""
    try:
        if is_parquet(path):
            import pyarrow.dataset as ds
            return [c.strip() for c in ds.dataset(path, format="parquet").schema.names]
        with open(path, newline="") as f:
            return [c.strip() for c in next(csv.reader(f), [])]
    except (OSError, UnicodeDecodeError, ValueError):
        return []


_FIELD_COUNTS = (re.compile(r"Expected (\d+) columns, got (\d+)"),              # pyarrow
                 re.compile(r"Expected (\d+) fields in line \d+, saw (\d+)"))    # pandas (dask's reader)


def withheld(exc: BaseException, kind: str) -> str:
    """What went wrong reading a private file, with nothing of its data in it: a row with the wrong number of
    fields is named by the two counts alone; any other failure by its kind alone (readers' messages quote
    cells, bytes, row numbers or byte offsets).  ``kind``: "CSV" or "Parquet"."""
    for pattern in _FIELD_COUNTS:
        counts = pattern.search(str(exc))
        if counts:
            return (f"cannot parse as CSV: CSV parse error: Expected {counts[1]} columns, got {counts[2]} "
                    f"(row text withheld: private data)")
    return f"cannot read as {kind}: {type(exc).__name__} (details withheld: private data)"


def _parquet_batches(path: Path, what: str, private: bool) -> Iterator[Columns]:
    """Every cell of a Parquet file or folder as the text its CSV would hold (nulls empty), a batch at a time."""
    import pyarrow.dataset as ds
    try:
        dataset = ds.dataset(path, format="parquet")
        if not dataset.schema.names:
            raise DataError(f"{what} {path}: empty (no columns)")
        # the bar counts row groups, as a CSV's counts bytes: never the rows (an exact private count)
        groups = [group for fragment in dataset.get_fragments() for group in fragment.split_by_row_group()]
        with progress(len(groups), f"reading {what}", "row group", log, minimum=2) as bar:
            for group in groups:
                # one batch decoded at a time: the scanner's read-ahead and threads held several row groups
                # at once (10M rows: 3.6 GB against 1.5 GB) and were slower
                for batch in group.to_batches(schema=dataset.schema, batch_size=READ_ROWS, batch_readahead=0,
                                              fragment_readahead=0, use_threads=False):
                    yield Columns(pa.Table.from_batches([batch]), values=True)
                bar.update(1)
    except (OSError, ValueError, pa.ArrowException) as exc:
        if isinstance(exc, DataError):
            raise
        problem = withheld(exc, "Parquet") if private else f"cannot read as Parquet: {str(exc).splitlines()[0]}"
        raise DataError(f"{what} {path}: {problem}") from None


class Columns:
    """A batch of rows held as Arrow columns, each turned into the text ``read_csv_text`` gives (pandas
    strings; ``values``: from a Parquet file's values, as ``as_text`` turns them) only when it is read, so a
    batch's text is held one column at a time (strings take tens of bytes a cell; the batch itself a few).
    Reads like the part of a DataFrame that validation uses: ``columns``, ``len``, ``index``, a column by
    name, a list of names for those columns."""

    def __init__(self, table: pa.Table, values: bool = False):
        self.table = table.rename_columns([str(c).strip() for c in table.column_names])
        self.values = values

    @property
    def columns(self) -> list[str]:
        return self.table.column_names

    @property
    def index(self) -> pd.RangeIndex:
        return pd.RangeIndex(self.table.num_rows)

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, name):
        if isinstance(name, list):
            return Columns(self.table.select(name), self.values)
        series = self.table.column(name).to_pandas().rename(name)
        return column_text(series) if self.values else series

    def frame(self) -> pd.DataFrame:
        """Every column's text at once."""
        return pd.DataFrame({name: self[name] for name in self.columns}, index=self.index)


def read_csv_text(path: str | Path, what: str, private: bool = False) -> pd.DataFrame:
    """Every cell of the CSV at ``path`` (or of a Parquet file or folder of them) as text (header stripped).

    ``private``: a parse error names the row's problem but not its text.
    """
    batches = [batch.frame() for batch in column_batches(path, what, private)]
    return pd.concat(batches, ignore_index=True) if len(batches) > 1 else batches[0]


def column_batches(path: str | Path, what: str, private: bool = False) -> Iterator[Columns]:
    """``read_csv_text`` a batch of rows at a time (at least one batch, maybe without rows), each a
    ``Columns`` whose text is made a column at a time, so that a caller can turn each into compact codes
    before the next is read and never holds a whole batch of strings; a progress bar (terminal only)."""
    path = Path(path)
    if is_parquet(path):
        yield from _parquet_batches(path, what, private)
        return
    if not path.is_file():
        raise DataError(f"{what} {path}: not found or not a file")
    if path.stat().st_size == 0:
        raise DataError(f"{what} {path}: empty file (no header, no rows)")
    try:
        yield from _csv_batches(path, what)
    except (OSError, ValueError, pa.ArrowException) as exc:
        if isinstance(exc, DataError):
            raise
        if private:  # pyarrow's message may name the row ("Row #3501: ...") and quotes it
            raise DataError(f"{what} {path}: {withheld(exc, 'CSV')}") from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{what} {path}: cannot parse as CSV: {first}") from None


READ_BLOCK = 1 << 24  # bytes of CSV parsed per pyarrow block
READ_ROWS = 1 << 20   # rows per batch handed on (CSV blocks are gathered up to about this many)


def _csv_batches(path: Path, what: str) -> Iterator[Columns]:
    """The CSV's cells as strings (empty cells empty, no missing-value guessing), parsed by pyarrow a
    block at a time and handed on about READ_ROWS rows at a time, with a progress bar over the file's
    bytes (terminal only)."""
    import pyarrow.csv as pa_csv
    with open(path, newline="") as f:
        names = next(csv.reader(f), [])
    convert = pa_csv.ConvertOptions(column_types={n: pa.string() for n in names}, null_values=[],
                                    strings_can_be_null=False, quoted_strings_can_be_null=False)
    with pa.input_stream(str(path)) as stream, \
            progress(path.stat().st_size, f"reading {what}", "B", log, minimum=READ_BLOCK) as bar:
        reader = pa_csv.open_csv(stream, read_options=pa_csv.ReadOptions(block_size=READ_BLOCK),
                                 convert_options=convert)
        pending: list[pa.RecordBatch] = []
        rows, handed = 0, False

        def hand_on():
            return Columns(pa.Table.from_batches(pending, schema=reader.schema))
        for batch in reader:
            pending.append(batch)
            rows += batch.num_rows
            bar.update(stream.tell() - bar.n)
            if rows >= READ_ROWS:
                yield hand_on()
                pending, rows, handed = [], 0, True
        if pending or not handed:
            yield hand_on()


def column_text(series: pd.Series) -> pd.Series:
    """A column's cells as the text ``read_csv_text`` would give: str() of each value, whole floats without
    ".0" (a column of ints with a gap reads as floats), missing cells (NaN, None, NA) empty."""
    missing = series.isna().to_numpy()
    if pd.api.types.is_integer_dtype(series.dtype) and not missing.any():  # Arrow writes the same digits, faster
        return pc.cast(pa.array(series.to_numpy()), pa.string()).to_pandas().set_axis(series.index).rename(series.name)
    if pd.api.types.is_float_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        whole = ~missing & (values == np.round(values)) & (np.abs(values) < 2 ** 53)
        out = np.where(whole, np.where(whole, values, 0).astype(np.int64).astype(str), series.astype(str))
        return pd.Series(np.where(missing, "", out), index=series.index, name=series.name)
    return series.astype(str).where(~missing, "")


def as_text(df: pd.DataFrame) -> pd.DataFrame:
    """A DataFrame's cells as the text ``read_csv_text`` would give (``column_text`` of each column)."""
    return pd.DataFrame({str(c).strip(): column_text(df[c]) for c in df.columns}, index=df.index)


def check_columns(df: pd.DataFrame, schema: Schema, what: str, id_column: str | None = None,
                  allow_extra: bool = False, rows_required: bool = True) -> pd.DataFrame:
    """The schema columns (and ``id_column``) of a text table, in order; one DataError per problem.

    Every schema column is required; extra columns are an error unless ``allow_extra`` (then
    they are dropped with a log line); a header-only table is an error.
    """
    header = list(df.columns)
    wanted = schema.names + ([id_column] if id_column else [])
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataError(f"{what}: missing column(s) {', '.join(missing)}")
    if len(set(header)) != len(header):
        dup = sorted({c for c in header if header.count(c) > 1})
        raise DataError(f"{what}: duplicate column(s) {', '.join(dup)}")
    extra = [c for c in header if c not in wanted]
    if extra and not allow_extra:
        raise DataError(f"{what}: column(s) not in the schema: {', '.join(extra)} "
                        f"(remove them, or name the individual-id column with --id-column)")
    if extra:
        log.info("%s: ignoring column(s) not in the schema: %s", what, ", ".join(extra))
    if len(df) == 0 and rows_required:
        raise DataError(f"{what}: has a header but no rows")
    return df[wanted]


def read_table(path: str | Path, schema: Schema, what: str, id_column: str | None = None,
               allow_extra: bool = False, private: bool = False) -> pd.DataFrame:
    """``read_csv_text`` then ``check_columns``; messages name the file."""
    return check_columns(read_csv_text(path, what, private), schema, f"{what} {Path(path)}", id_column,
                         allow_extra)


def individual_ids(text: pd.Series, what: str) -> pa.LargeStringArray:
    """Each row's individual: its id's text, stripped of surrounding spaces, exactly (an Arrow string array:
    the text and 8 bytes a row).  Bounding groups rows by this text itself, never by a hash of it, so two
    individuals are one only when their ids are equal (PRIVACY.md).  A blank id is an error (no count: the
    ids are private)."""
    ids = text.astype(str).str.strip()
    if (ids == "").any():
        raise DataError(f"{what}: column {text.name} has blank individual ids; every row needs one")
    return pa.array(ids.to_numpy(dtype=object), pa.large_string())


@dataclass
class InvalidReport:
    """Per column, how many values were outside the schema and why."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, column: str, reason: str, n: int) -> None:
        if n:
            self.counts.setdefault(column, {})[reason] = self.counts.get(column, {}).get(reason, 0) + n

    def __bool__(self) -> bool:
        return bool(self.counts)

    def merge(self, other: "InvalidReport") -> None:
        for column, reasons in other.counts.items():
            for reason, n in reasons.items():
                self.add(column, reason, n)

    def summary(self, hide_counts: bool = False) -> str:
        return "; ".join(f"{col}: " + ", ".join(why if hide_counts else f"{n} {why}" for why, n in reasons.items())
                         for col, reasons in self.counts.items())


HIDDEN_COUNTS = "how many withheld: exact private counts; --show-private-counts prints them"


def validate(df: pd.DataFrame, schema: Schema, what: str, on_invalid: str = "error",
             public: bool = False, hide_counts: bool = False,
             hint: str = " (fix the data, or pass --on-invalid clip or drop)") -> pd.DataFrame:
    """Typed copy of ``df`` (text) with every value inside the schema.

    on_invalid='error' raises DataError listing columns and counts; 'clip' clips
    out-of-range numbers (and rounds non-integers in integer columns) and drops rows
    whose value cannot be clipped (unknown category, missing or non-numeric, not finite or
    beyond ±2^53: such a value never becomes a range);
    'drop' drops every row with an invalid value.  ``public=True`` (public data,
    which costs no budget) keeps rows with an unknown category, marking that cell
    missing, clips out-of-range numbers, skips range checks of still-unbounded
    columns and drops rows with non-numeric numbers; it logs what it did.
    Extra columns (an id column) are passed through unchanged.  ``hide_counts`` (private
    data) names columns, problems and actions in errors and logs but no counts.
    """
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid must be one of {ON_INVALID}")
    typed, drop, report = typed_values(df, schema, on_invalid, public)
    settle_invalid(report, int(drop.sum()), what, on_invalid, public, hide_counts, hint)
    typed = typed[~drop].reset_index(drop=True)
    if len(typed) == 0:
        raise DataError(f"{what}: no valid rows left after handling values outside the schema")
    return typed


def typed_values(df: pd.DataFrame, schema: Schema, on_invalid: str, public: bool = False
                 ) -> tuple[pd.DataFrame, np.ndarray, InvalidReport]:
    """``validate``'s work on one batch, before any message: the typed batch (clipped where the policy
    says), which rows to drop, and what was outside the schema."""
    report = InvalidReport()
    out: dict[str, object] = {}
    drop = np.zeros(len(df), dtype=bool)
    fixable_only = on_invalid == "clip" or public
    for col in schema.columns:
        text = df[col.name]
        if col.kind == CATEGORICAL:
            codes = category_codes(text, col)
            bad = codes < 0
            report.add(col.name, "unknown or missing categories", int(bad.sum()))
            if not public:
                drop |= bad
            out[col.name] = pd.Categorical.from_codes(codes, categories=category_list(col))
        else:
            values, bad_text, huge, low_mask, high_mask, frac_mask = _numeric(
                text, col, check_range=not public or col.bounded)
            report.add(col.name, "missing or non-numeric", int(bad_text.sum()))
            report.add(col.name, f"not finite or beyond ±{MAX_MAGNITUDE:.4g}", int(huge.sum()))
            bad_text = bad_text | huge  # never a range nor a value: such rows cannot be clipped
            report.add(col.name, f"below min {col.low:g}" if col.low is not None else "", int(low_mask.sum()))
            report.add(col.name, f"above max {col.high:g}" if col.high is not None else "", int(high_mask.sum()))
            report.add(col.name, "non-integer in integer column", int(frac_mask.sum()))
            drop |= bad_text
            if fixable_only:
                if col.low is not None and col.high is not None:
                    values = np.where(low_mask, col.low, np.where(high_mask, col.high, values))
                values = np.where(frac_mask, np.round(values), values)
            else:
                drop |= low_mask | high_mask | frac_mask
            out[col.name] = values
    for extra in df.columns:
        if extra not in out:
            out[extra] = df[extra].to_numpy()
    return pd.DataFrame(out, index=df.index), drop, report


def settle_invalid(report: InvalidReport, dropped: int, what: str, on_invalid: str, public: bool = False,
                   hide_counts: bool = False, hint: str = " (fix the data, or pass --on-invalid clip or drop)") -> None:
    """``validate``'s message for the values outside the schema of a whole table (``report``, summed over
    its batches; ``dropped`` rows): DataError under on_invalid='error' (private data), else one log line."""
    if not report:
        return
    summary = report.summary(hide_counts)
    if on_invalid == "error" and not public:
        withheld = f" ({HIDDEN_COUNTS})" if hide_counts else ""
        raise DataError(f"{what}: values outside the schema: {summary}{hint}{withheld}")
    if public:  # by design, not a problem: a public file may cover other areas or wider ranges
        log.info("%s: %s are read as missing in those cells or clipped to the schema's ranges; the rest of "
                 "each row is still used%s", what, summary,
                 f" ({dropped} row(s) without a readable number dropped)" if dropped else "")
    else:
        action = ("clipped numbers, dropped rows that cannot be clipped" if on_invalid == "clip"
                  else "dropped those rows")
        how_many = f" ({HIDDEN_COUNTS})" if hide_counts else f"; {dropped} row(s) dropped"
        log.warning("%s: values outside the schema: %s; %s%s", what, summary, action, how_many)


def category_codes(text: pd.Series, col: Column) -> np.ndarray:
    """Code of each cell in category_list(col), -1 where it matches none."""
    cats = category_list(col)
    codes = pc.index_in(_arrow_text(text.str.strip()), value_set=pa.array([str(c) for c in cats], pa.string()))
    codes = codes.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
    if all(isinstance(v, int) for v in col.values or ()):
        unmatched = np.flatnonzero(codes < 0)
        if len(unmatched):  # tolerate "1.0" or "01" for integer categories
            num = pd.to_numeric(text.iloc[unmatched], errors="coerce").to_numpy(dtype=np.float64)
            lookup = {float(v): i for i, v in enumerate(col.values or ())}
            codes[unmatched] = [lookup.get(x, -1) for x in num]
    return codes


def _numeric(text: pd.Series, col: Column, check_range: bool):
    stripped = text.str.strip()
    is_null = (stripped == col.null).to_numpy() if col.null is not None else np.zeros(len(text), bool)
    values = _numbers(stripped, is_null)
    bad_text = np.isnan(values) & ~is_null
    values[is_null] = np.nan
    huge = ~np.isnan(values) & ~(np.abs(values) <= MAX_MAGNITUDE)  # inf, -inf, 1e308
    values[huge] = np.nan
    finite = ~np.isnan(values)
    none = np.zeros(len(text), dtype=bool)
    low_mask = finite & (values < col.low) if check_range and col.low is not None else none
    high_mask = finite & (values > col.high) if check_range and col.high is not None else none
    frac_mask = finite & (values != np.round(values)) if col.integral else none
    return values, bad_text, huge, low_mask, high_mask, frac_mask


def public_ranges(public: pd.DataFrame, schema: Schema) -> dict[str, tuple[float, float]]:
    """Observed [min, max] of each unbounded numeric column in the (public) frame."""
    ranges = {}
    for name in schema.unbounded():
        v = public[name].to_numpy(dtype=np.float64)
        v = v[~np.isnan(v)]
        if len(v):
            ranges[name] = (float(v.min()), float(v.max()))
    return ranges


def _arrow_text(text: pd.Series):
    """A column of text as Arrow strings (no copy where pandas holds them in Arrow already)."""
    return pa.array(text, pa.string(), from_pandas=True)


def _numbers(stripped: pd.Series, is_null: np.ndarray) -> np.ndarray:
    """Each cell's number (float64), NaN where it is not one: Arrow's parser, in C++, when every cell that is
    not the null token reads as a number (the same correctly rounded doubles as pandas' parser); else
    ``pd.to_numeric`` cell by cell, so that the cells that do not read are NaN."""
    text = _arrow_text(stripped)
    try:
        parsed = pc.cast(pc.if_else(pa.array(is_null), "0", text) if is_null.any() else text, pa.float64())
        return parsed.to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pd.to_numeric(stripped, errors="coerce").to_numpy(dtype=np.float64, copy=True)
