"""SDNist, NIST's evaluator for the CRC's ACS excerpts, on releases of each target (bench/RESULTS.md "## SDNist").

    python bench/sdnist_report.py [--targets ma tx national] [--eps 1 10] [--methods dpsyn mst aim]
                                  [--aim-cap 60] [--seed 0] [--sdnist-python PATH] [--out bench/RESULTS.md]

For each target (Massachusetts, Texas or national, 2019) the other two 2019 files are the public file. The
schema is the demo's (parameters.json, its edit rules included) without YEAR, with the target's PUMAs (data
dictionary) and the industry codes the public file shows (rows with others dropped, as ./run.sh does);
groups PUMA, θ 1. Each method's release (one seed) is written as SDNist reads a deidentified file (the
target's 24 columns, N for null) and scored by ``python -m sdnist.report FILE TARGET --data-root ROOT``:
SDNist 2.4 in an environment of its own (``--sdnist-python``, default $SDNIST_PYTHON; its pinned numpy and
pandas clash with ours: ``python -m venv V && V/bin/pip install sdnist==2.4``), ROOT laid out from
../shared/data/nist_crc_acs_excerpts (or $BENCH_DATA) as its README says, so nothing is downloaded. A random
sample of the public file as large as the target, its PUMAs drawn uniformly from the target's, is scored too
("public sample": what a release that copied no private record would give for unique exact matches).
Reports stay in bench/out/sdnist/; the table replaces the "## SDNist" section of ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench import run_bench, sections  # noqa: E402
from bench.run_bench import Dataset, demo_parameters, read_csv_text  # noqa: E402
from dpsyn.evaluation.sdnist import cells, summary  # noqa: E402

SECTION = "## SDNist"
SOURCE = Path(os.environ.get("BENCH_DATA", ROOT.parent / "shared" / "data")) / "nist_crc_acs_excerpts"
WORK = HERE / "out" / "sdnist"
# target: (SDNist's name for it, its folder in the data root, the file stem, its PUMAs' prefix test)
TARGETS = {"ma": ("MA", "massachusetts", "ma2019", lambda p: p.startswith("25-")),
           "tx": ("TX", "texas", "tx2019", lambda p: p.startswith("48-")),
           "national": ("NATIONAL", "national", "national2019", lambda p: not p.startswith(("25-", "48-")))}
PUBLIC_SAMPLE = "public sample"


def data_root() -> Path:
    """SDNist's data root, laid out from the shared folder (config, dictionary, mappings, the three files)."""
    root = WORK / "root"
    for name in ("data_dictionary.json", "mappings.json"):
        _copy(SOURCE / name, root / name)
    _copy(SOURCE / "sdnist" / "config.json", root / "config.json")
    for _, folder, stem, _ in TARGETS.values():
        for suffix in (".csv", ".json"):
            _copy(SOURCE / f"{stem}{suffix}", root / folder / f"{stem}{suffix}")
    return root


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        shutil.copyfile(source, target)


def dataset(target: str) -> Dataset:
    """The target's 2019 file private, the other two public (module doc)."""
    dictionary = json.loads((SOURCE / "data_dictionary.json").read_text())
    _, _, stem, ours = TARGETS[target]
    private = read_csv_text(SOURCE / f"{stem}.csv", "excerpt")
    public = pd.concat([read_csv_text(SOURCE / f"{TARGETS[t][2]}.csv", "excerpt") for t in TARGETS if t != target],
                       ignore_index=True)
    parameters = demo_parameters()
    schema = {c: e for c, e in parameters["schema"].items() if c != "YEAR"}
    schema["PUMA"] = {"dtype": "str", "values": [p for p in dictionary["PUMA"]["values"] if ours(p)]}
    schema["INDP"] = dict(schema["INDP"], values=sorted(int(v) for v in set(public["INDP"]) if v != "N"))
    columns = list(private.columns)
    return Dataset(f"sdnist_{target}", {c: schema[c] for c in columns}, private, public[columns], ("PUMA",), 1e-10,
                   "OWN_RENT", "drop", constraints=tuple(parameters["constraints"]))


