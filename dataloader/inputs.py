"""A release's inputs, read and encoded: first the public side (the schema's ranges, the encoder, the public
records and the record structure, from the parameters and the public file alone), then the private records,
a batch at a time, with the public side's encoder."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pyarrow import ArrowException

from dpsyn.dataloader.encoding import Encoder
from dpsyn.dataloader.private_rows import BatchEncoder, check_rows, dask_partitions, join, settle
from dpsyn.dataloader.reading import (DataError, as_text, check_columns, column_batches, public_ranges, read_table,
                                      validate, withheld)
from dpsyn.dataloader.schema import NUMERIC, Schema
from dpsyn.dataloader.structure import PublicViews, Structure, detect, null_switches, switch_cuts
from dpsyn.lib.privacy.engine import DaskEngine
from dpsyn.lib.privacy.private_table import PrivateRecords
from dpsyn.method.base import PublicData


@dataclass(frozen=True)
class PublicSide:
    """What a release knows before it opens the private file: the schema with public ranges filled,
    the encoder, the public data (encoded) and the record structure, all from the parameters and the
    public file alone; seconds spent."""

    schema: Schema
    encoder: Encoder
    public: PublicData | None = None
    structure: Structure = Structure()
    seconds: float = 0.0


@dataclass(frozen=True)
class Prepared:
    """The validated inputs of a release: the public side, the encoded private records, and seconds spent
    reading and encoding both."""

    side: PublicSide
    table: PrivateRecords
    reading: float


def _text(source: pd.DataFrame | str | Path, schema: Schema, what: str) -> tuple[pd.DataFrame, str]:
    """(the schema columns as text, extra columns dropped, what the table is called in messages) from a
    DataFrame or a CSV or Parquet path."""
    if isinstance(source, pd.DataFrame):
        name = f"{what} table"
        return check_columns(as_text(source), schema, name, allow_extra=True), name
    name = f"{what} file"
    return read_table(source, schema, name, allow_extra=True), name


def public_side(public, schema: Schema, bins: int, group_columns: tuple[str, ...] = (),
                derive: bool = True) -> PublicSide:
    """Ranges, bin edges, the encoder and the record structure from the schema and the public data
    (a DataFrame, a path, or None); the private file is not opened."""
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
    views = PublicViews(public_typed, public_data.codes, public_text) if public_data is not None else None
    structure = detect(schema, encoder, views, group_columns, switches, derive)
    return PublicSide(schema, encoder, public_data, structure, time.perf_counter() - start)


def read_private(private, side: PublicSide, id_column: str | None, on_invalid: str, show_private_counts: bool,
                 engine=None, raw_columns: tuple[str, ...] = ()) -> Prepared:
    """Read, validate and encode the private table with the public side's encoder a batch of rows at a time
    (dataloader/private_rows.py): each batch becomes codes of the smallest unsigned type that holds the
    domain, the raw values of the numeric columns ``raw_columns`` (those the run's queries read) and the ids'
    text before the next is read, so no whole table of text is ever held.  Under the Dask engine a file
    is read on the workers and stays there.  Values outside the schema are summed over the batches and
    reported once (``validate``'s messages)."""
    start = time.perf_counter()
    label = "private table" if isinstance(private, pd.DataFrame) else f"private file {Path(private)}"
    encode = BatchEncoder(side.schema, side.encoder, id_column, on_invalid, label, raw_columns)
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
        table = PrivateRecords(None, loaded=loaded)
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
        table = PrivateRecords(part.codes, part.numeric, part.ids)
    return Prepared(side, table, time.perf_counter() - start + side.seconds)
