"""A parameters.json draft from public material only: a public file and, optionally, a data dictionary.

``draft_parameters`` never sees private data.  From the data dictionary (NIST's format: per column a
``values`` object of codes and labels, with ``min`` and ``max`` for numeric columns) it takes each
column's categories or range and its null token; from the public file, every column the dictionary
does not describe: text columns become categorical, whole-number columns with few values
(``draft_max_codes``) become categorical codes, other numbers a range (the public file's least and
largest value) with the precision they are written to, and a lone non-numeric token among numbers
the null token.  The runs
are a starting point (ε 0.1, 1 and 10; δ 1e-10; θ 1).  Everything the curator should check is listed
under the draft's ``review`` key (which a release ignores), with the structure the public file
suggests (derived and null-linked columns, candidate edit rules: ``api.draft_schema`` adds those).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from dpsyn.dataloader.draft_individuals import propose
from dpsyn.dataloader.schema import finer_than_float64
from dpsyn.lib.tuning import T

DRAFT_EPSILONS = (0.1, 1.0, 10.0)
DRAFT_DELTA = 1e-10


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _decimals(texts) -> int:
    return max((len(t.split(".", 1)[1]) for t in texts if "." in t and "e" not in t.lower()), default=0)


def _propose_precision(out: dict, name: str, decimals: int, notes: list[str]) -> None:
    """``out["precision"] = decimals`` where a schema may declare it (at most 15, and a grid float64 holds at the
    entry's range); else none, and a note says why (values written to more digits than float64 keeps)."""
    why = "more than 15" if decimals > 15 else finer_than_float64(out["min"], out["max"], decimals)
    if why:
        notes.append(f"{name}: its values are written with {decimals} decimals, {why}: no precision proposed (any "
                     f"float inside a bin); give one if the values have fewer real decimals")
    else:
        out["precision"] = decimals


def _whole(values) -> bool:
    return all(float(v).is_integer() for v in values)


def from_dictionary(name: str, entry: Mapping[str, Any], notes: list[str]) -> dict | None:
    """A schema entry from a data-dictionary entry (its ``values`` object), or None when it gives none."""
    values = entry.get("values") if isinstance(entry, Mapping) else None
    if not isinstance(values, Mapping) or not values:
        return None
    codes = [str(k) for k in values if k not in ("min", "max")]
    numeric = [c for c in codes if _number(c) is not None]
    tokens = [c for c in codes if _number(c) is None]
    out: dict[str, Any] = {}
    if "min" in values and "max" in values:
        bounds = [float(values["min"]), float(values["max"])] + [float(c) for c in numeric]
        whole = _whole(bounds)
        out["dtype"] = "int" if whole else "float"
        low, high = min(bounds), max(bounds)
        out["min"], out["max"] = (int(low), int(high)) if whole else (low, high)
        if not whole:
            _propose_precision(out, name, _decimals([str(values["min"]), str(values["max"])] + numeric), notes)
    else:
        whole = bool(numeric) and not tokens[1:] and _whole(float(c) for c in numeric)
        out["dtype"] = "int" if whole else "str"
        out["values"] = sorted(int(float(c)) for c in numeric) if whole else sorted(codes)
        tokens = tokens if whole else []
    if len(tokens) == 1:
        out["null"] = tokens[0]
    elif len(tokens) > 1:
        notes.append(f"{name}: the dictionary lists several non-numeric codes ({', '.join(tokens)}); only one can be "
                     f"the null token: edit this entry")
    return out


def from_public(name: str, text: pd.Series, notes: list[str]) -> dict:
    """A schema entry from a public column's text."""
    cells = text.astype(str).str.strip()
    present = cells[cells != ""]
    numbers = pd.to_numeric(present, errors="coerce")
    tokens = sorted(set(present[numbers.isna()]))
    values = numbers.dropna()
    if len(values) and len(tokens) <= 1 and len(values) >= len(present) / 2:
        out: dict[str, Any] = {}
        if tokens:
            out["null"] = tokens[0]
        distinct = np.unique(values.to_numpy())
        if _whole(distinct) and len(distinct) <= T.draft_max_codes:
            return {"dtype": "int", "values": [int(v) for v in distinct], **out}
        whole = _whole(distinct)
        out = {"dtype": "int" if whole else "float", "min": int(distinct[0]) if whole else float(distinct[0]),
               "max": int(distinct[-1]) if whole else float(distinct[-1]), **out}
        if not whole:
            _propose_precision(out, name, _decimals(present[numbers.notna()]), notes)
        notes.append(f"{name}: range [{out['min']}, {out['max']}] is the public file's; widen it if the private "
                     f"data may go beyond (values outside are clipped or refused)")
        return out
    if (cells == "").any():
        notes.append(f"{name}: empty cells in the public file; they are kept as the category \"\"")
    return {"dtype": "str", "values": sorted(set(cells))}


def draft_parameters(public: pd.DataFrame | None, dictionary: Mapping[str, Any] | None = None,
                     max_records: int | None = None, id_column: str | None = None) -> dict:
    """A parameters dict (runs, schema, review) from a public table (text) and a data dictionary;
    reads nothing else.  ``id_column``: the public file's individual ids (not a schema column), from which
    θ, the clock and the ``individual`` section are proposed (dataloader/draft_individuals.py).  ValueError
    when neither names any column."""
    dictionary = dict(dictionary or {})
    columns = list(public.columns) if public is not None else list(dictionary)
    columns = [c for c in columns if c != id_column]
    if not columns:
        raise ValueError("neither the public file nor the dictionary names any column")
    notes: list[str] = []
    schema = {}
    for name in columns:
        entry = from_dictionary(name, dictionary.get(name, {}), notes) if name in dictionary else None
        if entry is None:
            if public is None or name not in public.columns:
                notes.append(f"{name}: no values in the dictionary and no public column: write its entry")
                continue
            entry = from_public(name, public[name], notes)
        elif public is not None and name in public.columns:
            notes.append(f"{name}: from the data dictionary")
        schema[name] = entry
    rows = len(public) if public is not None else 0
    max_records = max_records or max(100_000, 10 ** math.ceil(math.log10(max(rows, 1) * 10)))
    extra: dict[str, Any] = {}
    if public is not None and id_column is not None and id_column in public.columns:
        extra, found = propose(public, id_column, schema)
        notes += found
    theta = extra.pop("max_records_per_individual", 1)
    runs = [{"epsilon": e, "delta": DRAFT_DELTA, "max_records": max_records, "max_records_per_individual": theta}
            for e in DRAFT_EPSILONS]
    review = [
        "runs: choose epsilon (0.1 strong privacy, 10 weak), delta far below 1/rows, max_records (an upper bound on "
        f"the rows) and max_records_per_individual (the most rows one person has; {theta} here) (docs/options.md)",
        *notes,
    ]
    for group in ("PUMA", "YEAR"):
        if group in schema:
            review.append(f"{group}: a group column by default (synthesis per cell of PUMA × YEAR; --group-columns)")
    return {"runs": runs, "schema": schema, **extra, "review": review}
