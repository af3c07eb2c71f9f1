"""The ceiling: what a table of the real table's size scores when drawn from the real table itself.

    python bench/ceiling.py [--seeds 3] [--out bench/RESULTS.md]

For every dataset of the accuracy table and the generalization suite, ``bench/run_bench.py --datasets D
--methods bootstrap --eps 1 --seeds S`` (the real table resampled with replacement to its own size, each seed a
draw; not private, ε does not apply), scored as the other tables.  A release cannot beat it by modelling the
real table better: it is the error of sampling alone, against which issue-style targets such as "within 2× of a
bootstrap" are read.  The page section "## Ceiling: the real table resampled" of ``--out`` is replaced.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECTION = "## Ceiling: the real table resampled"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from bench import sections
    from bench.generalization import SUITE
    from bench.results import ACCURACY, command, run
    argv = [str(HERE / "run_bench.py"), "--datasets", *ACCURACY, *SUITE, "--methods", "bootstrap", "--eps", "1",
            "--seeds", str(args.seeds)]
    _, lines, _ = run("ceiling", argv)
    text = "\n".join([SECTION, "",
                      "Not a release: each dataset's real table resampled with replacement to its own size (mean of "
                      f"{args.seeds} draws), scored as the tables above, so its errors are those of sampling alone "
                      "(a perfect model of the real table, sampled to its size, scores about this). ε does not "
                      f"apply. Command: `{command(argv)}` (`python bench/ceiling.py`).", "", *lines, ""])
    old = args.out.read_text() if args.out.exists() else ""
    args.out.write_text(sections.replaced(old, SECTION, text))
    print(text)


if __name__ == "__main__":
    main()
