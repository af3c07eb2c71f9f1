"""Empirical privacy audit of a method (tests/privacy_audit.py), end to end through one run of the release.

    python bench/audit.py [--methods histogram dpsyn] [--eps 1] [--theta 20] [--trials 2000] [--broken]

D: 300 individuals with one row each (columns X in a..e, Y in 0..2).  D': D plus one
individual with theta rows, all with X = "rare", a value nobody else has.  Each trial
runs ``stages.run.synthesize_run`` (the private table's contribution bounding, measurement,
synthesis) with fresh seeds and records how many output rows have X = "rare".  ``--broken``
runs the same release with a private table whose noise ignores theta (sensitivity as for
one row although the bounding keeps theta rows), which the audit must catch.  Prints a markdown row.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.privacy_audit import broken_mechanism, run_audit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["histogram", "dpsyn"])
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--theta", type=int, default=20)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--broken", action="store_true")
    args = parser.parse_args()
    print("| method | mechanism | eps | delta | theta | trials per side | eps lower bound (95%) | threshold | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for method in args.methods:
        for broken in ([False, True] if args.broken else [False]):
            start = time.perf_counter()
            if broken:
                with broken_mechanism():
                    result = run_audit(method, args.eps, args.delta, args.theta, args.trials)
            else:
                result = run_audit(method, args.eps, args.delta, args.theta, args.trials)
            print(f"| {method} | {'noise without theta (broken)' if broken else 'as shipped'} | {args.eps:g} | "
                  f"{args.delta:g} | {args.theta} | {args.trials} | {result.epsilon_lower_bound:.3f} | "
                  f"{result.threshold:g} | {time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
