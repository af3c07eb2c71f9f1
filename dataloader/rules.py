"""Edit rules: the optional ``constraints`` section of a parameters file (our extension).

``"constraints": ["AGEP < 15 => PINCP = N", "AGEP < 3 <=> EDU = N", ...]`` lists
impossible combinations.  A rule is ``CONDITION => CONCLUSION`` (every record meeting the
condition meets the conclusion), ``A <=> B`` (both directions) or one atom ``COL OP X`` that
every record meets; each side is one or more atoms joined by ``and``:

* ``COL = V``, ``COL != V``, ``COL in {V1, V2}``: V a value of the column or its null token;
* ``COL < X``, ``<=``, ``>``, ``>=``: X a number, numeric columns only (false on a null);
* ``COL < COL2`` (``<=``, ``>``, ``>=``): two numeric columns compared (false where either is null),
  as what a ``=>`` rule concludes or alone, e.g. ``NOC != N and NPF != N => NOC < NPF``, ``NPF > NOC``.

A null satisfies ``= N`` and ``!= V`` for every other V.  Rules are checked against the
schema (unknown column, value outside the domain, bad syntax: one line each).  They are
public: synthesis keeps every record inside them, which costs no budget.  So that a rule
can be enforced on codes, every threshold of a rule is also a bin edge of its column
(:func:`rule_cuts`), which makes each atom a union of whole bins; two compared columns are
each cut at the other's edges, so that a pair of their bins either decides the comparison
or is one interval, where decoding orders the two values (dataloader/comparisons.py).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpsyn.dataloader.grid import steps
from dpsyn.dataloader.schema import CATEGORICAL, Column, category_list

ORDER_OPS = ("<", "<=", ">", ">=")
_TOKEN = re.compile(r"<=>|⇔|=>|⇒|<=|>=|!=|≤|≥|≠|=|<|>|\{|\}|,|[^\s<>=!{},⇒⇔≤≥≠]+")
_ALIASES = {"⇔": "<=>", "⇒": "=>", "≤": "<=", "≥": ">=", "≠": "!="}
NULL = "__null__"  # an atom value meaning the column's null token


@dataclass(frozen=True)
class Atom:
    """``column op values``: op one of = != in < <= > >=; values: categories or numbers, NULL for the null token;
    or ``column op other`` (an order op, ``values`` empty): two numeric columns compared."""

    column: str
    op: str
    values: tuple
    other: str | None = None

    def holds_pair(self, x, y) -> np.ndarray:
        """Boolean per row of a comparison atom: ``x`` this column's values, ``y`` the other's (floats, NaN =
        null; false where either is null)."""
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[self.op] & ~np.isnan(x) & ~np.isnan(y)

    def holds(self, values, col: Column) -> np.ndarray:
        """Boolean per value (typed: a Categorical, or floats with NaN = null)."""
        if col.kind == CATEGORICAL:
            cats = category_list(col)
            codes = np.asarray(pd.Categorical(values, categories=cats).codes)
            allowed = np.zeros(len(cats) + 1, dtype=bool)
            for v in self.values:
                allowed[_category_index(col, v)] = True
            inside = allowed[codes]
            return ~inside if self.op == "!=" else inside
        x = np.asarray(values, dtype=np.float64)
        null = np.isnan(x)
        if self.op in ORDER_OPS:
            (t,) = self.values
            with np.errstate(invalid="ignore"):
                return {"<": x < t, "<=": x <= t, ">": x > t, ">=": x >= t}[self.op] & ~null
        inside = np.zeros(len(x), dtype=bool)
        for v in self.values:
            inside |= null if v == NULL else (x == v)
        return ~inside if self.op == "!=" else inside

    def __str__(self) -> str:
        if self.other is not None:
            return f"{self.column} {self.op} {self.other}"
        shown = ["N" if v == NULL else (f"{v:g}" if isinstance(v, float) else str(v)) for v in self.values]
        if self.op == "in":
            return f"{self.column} in {{{', '.join(shown)}}}"
        return f"{self.column} {self.op} {shown[0]}"


@dataclass(frozen=True)
class Rule:
    """``condition => conclusion`` (atoms joined by and); ``both_ways`` for <=>."""

    text: str
    condition: tuple[Atom, ...]
    conclusion: tuple[Atom, ...]
    both_ways: bool = False

    def patterns(self) -> list[tuple[tuple[Atom, ...], Atom, str]]:
        """Forbidden patterns: (atoms that hold, atom that fails, column repair changes)."""
        out = [(self.condition, atom, atom.column) for atom in self.conclusion]
        if self.both_ways:
            out += [(self.conclusion, atom, self.conclusion[0].column) for atom in self.condition]
        return out

    def columns(self) -> set[str]:
        return {c for a in self.condition + self.conclusion for c in (a.column, a.other) if c is not None}


def _category_index(col: Column, value) -> int:
    cats = category_list(col)
    if value == NULL:
        assert col.null is not None, "a null atom is parsed only for a column with a null token"
        return [str(c) for c in cats].index(col.null)
    return cats.index(value)


def parse_rules(raw: object, columns: dict[str, Column], problems: list[str]) -> tuple[Rule, ...]:
    """The ``constraints`` entry parsed against ``columns``; one line in ``problems`` per bad rule."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
        problems.append("constraints: must be a list of rule strings such as \"AGEP < 15 => PINCP = N\"")
        return ()
    rules = []
    for i, text in enumerate(raw):
        try:
            rules.append(_parse_rule(text, columns))
        except ValueError as exc:
            problems.append(f"constraints[{i}] {text!r}: {exc}")
    seen: dict[str, str] = {}
    for rule in rules:  # settling one comparison must not break another (dataloader/comparisons.py)
        for atom in rule.conclusion:
            for name in (atom.column, atom.other) if atom.other is not None else ():
                if name in seen and seen[name] != str(atom):
                    problems.append(f"constraints: {name} is compared twice ({seen[name]} and {atom}, in "
                                    f"{rule.text!r}); a column may be compared with one other column only")
                seen.setdefault(name, str(atom))
                if columns[name].constant_within:
                    problems.append(f"constraints: {rule.text!r} compares {name}, which is constant within "
                                    f"{', '.join(columns[name].constant_within)}; a comparison cannot move it")
    return tuple(rules)