def as_deidentified(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """A synthetic table as SDNist reads a deidentified file: the target's columns, text, N for null."""
    out = {}
    for c in columns:
        values = table[c]
        if isinstance(values.dtype, pd.CategoricalDtype):
            out[c] = values.astype(str)
        else:
            out[c] = values.astype(object).where(values.notna(), "N").astype(str)
    return pd.DataFrame(out)


def public_sample(data: Dataset, seed: int) -> pd.DataFrame:
    """As many public rows as the target has (with replacement where the public file is smaller), each given
    one of the target's PUMAs at random."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(data.public), len(data.private), replace=len(data.public) < len(data.private))
    sample = data.public.iloc[rows].reset_index(drop=True).copy()
    sample["PUMA"] = rng.choice(data.schema["PUMA"]["values"], len(sample))
    return sample


def score(deidentified: Path, target: str, root: Path, python: str) -> dict:
    """SDNist's figures for one deidentified file (evaluation/sdnist.py ``summary``)."""
    work = deidentified.with_suffix("")
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([python, "-m", "sdnist.report", str(deidentified), TARGETS[target][0], "--data-root",
                           str(root)], cwd=work, capture_output=True, text=True)
    reports = sorted((work / "reports").glob("*/report.json"), key=lambda p: p.stat().st_mtime)
    if proc.returncode != 0 or not reports:
        raise RuntimeError(f"SDNist failed on {deidentified}: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return summary(reports[-1])


def row(target: str, method: str, eps: str, s: dict) -> str:
    return "| " + " | ".join([target, method, eps, *cells(s)]) + " |"


def page_section(rows: list[str], args) -> str:
    aim = ("" if "aim" not in args.methods else " AIM uncapped (private-pgm's reference settings)." if args.aim_cap
           is None else f" AIM's selection capped at {args.aim_cap:g} s, then one last round (below its reference "
                        "settings).")
    command = "python bench/sdnist_report.py" + "".join(
        f" --{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in (("targets", args.targets), ("eps", args.eps), ("methods", args.methods),
                     ("aim_cap", args.aim_cap), ("seed", args.seed)) if v is not None)
    return "\n".join([
        SECTION, "",
        "NIST's own evaluator (SDNist 2.4, `python -m sdnist.report`) on one release per target, method and ε "
        f"(seed {args.seed}): each 2019 excerpt private, the other two public, the demo's schema and edit rules "
        "(bench/sdnist_report.py says how). k-marginal score (0-1000) and the size of the real subsample "
        "(% of the target) it equals; pMSE (a classifier telling real from synthetic records; lower is better); "
        "unique real records reproduced exactly; records SDNist finds inconsistent under its age, work and "
        "housing rules (summed over the three, so a record can count twice). "
        "MST and AIM run at private-pgm's reference settings on the same codes and enforce no edit rules; "
        f"\"{PUBLIC_SAMPLE}\" is a sample of the public file with the target's PUMAs.{aim}", "",
        f"Command: `{command}`.", "",
        "| target | method | ε | k-marginal score | subsample equivalent (%) | pMSE | unique exact matches | "
        "inconsistent records (age / work / housing) |",
        "|---|---|---|---|---|---|---|---|",
        *rows, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", nargs="+", choices=list(TARGETS), default=list(TARGETS))
    parser.add_argument("--eps", nargs="+", default=["1", "10"])
    parser.add_argument("--methods", nargs="+", default=["dpsyn", "mst", "aim"])
    parser.add_argument("--aim-cap", type=float, default=None, help="AIM's time cap in seconds (default none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sdnist-python", default=os.environ.get("SDNIST_PYTHON"),
                        help="the Python of an environment with sdnist==2.4 (default $SDNIST_PYTHON)")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    if not args.sdnist_python:
        parser.error("SDNist runs in its own environment: give --sdnist-python or set SDNIST_PYTHON")
    root = data_root()
    rows = []
    for target in args.targets:
        data = run_bench._DATA = dataset(target)
        columns = list(data.private.columns)
        runs = [(m, e) for m in args.methods for e in args.eps] + [(PUBLIC_SAMPLE, "-")]
        for method, eps in runs:
            if method == PUBLIC_SAMPLE:
                table = public_sample(data, args.seed)
            else:
                table, _, _ = run_bench._one_run((method, float(eps), args.seed, args.aim_cap))
            path = WORK / f"{target}_{method.replace(' ', '_')}_eps{eps}.csv"
            as_deidentified(table, columns).to_csv(path, index=False)
            rows.append(row(target, method, eps, score(path, target, root, args.sdnist_python)))
            print(rows[-1], flush=True)
    page = args.out.read_text() if args.out.exists() else "# Benchmark results\n"
    args.out.write_text(sections.replaced(page, SECTION, page_section(rows, args)))
    print(args.out)


if __name__ == "__main__":
    main()
