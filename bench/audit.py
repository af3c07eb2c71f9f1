"""Empirical privacy audit of a method (lib/audit.py), end to end through one run of the release.

    python bench/audit.py [--methods histogram dpsyn] [--eps 1] [--theta 20] [--trials 2000] [--broken]

D: 300 individuals with one row each (columns X in a..e, Y in 0..2).  D': D plus one
individual with theta rows, all with X = "rare", a value nobody else has.  Each trial
runs ``api.synthesize_run`` (the private table's contribution bounding, measurement,
synthesis) with fresh seeds and records how many output rows have X = "rare".  ``--broken``
runs the same release with a private table whose noise ignores theta (sensitivity as for
one row although the bounding keeps theta rows), which the audit must catch.  Prints a markdown row.
"""
from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dpsyn.api import EncodedTable, synthesize_run  # noqa: E402
from dpsyn.dataloader.encoding import Encoder  # noqa: E402
from dpsyn.dataloader.schema import Run, parse_schema  # noqa: E402
from dpsyn.lib.audit import AuditResult, epsilon_lower_bound  # noqa: E402
from dpsyn.lib.privacy.private_table import PrivateTable  # noqa: E402
from dpsyn.method import METHODS  # noqa: E402

BASE_ROWS = 300
SCHEMA = parse_schema({"runs": [{"epsilon": 1, "delta": 1e-6, "max_records": 10_000,
                                 "max_records_per_individual": 1}],
                       "schema": {"X": {"dtype": "str", "values": ["a", "b", "c", "d", "e", "rare"]},
                                  "Y": {"dtype": "int", "values": [0, 1, 2]}}})
RARE = 5


def neighbours(theta: int, seed: int = 0) -> tuple[EncodedTable, EncodedTable]:
    """(D, D'): D' adds one individual whose theta rows all sit in the cell X = rare."""
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, RARE, BASE_ROWS), rng.integers(0, 3, BASE_ROWS)]).astype(np.int32)
    ids = np.arange(BASE_ROWS).astype(str).astype(object)
    extra = np.column_stack([np.full(theta, RARE), rng.integers(0, 3, theta)]).astype(np.int32)
    with_ = EncodedTable(np.vstack([codes, extra]), {},
                         np.concatenate([ids, np.full(theta, "target", dtype=object)]))
    return EncodedTable(codes, {}, ids), with_


@contextmanager
def broken_mechanism():
    """Within the block, private tables scale their noise for one row per individual, although
    bounding keeps theta rows (for showing that the audit catches it)."""
    original = PrivateTable.sensitivity
    PrivateTable.sensitivity = lambda self, query: query.sensitivity(1)
    try:
        yield
    finally:
        PrivateTable.sensitivity = original


def run_audit(method: str, epsilon: float, delta: float, theta: int, trials: int, seed: int = 0) -> AuditResult:
    """Audit ``method`` at (epsilon, delta) with an individual of ``theta`` rows (see the module doc)."""
    encoder = Encoder.fit(SCHEMA)
    run = Run(epsilon, delta, 10_000, theta)
    spec = METHODS[method]
    options = spec.make_options()
    samples = []
    for data in neighbours(theta, seed):
        stats = np.empty(trials)
        for trial in range(trials):
            seeds = np.random.SeedSequence((seed, trial, len(data.codes))).spawn(4)
            codes = synthesize_run(data, encoder, None, run, spec, options, (), 1, seeds).result.codes
            stats[trial] = np.count_nonzero(codes[:, 0] == RARE)
        samples.append(stats)
    return epsilon_lower_bound(samples[0], samples[1], delta)


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