def _parse_rule(text: str, columns: dict[str, Column]) -> Rule:
    tokens = [_ALIASES.get(t, t) for t in _TOKEN.findall(text)]
    arrows = [i for i, t in enumerate(tokens) if t in ("=>", "<=>")]
    if not arrows and len(tokens) == 3:  # one atom that always holds, e.g. NPF > NOC
        return Rule(text, (), (_parse_atom(tokens, columns),))
    if len(arrows) != 1:
        raise ValueError("needs exactly one => (or <=>) between a condition and a conclusion")
    k = arrows[0]
    condition = _parse_clause(tokens[:k], columns)
    conclusion = _parse_clause(tokens[k + 1:], columns)
    compared = [a for a in condition + conclusion if a.other is not None]
    if compared and (tokens[k] == "<=>" or any(a.other is not None for a in condition)):
        atom = compared[0]
        guard = " and ".join(f"{c} != {columns[c].null}" for c in (atom.column, str(atom.other))
                             if columns[c].null is not None)
        raise ValueError(f"{atom} compares two columns: write it only as what a => rule concludes, or alone "
                         f"(e.g. {guard + ' => ' if guard else ''}{atom})")
    return Rule(text, condition, conclusion, tokens[k] == "<=>")


def _parse_clause(tokens: list[str], columns: dict[str, Column]) -> tuple[Atom, ...]:
    atoms: list[Atom] = []
    current: list[str] = []
    for t in tokens + ["and"]:
        if t.lower() in ("and", "&"):
            if not current:
                raise ValueError("an empty condition or conclusion (write COLUMN OP VALUE)")
            atoms.append(_parse_atom(current, columns))
            current = []
        else:
            current.append(t)
    return tuple(atoms)


def _parse_atom(tokens: list[str], columns: dict[str, Column]) -> Atom:
    shown = " ".join(tokens)
    if len(tokens) < 3:
        raise ValueError(f"cannot read {shown!r} (write COLUMN OP VALUE, e.g. AGEP < 15)")
    name, op, rest = tokens[0], tokens[1].lower(), tokens[2:]
    if name not in columns:
        raise ValueError(f"unknown column {name}")
    col = columns[name]
    if op == "in":
        if rest[0] != "{" or rest[-1] != "}":
            raise ValueError(f"cannot read {shown!r} (write {name} in {{V1, V2}})")
        raw_values = [t for t in rest[1:-1] if t != ","]
        if not raw_values:
            raise ValueError(f"{name} in {{}} lists no value")
    elif op in ("=", "!=") + ORDER_OPS:
        if len(rest) != 1:
            raise ValueError(f"cannot read {shown!r} (write COLUMN OP VALUE)")
        raw_values = rest
    else:
        raise ValueError(f"unknown operator {tokens[1]!r} (use = != < <= > >= in)")
    if op in ORDER_OPS:
        if col.kind == CATEGORICAL:
            raise ValueError(f"{op} needs a numeric column; {name} is categorical (use = or in)")
        token = raw_values[0]
        if token in columns and (_is_number(token) or token == col.null):
            raise ValueError(f"{token!r} is both a column and a {'number' if _is_number(token) else 'null token'} "
                             f"(in {shown}): rename the column to compare with it")
        if token in columns:
            return _comparison(name, op, token, columns)
        if not _is_number(raw_values[0]) and raw_values[0] != col.null:
            raise ValueError(f"{raw_values[0]!r} is neither a number nor a column (in {shown})")
        return Atom(name, op, (_number(name, col, raw_values[0], allow_null=False),))
    try:
        if col.kind == CATEGORICAL:
            values = tuple(_category(name, col, v) for v in raw_values)
        else:
            values = tuple(_number(name, col, v, allow_null=True) for v in raw_values)
    except ValueError as exc:
        if any(v in columns for v in raw_values):
            raise ValueError(f"{exc} (only <, <=, > and >= compare two columns)") from None
        raise
    return Atom(name, op, values)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _comparison(name: str, op: str, other: str, columns: dict[str, Column]) -> Atom:
    """``name op other`` between two numeric columns."""
    if other == name:
        raise ValueError(f"{name} {op} {name} compares a column with itself")
    if columns[other].kind == CATEGORICAL:
        raise ValueError(f"{name} {op} {other}: {other} is categorical; a comparison needs two numeric columns")
    return Atom(name, op, (), other)


