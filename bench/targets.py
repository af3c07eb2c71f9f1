"""Where the default release falls behind the histogram, MST or AIM, or behind itself at a smaller ε, read off.

    python bench/targets.py [--out bench/RESULTS.md]

Reads the accuracy and generalization tables of ``--out`` (means of 3 seeds each; no run of its own) and lists
every dataset × ε where dpsyn is behind: on the Sprint-2 score or 2-way TVD against the histogram; on 2-way TVD,
decoded and encoded, against MST and AIM, and on the Sprint-2 score where the dataset has groups (the per-group
score); and every dpsyn figure (score, decoded and encoded 1-, 2- and 3-way TVD, the classifier's accuracy and
macro F1) that gets worse from ε 0.1 to 1 or from 1 to 10.  No allowance is made for seed noise: each gap is
printed, the reader judges it.  The page section "## Where the default falls short" of ``--out`` is replaced by
the list; bench/results.py and bench/generalization.py rewrite it from the tables they write.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench import sections  # noqa: E402
from bench.generalization import SECTION as GENERALIZATION, SUITE  # noqa: E402

SECTION = "## Where the default falls short"
# the accuracy table's datasets with group columns (bench/run_bench.py), then the suite's
GROUPED = {"demo", "acs_split", "ct_drug_deaths"} | {name for name, table in SUITE.items() if table.groups}
# figure: (column of the tables, index inside an "a / b / c" cell, whether higher is better)
FIGURES = {"Sprint-2 score": ("Sprint-2 score", 0, True), "2-way TVD": ("TVD 2-way", 0, False),
           "encoded 2-way TVD": ("encoded TVD 1-way / 2-way / 3-way", 1, False)}
OWN = {**FIGURES, "1-way TVD": ("TVD 1-way", 0, False), "3-way TVD": ("TVD 3-way", 0, False),
       "encoded 1-way TVD": ("encoded TVD 1-way / 2-way / 3-way", 0, False),
       "encoded 3-way TVD": ("encoded TVD 1-way / 2-way / 3-way", 2, False),
       "classifier accuracy": ("accuracy (synthetic-trained; real-trained)", 0, True),
       "classifier macro F1": ("macro F1 (synthetic-trained; real-trained)", 0, True)}


def rows(section: str) -> dict[tuple[str, str, float], dict[str, str]]:
    """Each table row of ``section`` by (dataset, method, ε), as {column: cell}."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    if not lines:
        return {}
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    out = {}
    for line in lines[2:]:
        cells = dict(zip(header, (cell.strip() for cell in line.strip("|").split("|"))))
        out[cells["dataset"], cells["method"], float(cells["eps"])] = cells
    return out


def value(row: dict[str, str], figure: tuple[str, int, bool]) -> float | None:
    """The figure's number in ``row`` (a cell "a / b / c" or "synthetic; real" read at its index), None where the
    row has none."""
    column, index, _ = figure
    try:
        number = float(row[column].replace(";", "/").split("/")[index])
    except (KeyError, IndexError, ValueError):
        return None
    return None if math.isnan(number) else number


def shortfalls(table: dict[tuple[str, str, float], dict[str, str]]) -> list[tuple[str, float, str, str, float, float]]:
    """(dataset, ε, figure, the other side, dpsyn's value, the other's value) for every comparison dpsyn loses."""
    out = []
    for (dataset, method, eps), row in sorted(table.items()):
        if method != "dpsyn":
            continue
        against = [("histogram", name) for name in ("Sprint-2 score", "2-way TVD")]
        against += [(peer, name) for peer in ("mst", "aim") for name in FIGURES
                    if name != "Sprint-2 score" or dataset in GROUPED]
        for other, name in against:
            theirs = table.get((dataset, other, eps))
            ours_value, their_value = value(row, FIGURES[name]), theirs and value(theirs, FIGURES[name])
            if ours_value is None or their_value is None:
                continue
            if (ours_value < their_value) if FIGURES[name][2] else (ours_value > their_value):
                out.append((dataset, eps, name, other, ours_value, their_value))
        later = sorted(e for d, m, e in table if d == dataset and m == "dpsyn" and e > eps)
        for name, figure in OWN.items():  # against the next larger ε that has this figure
            now = value(row, figure)
            found = [(e, v) for e in later if (v := value(table[dataset, "dpsyn", e], figure)) is not None]
            if now is not None and found and ((found[0][1] < now) if figure[2] else (found[0][1] > now)):
                out.append((dataset, found[0][0], name, f"dpsyn at ε {eps:g}", found[0][1], now))
    return out


def section(page: str) -> str:
    """The page section: a heading, what it reads, and a table of every shortfall (or "None.").  SystemExit where
    the page lacks the accuracy or the generalization table."""
    from bench.results import HEADING as ACCURACY  # here: bench/results.py imports this module
    parts = {heading: rows(sections.existing(page, heading)) for heading in (ACCURACY, GENERALIZATION)}
    missing = [heading for heading, found in parts.items() if not found]
    if missing:
        raise SystemExit(f"error: no table under {' and '.join(repr(h) for h in missing)}: nothing to compare")
    found = shortfalls({key: row for part in parts.values() for key, row in part.items()})
    lines = [SECTION, "",
             "`python bench/targets.py` (bench/results.py and bench/generalization.py rerun it): read off the "
             "accuracy and generalization tables above (their seeds and AIM's settings as they state; no allowance "
             "for seed noise), every comparison the default (dpsyn) loses: against the histogram on the Sprint-2 "
             "score and 2-way TVD; against MST and AIM on 2-way TVD, decoded and encoded, and on the Sprint-2 score "
             "where the dataset has groups; and each of its own figures (score, TVDs, the classifier's accuracy and "
             "macro F1) that gets worse with more budget (ε 0.1 → 1 → 10).", ""]
    if not found:
        return "\n".join(lines + ["None.", ""])
    lines += ["| dataset | ε | figure | dpsyn | against | their figure |", "|---|---|---|---|---|---|"]
    lines += [f"| {d} | {e:g} | {name} | {ours:g} | {other} | {theirs:g} |"
              for d, e, name, other, ours, theirs in found]
    return "\n".join(lines + [""])


def refreshed(page: str) -> str:
    """``page`` with its section rewritten from its tables (left as it is where the page has no tables yet)."""
    try:
        return sections.replaced(page, SECTION, section(page))
    except SystemExit:
        return page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    page = args.out.read_text()
    text = section(page)
    args.out.write_text(sections.replaced(page, SECTION, text))
    print(text)


if __name__ == "__main__":
    main()
