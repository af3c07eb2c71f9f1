"""The generalization suite: seven public tables the project was never tuned on, every method at every ε.

    python bench/generalization.py [--seeds 3] [--aim-cap 60] [--workers 1] [--methods ...] [--out bench/RESULTS.md]

The tables are ../shared/data/generalization/ (or BENCH_DATA/generalization; SOURCE.md there).  None comes
with a data dictionary, so each schema is written from a public split: a fixed quarter of the table (by
individual for the panel; seed SPLIT_SEED) is set aside as public, and only its rows give the category sets
and numeric ranges; the other three quarters are the private table, released and scored.  Which columns are
categorical and which numeric, the groups, ids and targets follow each table's documentation (``SUITE``).
Private rows with a category the public quarter never shows are left out before the run (their count is
printed: a real release would declare the category), private numbers outside the public range are clipped
by the release itself (``--on-invalid clip``).  The methods get no public file: the split only stands in for
documentation.

Each table runs as ``bench/run_bench.py --datasets D --methods dpsyn histogram mst aim --eps 0.1 1 10`` in its
own process and the page section "## Generalization suite" of ``--out`` is replaced by the tables and the
commands that made them.
"""
from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FOLDER = Path(os.environ.get("BENCH_DATA", ROOT.parent / "shared" / "data")) / "generalization"
SPLIT_SEED = 20261127  # the public quarter's draw
PUBLIC_SHARE = 0.25
NULL = "NA"  # the token an empty cell becomes


@dataclass(frozen=True)
class Table:
    """One suite table as its documentation describes it."""

    file: str
    categorical: tuple[str, ...]
    integer: tuple[str, ...] = ()     # numeric, integer-valued
    real: tuple[str, ...] = ()        # numeric, real-valued
    groups: tuple[str, ...] = ()
    target: str | None = None
    id_column: str | None = None
    theta: int = 1
    distinct: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()     # columns left out (record ids)


SUITE = {
    "gen_rwm5yr": Table("rwm5yr.csv", ("year", "edlevel", "outwork", "female", "married", "kids", "self",
                                       "edlevel1", "edlevel2", "edlevel3", "edlevel4"),
                        ("docvis", "hospvis", "age"), ("hhninc", "educ"), ("year",), "outwork", "id", 5,
                        ("year",)),
    "gen_gss_wages": Table("gss_wages.csv", ("year", "occ10", "occrecode", "childs", "wrkstat", "gender", "educcat",
                                             "maritalcat"), (), ("realrinc", "age", "prestg10"), ("year",), "gender"),
    "gen_fertility": Table("Fertility.csv", ("morekids", "gender1", "gender2", "afam", "hispanic", "other"),
                           ("age", "work"), (), (), "morekids"),
    "gen_diamonds": Table("diamonds.csv", ("cut", "color", "clarity"), ("price",),
                          ("carat", "depth", "table", "x", "y", "z"), (), "cut"),
    "gen_nass_cds": Table("nassCDS.csv", ("dvcat", "dead", "airbag", "seatbelt", "frontal", "sex", "yearacc", "abcat",
                                          "occRole", "deploy", "injSeverity"), ("ageOFocc",), ("weight", "yearVeh"),
                          (), "dead", dropped=("caseid",)),
    "gen_doctor_contacts": Table("DoctorContacts.csv", ("idp", "physlim", "health", "sex", "child", "black"),
                                 ("mdu",), ("lc", "lpi", "fmde", "ndisease", "linc", "lfam", "educdec", "age"), (),
                                 "physlim"),
    "gen_portal_rodents": Table("portal_rodents.csv", ("month", "year", "plot_id", "species_id", "sex", "genus",
                                                       "species", "taxa", "plot_type"), ("day",),
                                ("hindfoot_length", "weight"), ("plot_id", "year"), "sex"),
}


def split(table: Table) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(public quarter, private rest) of the table's text, empty cells as NULL; by individual where it has ids."""
    text = pd.read_csv(FOLDER / table.file, dtype=str, keep_default_na=False).drop(columns=list(table.dropped))
    text = text.replace("", NULL)
    rng = np.random.default_rng(SPLIT_SEED)
    if table.id_column:
        ids = text[table.id_column].unique()
        public_ids = set(rng.choice(ids, size=round(PUBLIC_SHARE * len(ids)), replace=False))
        public = text[table.id_column].isin(public_ids).to_numpy()
    else:
        public = np.zeros(len(text), dtype=bool)
        public[rng.choice(len(text), size=round(PUBLIC_SHARE * len(text)), replace=False)] = True
    return text[public].reset_index(drop=True), text[~public].reset_index(drop=True)