def _category(name: str, col: Column, text: str):
    if col.null is not None and text == col.null:
        return NULL
    for v in col.values or ():
        if str(v) == text:
            return v
    raise ValueError(f"{text!r} is not a value of {name}" + (f" (nor its null token {col.null!r})"
                                                              if col.null is not None else ""))


def _number(name: str, col: Column, text: str, allow_null: bool):
    if col.null is not None and text == col.null:
        if allow_null:
            return NULL
        raise ValueError(f"{name}: compare the null token with = or !=, not an order")
    try:
        value = float(text)
    except ValueError:
        null = f" or its null token {col.null!r}" if col.null is not None else " (it has no null token)"
        raise ValueError(f"{text!r} is not a number{null} for {name}") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number for {name}")
    if col.low is not None and col.high is not None and not col.low - 1 <= value <= col.high + 1:
        raise ValueError(f"{value:g} is outside {name}'s range [{col.low:g}, {col.high:g}]")
    return value


def compared(rules) -> dict[str, set[str]]:
    """For each column that a rule compares with another column, those other columns."""
    out: dict[str, set[str]] = {}
    for rule in rules:
        for atom in rule.conclusion:
            if atom.other is not None:
                out.setdefault(atom.column, set()).add(atom.other)
                out.setdefault(atom.other, set()).add(atom.column)
    return out


def rule_cuts(col: Column, rules, precision: int | None = None) -> list[float]:
    """Bin edges that make every atom of ``rules`` on numeric ``col`` a union of whole
    right-closed bins (e, e']: a cut at x for <= and >, just below x for < and >=, both for =.
    Just below x is the value before x that ``col`` can hold: x - 1 for whole numbers, the grid value before x
    where values have ``precision`` decimals (the float before x would be floored back onto x itself), else the
    float before x.  (Comparisons between columns add the other column's edges: dataloader/encoding.py.)"""
    step = 10.0 ** -precision if precision is not None else None
    cuts: list[float] = []
    for rule in rules:
        for atom in rule.condition + rule.conclusion:
            if atom.column != col.name or atom.other is not None:
                continue
            for v in atom.values:
                if v == NULL:
                    continue
                if col.integral:
                    below: float = math.ceil(v) - 1
                elif step is not None:
                    below = round((math.ceil(float(steps(v, step))) - 1) * step, precision)
                else:
                    below = float(np.nextafter(v, -np.inf))
                at = math.floor(v) if col.integral else v
                cuts += {"<=": [at], ">": [at], "<": [below], ">=": [below]}.get(atom.op, [at, below])
    return cuts


def violations(table: pd.DataFrame, rules, columns: dict[str, Column]) -> dict[str, int]:
    """Rows of a typed table that break each rule (by its text)."""
    out = {}
    for rule in rules:
        bad = np.zeros(len(table), dtype=bool)
        for atoms, failing, _ in rule.patterns():
            hold = np.ones(len(table), dtype=bool)
            for a in atoms:
                hold &= a.holds(typed_values(table[a.column]), columns[a.column])
            if failing.other is not None:
                met = failing.holds_pair(typed_values(table[failing.column]), typed_values(table[failing.other]))
                bad |= hold & ~met
            else:
                bad |= hold & ~failing.holds(typed_values(table[failing.column]), columns[failing.column])
        out[rule.text] = int(bad.sum())
    return out


def typed_values(series: pd.Series):
    """A typed column's values as atoms read them: the Categorical's array, or floats with NaN for null."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.array
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
