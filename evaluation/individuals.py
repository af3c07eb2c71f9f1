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
its margins floor (``margins_floor``): the least TVD of any table whose pairs start from and end at the same
codes as the synthetic pairs at each step of the clock.  No linking of the synthetic rows that keeps which
rows start and end pairs at each step gets below it (keys, homes and whole counts may keep a linking above
it), so it bounds what linking alone could mend; the error up to it is in the synthetic rows' codes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import linprog
from scipy.sparse import coo_array

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
    # per followed column: (clock code of a pair's first row, of its second, a, b) -> count
    steps: dict[str, dict[tuple[int, int, int, int], int]]

    @property
    def transitions(self) -> dict[str, dict[tuple[int, int], int]]:
        """Each followed column's pairs (a, b) pooled over the clock."""
        out: dict[str, dict[tuple[int, int], int]] = {}
        for name, counts in self.steps.items():
            pooled = out.setdefault(name, {})
            for (_, _, a, b), n in counts.items():
                pooled[a, b] = pooled.get((a, b), 0) + n
        return out


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
    steps = {}
    at = step[order]
    for name in declared.follow:
        values = codes[order, names.index(name)]
        pairs, counts = np.unique(np.column_stack([at[:-1][same], at[1:][same], values[:-1][same], values[1:][same]]),
                                  axis=0, return_counts=True)
        steps[name] = {(int(s), int(t), int(a), int(b)): int(n) for (s, t, a, b), n in zip(pairs, counts)}
    return Individuals(sizes, linked, stable, advance, steps)


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
    """The least TVD between the real transition table (counts keyed (a, b), pooled over the clock) and any table
    whose pairs at each step start from and end at the same codes as the synthetic pairs there (``synthetic``:
    counts keyed (step's first clock code, its second, a, b)): 1 minus the largest overlap, m[g, a, b] >= 0 for
    each step g, summing over each a (each b) to at most the synthetic share of pairs from a (to b) at g, and
    over the steps to at most the real share of (a, b).  At each step, what such an overlap leaves of the
    margins has equal totals on both sides and so completes into a table with them, which can only add to the
    overlap: the bound is exact.  1.0 or 0.0 where a side has no pairs, as ``_tvd``."""
    total_r, total_s = sum(real.values()), sum(synthetic.values())
    if not total_r or not total_s:
        return 0.0 if total_r == total_s else 1.0
    cells = sorted(c for c, n in real.items() if n > 0)
    groups = sorted({(s, t) for s, t, _, _ in synthetic})
    margins: dict[tuple, float] = {}  # (g, 0, a) and (g, 1, b) -> synthetic share
    for (s, t, a, b), n in synthetic.items():
        for key in (((s, t), 0, a), ((s, t), 1, b)):
            margins[key] = margins.get(key, 0.0) + n / total_s
    limits: list[tuple] = list(margins) + cells  # a constraint each: a step's margin, then a real cell's share
    index = {key: i for i, key in enumerate(limits)}
    # an overlap only where the step has pairs from a and to b
    variables = [(g, a, b) for g in groups for a, b in cells if (g, 0, a) in margins and (g, 1, b) in margins]
    if not variables:
        return 1.0
    rows = [index[key] for g, a, b in variables for key in ((g, 0, a), (g, 1, b), (a, b))]
    columns = np.repeat(np.arange(len(variables)), 3)
    upper = np.array([margins[key] for key in limits[:len(margins)]] + [real[c] / total_r for c in cells])
    matrix = coo_array((np.ones(len(rows)), (rows, columns)), shape=(len(limits), len(variables)))
    best = linprog(-np.ones(len(variables)), A_ub=matrix, b_ub=upper, bounds=(0, None), method="highs")
    if best.status != 0:  # always feasible (no overlap) and bounded: a failure is numerical
        raise RuntimeError(f"margins floor: the linear program failed ({best.message})")
    return float(np.clip(1.0 + best.fun, 0.0, 1.0))


def compare(real: Individuals, synthetic: Individuals) -> dict:
    """The scores of synthetic individuals against the real ones (module doc)."""
    n = sum(synthetic.sizes.values())
    out: dict[str, Any] = {"individuals": n, "rows_per_individual": sum(k * v for k, v in synthetic.sizes.items()) / max(n, 1),
           "rows_per_individual_tvd": _tvd(real.sizes, synthetic.sizes)}
    if synthetic.stable is not None or real.stable is not None:
        out["stable_agree"] = synthetic.stable
        out["advance"] = synthetic.advance
    pooled, pooled_synthetic = real.transitions, synthetic.transitions
    if pooled:
        out["transitions_tvd"] = {c: _tvd(t, pooled_synthetic.get(c, {})) for c, t in pooled.items()}
        out["transitions_margins_floor"] = {c: margins_floor(t, synthetic.steps.get(c, {})) for c, t in pooled.items()}
    return out
