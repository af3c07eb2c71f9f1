"""How well synthetic individuals (rows linked by an id column) match the real ones.

Evaluation reads real data: it spends no budget and none of its numbers are differentially private.

Per table, from its ids: the distribution of rows per individual.  With the parameters' ``individual``
section (dataloader/individuals.py), each individual's rows are taken in the order of its clock (YEAR):

* ``stable``: the share of individuals with two rows or more whose stable columns hold one value each (one
  evaluation bin, for a numeric column);
* ``advance``: the share of those whose advancing columns move by the clock's difference between every two
  consecutive rows (AGE up by the years between them);
* ``transitions``: per followed column, the table of (value in one row, value in the next row) over every
  pair of consecutive rows, on the evaluation bins.

Against the real table: the total variation distance of rows per individual and of each transition table
(1.0 where one side has no pair of consecutive rows and the other has some), and for each transition table
the least TVD that any table with the synthetic table's own margins (the codes its pairs start from and end
at) could reach (``margins_floor``): what relinking the same rows, without changing who starts or ends a pair,
could at best achieve; the rest of the error is in the synthetic rows' codes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from scipy.optimize import linprog

from dpsyn.dataloader.individuals import Individual


@dataclass(frozen=True)
class Individuals:
    """One table's individuals: rows per individual (counts by size), and with a declaration the shares of
    individuals (two rows or more) whose stable columns agree and whose advancing columns advance, and each
    followed column's transition counts."""

    sizes: dict[int, int]
    linked: int  # individuals with two rows or more
    stable: float | None
    advance: float | None
    transitions: dict[str, dict[tuple[int, int], int]]


def individuals(ids: pd.Series, table: pd.DataFrame, codes: np.ndarray, names: list[str],
                declared: Individual | None) -> Individuals:
    """``ids``: each row's individual (text); ``table``: the rows as text; ``codes``: their evaluation codes
    (columns in ``names`` order)."""
    person = pd.factorize(ids.astype(str).str.strip())[0]
    counts = np.bincount(person)
    sizes = dict(zip(*np.unique(counts, return_counts=True)))
    sizes = {int(k): int(v) for k, v in sizes.items()}
    linked = int((counts >= 2).sum())
    if declared is None:
        return Individuals(sizes, linked, None, None, {})
    # rows in the clock's order: its codes (schema order, or bins); its numbers measure the steps of advances
    step = codes[:, names.index(declared.clock)] if declared.clock else np.zeros(len(table), dtype=np.int32)
    clock = _numbers(table[declared.clock]) if declared.clock else np.zeros(len(table))
    order = np.lexsort((step, person))
    person, clock = person[order], clock[order]
    same = person[1:] == person[:-1]  # consecutive rows of one individual
    many = counts[person] >= 2
    stable = advance = None
    if linked:
        ok = np.ones(len(person), dtype=bool)  # per row: agrees with the individual's previous row
        for name in declared.stable:
            values = codes[order, names.index(name)]
            ok[1:] &= ~same | (values[1:] == values[:-1])
        stable = _share(person, ok, many) if declared.stable else None
        ok = np.ones(len(person), dtype=bool)
        for name, _ in declared.advances:
            values = _numbers(table[name])[order]
            with np.errstate(invalid="ignore"):
                ok[1:] &= ~same | np.isclose(values[1:] - values[:-1], clock[1:] - clock[:-1])
        advance = _share(person, ok, many) if declared.advances else None
    transitions = {}
    for name in declared.follow:
        values = codes[order, names.index(name)]
        pairs, counts = np.unique(np.column_stack([values[:-1][same], values[1:][same]]), axis=0, return_counts=True)
        transitions[name] = {(int(a), int(b)): int(n) for (a, b), n in zip(pairs, counts)}
    return Individuals(sizes, linked, stable, advance, transitions)


def _numbers(text: pd.Series) -> np.ndarray:
    return pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _share(person: np.ndarray, ok: np.ndarray, many: np.ndarray) -> float:
    """The share of individuals (among those with ``many`` rows) all of whose rows are ``ok``."""
    bad = np.zeros(person.max() + 1, dtype=bool)
    np.logical_or.at(bad, person, ~ok)
    linked = np.unique(person[many])
    return float(1.0 - bad[linked].mean())


def _tvd(real: dict, synthetic: dict) -> float:
    """Total variation distance of two count tables (dicts keyed alike); 1.0 where exactly one is empty."""
    total_r, total_s = sum(real.values()), sum(synthetic.values())
    if not total_r or not total_s:
        return 0.0 if total_r == total_s else 1.0
    keys = set(real) | set(synthetic)
    return 0.5 * sum(abs(real.get(k, 0) / total_r - synthetic.get(k, 0) / total_s) for k in keys)


def margins_floor(real: dict, synthetic: dict) -> float:
    """The least TVD between the real transition table (counts keyed (a, b)) and any table with the synthetic
    one's margins (the shares of pairs from each a and to each b): 1 minus the largest overlap, where the overlap
    m_ab is at most the real share of (a, b) and sums, over each a (each b), to at most the synthetic margin.  Any
    such overlap can be completed into a table with those margins (what the margins leave has equal totals on
    both sides), so this is exact.  1.0 or 0.0 where a side has no pairs, as ``_tvd``."""
    total_r, total_s = sum(real.values()), sum(synthetic.values())
    if not total_r or not total_s:
        return 0.0 if total_r == total_s else 1.0
    cells = sorted(real)
    froms = sorted({a for a, _ in cells} | {a for a, _ in synthetic})
    tos = sorted({b for _, b in cells} | {b for _, b in synthetic})
    row, col = {a: i for i, a in enumerate(froms)}, {b: i for i, b in enumerate(tos)}
    row_margin, col_margin = np.zeros(len(froms)), np.zeros(len(tos))
    for (a, b), n in synthetic.items():
        row_margin[row[a]] += n / total_s
        col_margin[col[b]] += n / total_s
    upper = np.array([real[c] / total_r for c in cells])
    a_ub = np.zeros((len(froms) + len(tos), len(cells)))
    for k, (a, b) in enumerate(cells):
        a_ub[row[a], k] = a_ub[len(froms) + col[b], k] = 1.0
    best = linprog(-np.ones(len(cells)), A_ub=a_ub, b_ub=np.r_[row_margin, col_margin],
                   bounds=list(zip(np.zeros(len(cells)), upper)), method="highs")
    return float(np.clip(1.0 + best.fun, 0.0, 1.0)) if best.status == 0 else float("nan")


def compare(real: Individuals, synthetic: Individuals) -> dict:
    """The scores of synthetic individuals against the real ones (module doc)."""
    n = sum(synthetic.sizes.values())
    out: dict[str, Any] = {"individuals": n, "rows_per_individual": sum(k * v for k, v in synthetic.sizes.items()) / max(n, 1),
           "rows_per_individual_tvd": _tvd(real.sizes, synthetic.sizes)}
    if synthetic.stable is not None or real.stable is not None:
        out["stable_agree"] = synthetic.stable
        out["advance"] = synthetic.advance
    if real.transitions:
        out["transitions_tvd"] = {c: _tvd(t, synthetic.transitions.get(c, {})) for c, t in real.transitions.items()}
        out["transitions_margins_floor"] = {c: margins_floor(t, synthetic.transitions.get(c, {}))
                                            for c, t in real.transitions.items()}
    return out
