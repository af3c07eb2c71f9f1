"""Regenerate bench/RESULTS.md: the current tables, every one from a bench command this script runs.

    python bench/results.py [--seeds 3] [--aim-cap 60] [--workers 2] [--reuse METHOD ...] [--out bench/RESULTS.md]

Needs the peers (``pip install -r requirements-bench.txt``) and the datasets of ../shared/data (or
BENCH_DATA).  It runs, each dataset in its own process (``--workers`` at a time):

* accuracy, dataset × method × ε: ``bench/run_bench.py --datasets D --methods M --eps 0.1 1 10 --seeds S``
  (AIM: ``--aim-cap C``) for the demo, adult, ct_drug_deaths and acs_split and M each of dpsyn, histogram, MST
  and AIM (``--reuse M``: M's rows of an earlier run are kept, from bench/out/results/ or else from the page);
* reweighting: ``bench/run_bench.py --datasets adult_raw demo --methods dpsyn dpsyn+reweight --eps 1 10``
  and the paper's setting (adult_raw, five moments, half of ε = 2's ρ);
* the moments' noise floor: ``bench/moment_floor.py``;

and writes one page of tables with the commands that made them (the "## Scale", "## Generalization suite",
"## Ceiling", "## SDNist", "## Synthetic individuals" and "## Peers against their reference scripts" sections,
which ``bench/bench_scale.py``, ``bench/generalization.py``, ``bench/ceiling.py``, ``bench/sdnist_report.py``,
``bench/individuals.py`` and ``bench/peer_check.py`` write, are kept as they are; "## Where the default falls
short" is rewritten from the new tables, as ``bench/targets.py`` writes it).  History stays in git.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
from bench import sections  # noqa: E402
from bench.bench_scale import SECTION as SCALE  # noqa: E402
from bench.ceiling import SECTION as CEILING  # noqa: E402
from bench.generalization import SECTION as GENERALIZATION, page_tables  # noqa: E402
from bench.individuals import SECTION as INDIVIDUALS  # noqa: E402
from bench.peer_check import SECTION as PEER_CHECK  # noqa: E402
from bench.sdnist_report import SECTION as SDNIST  # noqa: E402
from bench.targets import refreshed  # noqa: E402

OUT = HERE / "out" / "results"
ACCURACY = ("demo", "adult", "ct_drug_deaths", "acs_split")
METHODS = ("dpsyn", "histogram", "mst", "aim")
HEADING = "## Accuracy: every dataset, our methods and the peers"
PAPER_MOMENTS = "moments:age,education-num,hours-per-week,capital-gain,capital-loss"


def jobs(seeds: int, aim_cap: float | None) -> dict[str, list[str]]:
    """Each table's bench command (arguments after the python interpreter)."""
    run = [str(HERE / "run_bench.py")]
    cap = [] if aim_cap is None else ["--aim-cap", f"{aim_cap:g}"]
    out = {f"accuracy_{d}_{m}": run + ["--datasets", d, "--methods", m, "--eps", "0.1", "1", "10",
                                       "--seeds", str(seeds)] + (cap if m == "aim" else [])
           for d in ACCURACY for m in METHODS}
    out["reweight"] = run + ["--datasets", "adult_raw", "demo", "--methods", "dpsyn", "dpsyn+reweight",
                             "--eps", "1", "10", "--seeds", str(seeds)]
    out["reweight_paper"] = run + ["--datasets", "adult_raw", "--methods", "dpsyn", "dpsyn+reweight", "--eps", "2",
                                   "--seeds", str(seeds), "--reweight-share", "0.5", "--reweight", PAPER_MOMENTS]
    out["moment_floor"] = [str(HERE / "moment_floor.py")]
    return out


