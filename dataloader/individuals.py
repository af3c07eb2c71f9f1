"""The optional ``individual`` section of a parameters file (our extension): how one individual's rows relate.

``"individual": {"stable": ["SEX", "RACE"], "advances": {"AGE": "YEAR"}, "follow": ["PUMA", "EMPSTAT"]}``

* ``stable``: columns that never change within an individual;
* ``advances``: numeric columns that move with a ``distinct_per_individual`` column whose values are numbers,
  by its difference between two of the individual's rows (AGE with YEAR, so gaps between waves count);
* ``follow``: columns whose change from one of an individual's rows to the next matters (their transition
  tables), the rows taken in the order of the clock: the ``advances`` target, else the first
  ``distinct_per_individual`` column.

A column has one role at most and the clock none.  Everything is checked against the schema, one line per
problem.  Declared structure is public: it costs no budget.  ``dpsyn score`` scores synthetic individuals by
it (evaluation/individuals.py).
"""
from __future__ import annotations

from dataclasses import dataclass

KEYS = ("stable", "advances", "follow")


@dataclass(frozen=True)
class Individual:
    """Stable columns, (advancing column, clock) pairs, followed columns, and the clock that orders rows."""

    stable: tuple[str, ...] = ()
    advances: tuple[tuple[str, str], ...] = ()
    follow: tuple[str, ...] = ()
    clock: str | None = None


def parse_individual(raw: object, columns: dict, distinct: tuple[str, ...], problems: list[str]) -> Individual | None:
    """The ``individual`` entry checked against ``columns`` (name → schema Column) and the declared
    distinct-per-individual columns; one line in ``problems`` per bad entry."""
    if raw is None:
        return None
    where = "individual"
    declared, distinct = distinct, tuple(d for d in distinct if d in columns and columns[d].kind == "categorical")
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be an object with {', '.join(KEYS)}")
        return None
    for key in sorted(set(raw) - set(KEYS), key=str):
        problems.append(f"{where}: unknown key {key!r} (known: {', '.join(KEYS)})")
    stable = _names(raw.get("stable", []), f"{where}.stable", columns, problems)
    follow = _names(raw.get("follow", []), f"{where}.follow", columns, problems)
    advances_raw = raw.get("advances", {})
    advances: list[tuple[str, str]] = []
    if not isinstance(advances_raw, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in advances_raw.items()):
        problems.append(f"{where}.advances: must map columns to a distinct_per_individual column, "
                        f"e.g. {{\"AGE\": \"YEAR\"}}")
    else:
        for name, clock in advances_raw.items():
            if name not in columns:
                problems.append(f"{where}.advances: {name!r} is not a schema column")
            elif columns[name].kind == "categorical":
                problems.append(f"{where}.advances: {name} must be a numeric column (it moves by a difference)")
            elif clock in declared and clock not in distinct:
                continue  # a bad distinct_per_individual entry: reported there
            elif clock not in distinct:
                problems.append(f"{where}.advances: {name} moves with {clock!r}, which is not a "
                                f"distinct_per_individual column")
            elif not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in columns[clock].values):
                problems.append(f"{where}.advances: {clock}'s values must be numbers (such as years)")
            else:
                advances.append((name, clock))
    roles = list(stable) + [a for a, _ in advances] + list(follow)
    for name in sorted({n for n in roles if roles.count(n) > 1}):
        problems.append(f"{where}: {name} is named more than once (stable, advances, follow: one role at most)")
    clocks = {c for _, c in advances}
    if len(clocks) > 1:
        problems.append(f"{where}.advances: every column must move with one clock, got {', '.join(sorted(clocks))}")
    clock = next(iter(clocks)) if clocks else (distinct[0] if distinct else None)
    if clock is not None and clock in roles:
        problems.append(f"{where}: {clock} orders an individual's rows, so it has no role of its own")
    if (advances or follow) and clock is None:
        problems.append(f"{where}: advances and follow need a distinct_per_individual column to order an "
                        f"individual's rows (e.g. [\"YEAR\"])")
    return Individual(tuple(stable), tuple(advances), tuple(follow), clock)


def _names(value: object, where: str, columns: dict, problems: list[str]) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{where}: must be a list of column names")
        return ()
    for name in value:
        if name not in columns:
            problems.append(f"{where}: {name!r} is not a schema column")
    return tuple(v for v in value if v in columns)