def schema(table: Table, public: pd.DataFrame) -> dict:
    """The schema the public quarter supports: its category sets, its numeric ranges (a null token where it has
    empty cells)."""
    out = {}
    for column in public.columns:
        if column == table.id_column:
            continue
        values = public[column]
        if column in table.categorical:
            out[column] = {"dtype": "str", "values": sorted(values.unique())}
            continue
        numbers = pd.to_numeric(values[values != NULL])
        entry = {"dtype": "int" if column in table.integer else "float",
                 "min": numbers.min().item(), "max": numbers.max().item()}
        if column in table.integer:
            entry = dict(entry, min=int(entry["min"]), max=int(entry["max"]))
        out[column] = dict(entry, null=NULL) if (values == NULL).any() else entry
    return out


def dataset(name: str):
    """The suite table ``name`` as a bench/run_bench.py Dataset (private rest, schema from the public quarter)."""
    from bench.run_bench import Dataset
    table = SUITE[name]
    public, private = split(table)
    entries = schema(table, public)
    unknown = np.zeros(len(private), dtype=bool)
    for column, entry in entries.items():
        if entry["dtype"] == "str":
            unknown |= ~private[column].isin(entry["values"]).to_numpy()
        elif "null" not in entry:
            unknown |= (private[column] == NULL).to_numpy()
    if unknown.any():
        print(f"{name}: {int(unknown.sum())} of {len(private)} private rows left out (a category or an empty cell "
              f"the public quarter does not show)", file=sys.stderr)
    private = private[~unknown].reset_index(drop=True)
    return Dataset(name, entries, private, None, table.groups, 1e-9, table.target, "clip", table.id_column,
                   table.theta, table.distinct)


SECTION = "## Generalization suite"


def page_section(tables: list[list[str]], command: str, aim_note: str) -> str:
    """The RESULTS.md section: what the suite is, the command, one table of every run."""
    rows = [line for lines in tables for line in lines[2:]]
    text = [SECTION, "",
            "Seven public tables the project was never tuned on (../shared/data/generalization/SOURCE.md), each "
            "schema from a public quarter of the table and the rest released (bench/generalization.py says how); "
            f"mean of the seeds, scored as the accuracy table above. {aim_note}.", "",
            f"Command: `{command}` for every dataset D and method M of the table (`python bench/generalization.py`).",
            "", *tables[0][:2], *rows, ""]
    return "\n".join(text)


def page_tables(section: str) -> dict[tuple[str, str], list[str]]:
    """The tables of a page's suite section by (dataset, method), each its header lines and its rows: what an
    earlier run kept there, for ``--reuse`` where bench/out/results/ holds no table (a new checkout)."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header, tables = lines[:2], dict[tuple[str, str], list[str]]()
    for line in lines[2:]:
        dataset, method = (cell.strip() for cell in line.strip("|").split("|")[:2])
        tables.setdefault((dataset, method), list(header)).append(line)
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=list(SUITE), default=list(SUITE))
    parser.add_argument("--methods", nargs="+", default=["dpsyn", "histogram", "mst", "aim"])
    parser.add_argument("--eps", nargs="+", default=["0.1", "1", "10"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--aim-cap", type=float, default=None, help="AIM's time cap in seconds (default none)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--reuse", nargs="*", default=[], metavar="METHOD",
                        help="methods whose tables from an earlier run of the same command (bench/out/results/, "
                             "else their rows in --out's section) are kept rather than run again (a peer's, when "
                             "only our method changed)")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench import sections
    from bench.results import OUT, run
    from bench.targets import refreshed
    cap = [] if args.aim_cap is None else ["--aim-cap", f"{args.aim_cap:g}"]
    runs = {(d, m): [str(HERE / "run_bench.py"), "--datasets", d, "--methods", m, "--eps", *args.eps,
                     "--seeds", str(args.seeds), *(cap if m == "aim" else [])]
            for d in args.datasets for m in args.methods}

    on_page = page_tables(sections.existing(args.out.read_text(), SECTION)) if args.out.exists() else {}

    def one(key):
        name = f"{key[0]}_{key[1]}"
        kept = OUT / f"{name}.md"
        if key[1] in args.reuse and kept.exists():
            return key, [line for line in kept.read_text().splitlines() if line.startswith("|")]
        if key[1] in args.reuse and key in on_page:
            return key, on_page[key]
        return key, run(name, runs[key])[1]

    with ThreadPoolExecutor(args.workers) as pool:
        done = dict(pool.map(one, runs))
    aim_note = ("AIM uncapped (private-pgm's reference settings)" if args.aim_cap is None else
                f"AIM's selection capped at {args.aim_cap:g} s, then one last round (below its reference settings)")
    command = (f"python bench/run_bench.py --datasets D --methods M --eps {' '.join(args.eps)} --seeds {args.seeds}"
               + (f" (AIM: --aim-cap {args.aim_cap:g})" if cap else ""))
    section = page_section([done[key] for key in runs], command, aim_note if "aim" in args.methods else "No AIM runs")
    # read again at the end: another bench command may have written its own section while the suite ran
    page = args.out.read_text() if args.out.exists() else "# Benchmark results\n"
    args.out.write_text(refreshed(sections.replaced(page, SECTION, section)))  # and bench/targets.py's section


if __name__ == "__main__":
    main()
