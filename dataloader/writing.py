"""Staged writing: output files appear all together or not at all.

``StagedFiles`` writes to temporary files in the output folder and renames them into
place on ``commit``; ``SubmissionWriter`` streams runs into one Sprint-2-shaped CSV.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from dataloader.reading import DataError
from dataloader.schema import CATEGORICAL, Column, Schema


def check_writable(output: Path) -> Path:
    """Create ``output``'s folder if needed and check it is writable (before any private data is read)."""
    output = Path(output)
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


class StagedFiles:
    """Write several output files so that either all appear or none does.

    ``path(final)`` gives a temporary path in the same folder; ``commit()`` renames
    every temporary into place; leaving the ``with`` block by an exception (or
    SystemExit/KeyboardInterrupt) removes the temporaries instead.
    """

    def __init__(self):
        self._staged: list[tuple[Path, Path]] = []

    def path(self, final: str | Path) -> Path:
        final = Path(final)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent)
        os.close(fd)
        self._staged.append((Path(tmp), final))
        return Path(tmp)

    def commit(self) -> list[Path]:
        umask = os.umask(0)
        os.umask(umask)
        for tmp, final in self._staged:
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions of a new file
            os.replace(tmp, final)
        done = [final for _, final in self._staged]
        self._staged = []
        return done

    def discard(self) -> None:
        for tmp, _ in self._staged:
            tmp.unlink(missing_ok=True)
        self._staged = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.discard()
        return False


def _arrow_column(values: pd.Series, col: Column):
    """A typed column (Categorical; numbers with NaN or NA = null) as an Arrow array for CSV output."""
    if col.kind == CATEGORICAL:
        values = values.array
        cats = pa.array([str(c) for c in values.categories])
        return pa.DictionaryArray.from_arrays(pa.array(values.codes, pa.int32()), cats)
    v = values.to_numpy(dtype=np.float64, na_value=np.nan)
    nulls = np.isnan(v)
    arr = pa.array(np.where(nulls, 0, v).astype(np.int64) if col.integral else v,
                   mask=nulls if nulls.any() else None)
    if col.null is not None:
        return pc.fill_null(pc.cast(arr, pa.string()), col.null)
    return arr


class SubmissionWriter:
    """Streams runs into one CSV: ``epsilon``, the schema columns in order, then the id column."""

    def __init__(self, path: Path, schema: Schema, id_column: str | None):
        self.schema, self.id_column = schema, id_column
        header = ["epsilon"] + schema.names + ([id_column] if id_column else [])
        special = set(',"\r\n')
        texts = [str(v) for c in schema.columns for v in (c.values or ())] + [
            c.null for c in schema.columns if c.null is not None]
        self.quoting = "needed" if any(special & set(t) for t in texts) else "none"
        self._file = open(path, "wb")
        line = io.StringIO()
        csv.writer(line, lineterminator="\n").writerow(header)
        self._file.write(line.getvalue().encode())

    def write(self, epsilon: float, typed: pd.DataFrame) -> None:
        n = len(typed)
        cols = {"epsilon": pa.array(np.full(n, epsilon))}
        for col in self.schema.columns:
            cols[col.name] = _arrow_column(typed[col.name], col)
        if self.id_column:
            cols[self.id_column] = pa.array(np.arange(n, dtype=np.int64))
        pa_csv.write_csv(pa.table(cols), self._file,
                         pa_csv.WriteOptions(include_header=False, quoting_style=self.quoting))

    def close(self) -> None:
        self._file.close()
