"""Staged writing: output files appear all together or not at all.

``StagedFiles`` writes into a hidden staging folder beside the output and moves every file
into place in one journaled commit (see its docstring for what a killed run leaves and how the
next run completes or removes it); ``SubmissionWriter`` streams runs into one
Sprint-2-shaped CSV; ``ReleaseFiles`` writes a release with both (the submission and one ledger
per run).
"""
from __future__ import annotations

import csv
import glob
import io
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from dpsyn.dataloader.reading import DataError
from dpsyn.dataloader.schema import CATEGORICAL, Column, Schema
from dpsyn.lib.runtime.interrupts import held

log = logging.getLogger(__name__)


def check_writable(output: Path) -> Path:
    """Create ``output``'s folder if needed, check it is writable and clear what a killed earlier release
    into it left (``recover``); called before any private data is read."""
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
    recover(output)
    return output


class StagedFiles:
    """Write several output files so that either all of them appear or none does.

    ``StagedFiles(output)`` names the release by its main file; every file it writes lies in that
    file's folder.  ``path(final)`` gives where to write ``final`` meanwhile: a hidden staging
    folder ``.NAME.staging-*`` beside it, marked with this process's id.  ``commit()`` is the one
    all-or-nothing step: with SIGINT and SIGTERM held, it lists the files in a manifest, renames
    the staging folder to ``.NAME.commit`` (atomic: from here the release counts as written),
    moves each file into place and removes the folder.  A process killed outright during those
    moves leaves ``.NAME.commit``, and the next ``StagedFiles`` or ``check_writable`` for the same
    output completes it (``recover``); a process killed while writing leaves a staging folder
    whose process is gone, which the next one removes.  Leaving the ``with`` block without a
    commit (an exception, SystemExit, KeyboardInterrupt) removes the staging folder.
    """

    def __init__(self, output: str | Path):
        self.output = Path(output)
        self.folder = self.output.parent
        recover(self.output)
        self._dir: Path | None = Path(tempfile.mkdtemp(prefix=f".{self.output.name}{STAGING}", dir=self.folder))
        (self._dir / OWNER).write_text(_owner(os.getpid()) + "\n")
        _ACTIVE.add(self._dir)
        self._finals: list[Path] = []

    def path(self, final: str | Path) -> Path:
        final = Path(final)
        if final.parent.resolve() != self.folder.resolve():
            raise ValueError(f"{final} is not in {self.folder}, the folder of {self.output}")
        if final.name in (OWNER, MANIFEST) or final in self._finals:
            raise ValueError(f"{final} is staged twice or has a reserved name")
        self._finals.append(final)
        assert self._dir is not None, "staged after the commit or discard"
        return self._dir / final.name

    def commit(self) -> list[Path]:
        """Move every staged file into place as one step; a stop signal meanwhile is held and,
        once the files are in place, logged (the release is complete and kept)."""
        assert self._dir is not None, "committed twice or after a discard"
        with held() as stops:
            (self._dir / MANIFEST).write_text(json.dumps([f.name for f in self._finals]) + "\n")
            journal = _journal(self.output)
            os.rename(self._dir, journal)
            _ACTIVE.discard(self._dir)
            self._dir = None
            try:
                _finish(journal)
            except OSError as exc:
                raise OSError(f"the commit of {self.output} was cut short ({exc.strerror or exc}); the next "
                              f"release into {self.output} completes it") from None
            _COMMITTED.extend(self._finals)
        if stops:
            log.warning("a stop signal arrived while the output was being committed; the commit was completed, "
                        "so the release is whole: %s", ", ".join(str(f) for f in self._finals))
        return list(self._finals)

    def discard(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            _ACTIVE.discard(self._dir)
            self._dir = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.discard()
        return False


STAGING, COMMIT, OWNER, MANIFEST = ".staging-", ".commit", "owner.pid", "manifest.json"
_COMMITTED: list[Path] = []
_ACTIVE: set[Path] = set()  # this process's open staging folders


def committed_paths() -> list[Path]:
    """Every file this process has committed so far (for a truthful message after a late stop signal)."""
    return list(_COMMITTED)


def _journal(output: Path) -> Path:
    return output.parent / f".{output.name}{COMMIT}"


def _finish(journal: Path) -> int:
    """Move the files a commit folder's manifest lists into place, then remove it; how many moved."""
    names = json.loads((journal / MANIFEST).read_text())
    moved = 0
    for name in names:
        if (journal / name).exists():
            os.replace(journal / name, journal.parent / name)
            moved += 1
    shutil.rmtree(journal)
    return moved


def _owner(pid: int) -> str:
    """A process's id and start time (from /proc where there is one), so that a reused id is not
    mistaken for the process that wrote a staging folder."""
    try:
        start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        start = ""
    return f"{pid} {start}".strip()


def _running(owner: str) -> bool:
    """Whether the process that wrote ``owner`` (see ``_owner``) still runs."""
    try:
        pid = int(owner.split()[0])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return False
    except PermissionError:
        pass
    return _owner(pid) == owner


def recover(output: Path) -> None:
    """Complete a commit into ``output`` that a killed process left half done, and remove the
    staging folders of processes that died before committing; DataError when a live process is
    writing the same output now."""
    output = Path(output)
    folder = output.parent if str(output.parent) else Path(".")
    journal = _journal(output)
    if (journal / MANIFEST).is_file():
        moved = _finish(journal)
        log.warning("%s: an earlier release was killed while its files were moved into place; its commit is now "
                    "complete (%d file(s) moved)", output, moved)
    elif journal.is_dir():  # renamed but the manifest unreadable: cannot happen by our own steps
        raise DataError(f"{journal} is left from an interrupted commit but has no manifest; remove it by hand")
    leftovers = list(folder.glob(f".{glob.escape(output.name)}{STAGING}*"))
    leftovers += list(folder.glob(f".{glob.escape(output.name)}.*.partial"))  # earlier versions' temporaries
    removed = 0
    for path in leftovers:
        if path in _ACTIVE:
            continue
        if path.is_dir():
            try:
                owner = (path / OWNER).read_text().strip()
            except OSError:
                owner = ""
            if owner and _running(owner):
                raise DataError(f"another release (process {owner.split()[0]}) is writing {output} now; wait for "
                                f"it or choose another output")
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed += 1
    if removed:
        log.warning("%s: removed %d unfinished staging folder(s) or file(s) left by a release that was killed "
                    "before it committed", output, removed)


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


WRITE_ROWS = 1 << 20  # rows turned into CSV text at a time


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

    def write(self, epsilon: float, typed: pd.DataFrame, individuals: np.ndarray | None = None) -> None:
        """Appends one run's rows, WRITE_ROWS at a time (the text of a column with a null token is built
        per slice, not for the whole table); ids are ``individuals`` (each row's synthetic individual) where
        given, else the row's number (each row its own individual)."""
        for start in range(0, len(typed), WRITE_ROWS):
            rows = typed.iloc[start:start + WRITE_ROWS]
            cols = {"epsilon": pa.array(np.full(len(rows), epsilon))}
            for col in self.schema.columns:
                cols[col.name] = _arrow_column(rows[col.name], col)
            if self.id_column:
                cols[self.id_column] = pa.array(np.arange(start, start + len(rows), dtype=np.int64)
                                                if individuals is None else individuals[start:start + len(rows)])
            pa_csv.write_csv(pa.table(cols), self._file,
                             pa_csv.WriteOptions(include_header=False, quoting_style=self.quoting))

    def close(self) -> None:
        self._file.close()


def ledger_path(output: Path, epsilon: float) -> Path:
    """Where the ledger of the run with ``epsilon`` goes, beside the submission."""
    output = Path(output)
    return output.with_name(f"{output.stem}.ledger.eps{epsilon:g}.json")


class ReleaseFiles:
    """The submission CSV (every run; fresh ids when the private table had an id column) and one ledger JSON
    per run, written run by run into a staging folder: all files appear together at ``commit`` or none does
    (leaving the ``with`` block without a commit removes them)."""

    def __init__(self, output: Path, schema: Schema, id_column: str | None):
        self.output, self.schema, self.id_column = output, schema, id_column

    def __enter__(self) -> "ReleaseFiles":
        self.staged = StagedFiles(self.output).__enter__()
        self.writer = SubmissionWriter(self.staged.path(self.output), self.schema, self.id_column)
        return self

    def add(self, r) -> None:
        """Writes one run's rows and ledger (staged) from a ``stages.run.RunRelease``; its seconds go to
        ``r.timings['writing']``."""
        start = time.perf_counter()
        self.writer.write(r.epsilon, r.table, r.individuals)
        self.staged.path(ledger_path(self.output, r.epsilon)).write_text(r.ledger.to_json() + "\n")
        r.timings["writing"] = time.perf_counter() - start

    def commit(self) -> list[Path]:
        self.writer.close()
        return self.staged.commit()

    def __exit__(self, *exc) -> None:
        self.writer.close()
        self.staged.__exit__(*exc)
