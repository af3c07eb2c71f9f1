"""Edit rules that compare two numeric columns (``NOC != N and NPF != N => NOC < NPF``): the codes they
forbid, and the values decoding draws inside one interval.

Post-processing only: this reads and rewrites synthetic codes and values, never private data, so it costs no
privacy budget.

The encoder cuts both columns at each other's edges (dataloader/encoding.py).  For a pair of their bins the
comparison holds for every pair of values, for none, or, where the bins overlap, for some.  Synthesis keeps
records out of the pairs where it holds for none (:func:`failing_pairs`, boxes in dataloader/structure.py).
Decoding draws each value inside its bin on its own, so :func:`settle_comparisons` then moves the values of a
pair that still breaks the comparison inside their bins until it holds (swapping them where both columns share
a grid and that is enough).  A column is compared in one rule at most and is never a group-level column
(dataloader/rules.py, dataloader/structure.py), so no move can break another comparison or a group's value.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dpsyn.dataloader.grid import steps
from dpsyn.dataloader.rules import Atom, typed_values


def _as_low_high(atom: Atom) -> tuple[str, str, bool]:
    """The comparison as ``low < high`` (strict) or ``low <= high``: (low column, high column, strict)."""
    assert atom.other is not None, "a comparison of two columns"
    if atom.op in ("<", "<="):
        return atom.column, atom.other, atom.op == "<"
    return atom.other, atom.column, atom.op == ">"


def _value_range(coder) -> tuple[np.ndarray, np.ndarray]:
    """Per code of a numeric column: the smallest and the largest value it decodes to (NaN for the null code)."""
    bins = len(coder.edges) - 1
    # decoding clips to the column's range, which may lie off its grid (min 0.05 with one decimal)
    first = np.maximum([coder.first_value(b) for b in range(bins)], coder.column.low).astype(np.float64)
    last = np.minimum(coder.edges[1:], coder.column.high).astype(np.float64)
    if coder.column.null is not None:
        first, last = np.append(first, np.nan), np.append(last, np.nan)
    return first, last


def failing_pairs(atom: Atom, coders: dict) -> np.ndarray:
    """Boolean matrix (codes of ``atom.column`` × codes of ``atom.other``): True where the comparison fails
    for every pair of values the two codes decode to, a null on either side included."""
    low, high, strict = _as_low_high(atom)
    low_first, _ = _value_range(coders[low])
    _, high_last = _value_range(coders[high])
    with np.errstate(invalid="ignore"):
        fails = low_first[:, None] >= high_last[None, :] if strict else low_first[:, None] > high_last[None, :]
    fails |= np.isnan(low_first)[:, None] | np.isnan(high_last)[None, :]
    return fails if low == atom.column else fails.T


def _on_grid(coder, t: np.ndarray, down: bool, strict: bool) -> np.ndarray:
    """The nearest value on the column's grid below ``t`` (``down``) or above it; ``t`` itself allowed unless
    ``strict``."""
    step = coder.step
    if step is None:
        return (np.nextafter(t, -np.inf if down else np.inf)) if strict else t
    k = steps(t, step)
    k = (np.ceil(k) - 1 if strict else np.floor(k)) if down else (np.floor(k) + 1 if strict else np.ceil(k))
    return np.round(k * step, coder.precision)


def _bin_of(coder, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest value of the bin that holds each of ``values``."""
    first, last = _value_range(coder)
    codes = coder.encode(values)
    return first[codes], last[codes]


def settle_comparisons(typed: pd.DataFrame, rules, coders: dict) -> pd.DataFrame:
    """``typed`` with the values of every record that breaks a comparison rule moved inside their bins until
    the comparison holds: the two values swapped where both columns share a grid and each then stays in its
    bin, else the low column's value lowered (or the high column's raised) to the nearest value that meets
    the other, else the low one set to its bin's smallest value and the high one raised to meet it.  Records
    whose bins cannot meet the comparison (which synthesis never writes) are left as they are."""
    out = typed
    for rule in rules:
        for atoms, failing, _ in rule.patterns():
            if failing.other is None:
                continue
            hold = np.ones(len(out), dtype=bool)
            for a in atoms:
                hold &= a.holds(typed_values(out[a.column]), coders[a.column].column)
            low, high, strict = _as_low_high(failing)
            x, y = typed_values(out[low]), typed_values(out[high])
            with np.errstate(invalid="ignore"):
                rows = np.flatnonzero(hold & ~_meets(x, y, strict) & ~np.isnan(x) & ~np.isnan(y))
            if not len(rows):
                continue
            x, y = x[rows].copy(), y[rows].copy()
            (x_first, x_last), (y_first, y_last) = _bin_of(coders[low], x), _bin_of(coders[high], y)
            met = _meets(x, y, strict)
            if _same_grid(coders[low], coders[high]):  # a swapped value then lies on its new column's grid
                swap = ~met & (y >= x_first) & (y <= x_last) & (x >= y_first) & (x <= y_last) & _meets(y, x, strict)
                x[swap], y[swap] = y[swap], x[swap].copy()
                met |= swap
            lowered = np.minimum(x, _on_grid(coders[low], y, down=True, strict=strict))
            use = ~met & (lowered >= x_first)
            x[use], met = lowered[use], met | use
            raised = np.maximum(y, _on_grid(coders[high], x, down=False, strict=strict))
            use = ~met & (raised <= y_last)
            y[use], met = raised[use], met | use
            both = np.maximum(y, _on_grid(coders[high], x_first, down=False, strict=strict))
            use = ~met & (both <= y_last)
            x[use], y[use] = x_first[use], both[use]
            if out is typed:
                out = typed.copy()
            out[low] = _assign(out[low], rows, x)
            out[high] = _assign(out[high], rows, y)
    return out


def _same_grid(a, b) -> bool:
    return a.precision == b.precision and a.column.integral == b.column.integral


def _meets(x: np.ndarray, y: np.ndarray, strict: bool) -> np.ndarray:
    return x < y if strict else x <= y


def _assign(series: pd.Series, rows: np.ndarray, values: np.ndarray) -> pd.Series:
    """``series`` with ``values`` at positions ``rows``, in its own dtype."""
    out = series.copy()
    out.iloc[rows] = values.astype(np.int64) if isinstance(series.dtype, pd.Int64Dtype) else values
    return out