def run(name: str, argv: list[str]) -> tuple[str, list[str], float]:
    """Run one bench command; its table (the markdown lines it printed) and seconds."""
    start = time.perf_counter()
    extra = ["--out", str(OUT / f"{name}.md")] if argv[0].endswith("run_bench.py") else []
    proc = subprocess.run([sys.executable] + argv + extra, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    print(f"{name}: {len(lines) - 2} rows in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return name, lines, time.perf_counter() - start


def command(argv: list[str]) -> str:
    return "python " + " ".join(str(Path(a).relative_to(ROOT)) if a.startswith(str(ROOT)) else
                                (f'"{a}"' if " " in a or "," in a else a) for a in argv)


def page(tables: dict[str, list[str]], commands: dict[str, list[str]], seeds: int, aim_cap: float | None) -> str:
    first = tables[f"accuracy_{ACCURACY[0]}_{METHODS[0]}"]
    accuracy = first[:2] + [row for d in ACCURACY for m in METHODS for row in tables[f"accuracy_{d}_{m}"][2:]]
    runs = command(commands[f"accuracy_{ACCURACY[0]}_aim"]).replace(f"--datasets {ACCURACY[0]} --methods aim",
                                                                     "--datasets D --methods M")
    parts = [
        "# Benchmark results",
        "",
        f"Current tables only, made by `python bench/results.py` and, for the sections that say so, the commands they "
        f"name (mean of {seeds} seeds; 2 cores, 24 GiB; benchmarks ran two at a time, so wall times are inflated). "
        "History is in git.",
        "",
        HEADING,
        "",
        "Each run is one `api.release` call in a forked process, scored against the real table by the `score` "
        "command's code: Sprint-2 score (per PUMA × YEAR on the demo and acs_split, per year on ct_drug_deaths, "
        "one group on adult), mean TVD of 1-, 2- and 100 random 3-way marginals, raw-value errors, and a "
        "logistic regression trained on the synthetic table and tested on held-out real rows (accuracy and "
        "macro F1, beside the same model trained on real rows). \"encoded TVD\" scores the same marginals on "
        "the encoded domain (the bins every method saw: the model's quality, free of decoding); the other TVD "
        "columns score decoded values (what a user gets). MST and AIM are private-pgm's, on the same codes with "
        "each individual cut to θ rows (bench/peers.py), at the reference scripts' settings"
        + (". **AIM here ran below its reference settings**: its selection stopped after a time cap of "
           f"{aim_cap:g} s and spent the rest of its budget in one last round" if aim_cap is not None else
           ", AIM uncapped") + ". The datasets are described in bench/run_bench.py.",
        "",
        f"Command: `{runs}` (the cap for AIM only) for every dataset D and method M of the table.",
        "",
        *accuracy,
        "",
        "## Reweighting toward noisy moments",
        "",
        f"`{command(commands['reweight'])}` (the default usage: `--reweight moments:*` at the default share, same "
        f"total ε) and the paper's setting, `{command(commands['reweight_paper'])}` (the five numeric columns most "
        "correlated with income; half of ε = 2's ρ on their moments against dpsyn with all of it). Correlation "
        "error: mean |real − synthetic| Pearson correlation over every pair of numeric columns.",
        "",
        *tables["reweight"],
        *tables["reweight_paper"][2:],
        "",
        "## The moments' noise floor",
        "",
        f"`{command(commands['moment_floor'])}`: the correlation error of the noisy moments alone, no "
        "synthesizer (what any reweighting toward them can reach at best).",
        "",
        *tables["moment_floor"],
        "",
    ]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--aim-cap", type=float, default=None,
                        help="seconds of AIM's selection rounds (default none: the reference settings; a "
                             "capped table says it ran below them)")
    parser.add_argument("--workers", type=int, default=2, help="bench commands run at a time")
    parser.add_argument("--reuse", nargs="*", default=[], choices=METHODS, metavar="METHOD",
                        help="methods whose accuracy rows from an earlier run (bench/out/results/, else the page) are "
                             "kept rather than run again (a peer's, when only our method changed)")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    commands = jobs(args.seeds, args.aim_cap)
    old = args.out.read_text() if args.out.exists() else ""
    on_page = page_tables(sections.existing(old, HEADING))
    accuracy = {f"accuracy_{d}_{m}": (d, m) for d in ACCURACY for m in METHODS}  # the jobs' names

    def one(item: tuple[str, list[str]]) -> tuple[str, list[str]]:
        name, argv = item
        dataset, method = accuracy.get(name, ("", ""))
        kept = OUT / f"{name}.md"
        if method in args.reuse and kept.exists():
            return name, [line for line in kept.read_text().splitlines() if line.startswith("|")]
        if method in args.reuse and (dataset, method) in on_page:
            return name, on_page[dataset, method]
        return run(name, argv)[:2]

    with ThreadPoolExecutor(args.workers) as pool:
        tables = dict(pool.map(one, commands.items()))
    # the sections other commands write (bench/bench_scale.py, bench/generalization.py, bench/ceiling.py,
    # bench/sdnist_report.py, bench/individuals.py, bench/peer_check.py), kept as they are
    kept = [text for text in (sections.existing(old, h) for h in (SCALE, GENERALIZATION, CEILING, SDNIST,
                                                                  INDIVIDUALS, PEER_CHECK)) if text]
    written = "\n\n".join(text.rstrip("\n") for text in [page(tables, commands, args.seeds, args.aim_cap), *kept])
    args.out.write_text(refreshed(written + "\n"))  # bench/targets.py's section, from the tables just written
    print(args.out)


if __name__ == "__main__":
    main()
