"""The private file read a batch at a time straight into compact codes: in this process, or on the workers
of a Dask cluster (the engine's ``load``), with the same checks and messages either way.

``BatchEncoder`` turns one batch of text into an engine ``Part`` (column-major codes of the smallest unsigned
type that holds the domain, the raw values of the numeric columns a run's queries read, the ids' text)
plus a summary of what was outside the schema; ``settle`` reports those summaries once for the whole file
(reading.settle_invalid).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.reading import (DataError, InvalidReport, as_text, check_columns, individual_ids, is_parquet,
                                      settle_invalid, typed_values, withheld)
from dpsyn.dataloader.schema import Schema
from dpsyn.lib.records.marginals import code_dtype
from dpsyn.lib.privacy.engine import Part

PARTITION_BYTES = 64 << 20  # CSV bytes per Dask partition


@dataclass(frozen=True)
class BatchEncoder:
    """One batch of the private table's text (a DataFrame, or a reading.Columns that makes it a column at a
    time; or a Parquet partition's values) -> (Part, (what was outside the schema, rows dropped)).
    ``raw_columns``: the numeric columns whose raw values the Part keeps (stages.Pipeline.raw_columns; the rest
    are read, checked and encoded, then let go).  Picklable: the Dask engine runs it on its workers."""

    schema: Schema
    encoder: Encoder
    id_column: str | None
    on_invalid: str
    label: str
    raw_columns: tuple[str, ...] = ()
    as_text: bool = False        # the batch holds typed values (Parquet through dask): turn them into text first
    rows_required: bool = True   # a batch without rows is a header-only file (False: one partition of many)

    def __call__(self, batch) -> tuple[Part, tuple[InvalidReport, int]]:
        if isinstance(batch, pd.DataFrame):
            text = as_text(batch) if self.as_text else batch.rename(columns=lambda c: str(c).strip())
        else:  # reading.Columns: each column's text made when validation reads it
            text = batch
        text = check_columns(text, self.schema, self.label, self.id_column,
                             rows_required=self.rows_required)
        typed, drop, report = typed_values(text, self.schema, self.on_invalid)
        typed = typed[~drop]
        ids = individual_ids(typed[self.id_column], self.label) if self.id_column else None
        numeric = {c: typed[c].to_numpy(dtype=np.float64) for c in self.raw_columns}
        codes = np.asfortranarray(self.encoder.encode(typed), dtype=code_dtype(self.encoder.domain.sizes))
        return Part(codes, numeric, ids), (report, int(drop.sum()))


def settle(summaries, label: str, on_invalid: str, hide_counts: bool) -> None:
    """The values outside the schema over every batch, reported once (DataError under 'error')."""
    report = InvalidReport()
    for batch_report, _ in summaries:
        report.merge(batch_report)
    settle_invalid(report, sum(dropped for _, dropped in summaries), label, on_invalid, hide_counts=hide_counts)


def check_rows(rows: int, summaries, label: str) -> None:
    """DataError when no row is left: none read at all, or none valid."""
    if rows == 0:
        none_read = sum(dropped for _, dropped in summaries) == 0 and not any(report for report, _ in summaries)
        raise DataError(f"{label}: has a header but no rows" if none_read else
                        f"{label}: no valid rows left after handling values outside the schema")


def join(parts: list[Part]) -> Part:
    """The batches' Parts as one, in file order, emptying ``parts`` as it goes (each batch is let go once
    copied, so the file is not held twice).  The codes are column by column (Fortran order), the layout the
    private table holds, so that holding them needs no other copy."""
    rows, first = sum(len(p.codes) for p in parts), parts[0]
    codes = np.empty((rows, first.codes.shape[1]), dtype=first.codes.dtype, order="F")
    numeric = {c: np.empty(rows, dtype=v.dtype) for c, v in first.numeric.items()}
    ids = pa.concat_arrays([p.ids for p in parts]) if first.ids is not None else None  # the ids' text, in order
    start = 0
    while parts:
        part = parts.pop(0)
        end = start + len(part.codes)
        codes[start:end] = part.codes
        for c, v in part.numeric.items():
            numeric[c][start:end] = v
        start = end
    return Part(codes, numeric, ids)


def dask_partitions(path: str | Path, label: str) -> tuple[list, bool]:
    """The file's partitions as dask-delayed frames (text for CSV; values for Parquet: True), read where
    they are computed; DataError when the file cannot be read."""
    import dask.dataframe as dd
    path = Path(path)
    if not path.exists():
        raise DataError(f"{label}: not found or not a file")
    try:
        if is_parquet(path):
            # one partition per row group: by default dask may make one partition of a whole file
            return list(dd.read_parquet(str(path), split_row_groups=True).to_delayed()), True
        frame = dd.read_csv(str(path), dtype=str, keep_default_na=False, na_filter=False, blocksize=PARTITION_BYTES)
        return list(frame.to_delayed()), False
    except FileNotFoundError:
        raise DataError(f"{label}: not found or not a file") from None
    except (OSError, ValueError) as exc:  # dask reads a sample of the file here: its message may quote a row
        raise DataError(f"{label}: {withheld(exc, 'Parquet' if is_parquet(path) else 'CSV')}") from None
