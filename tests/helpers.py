"""Helpers the tests share (import them by name: pytest puts tests/ on the path): the fixtures folder, the
Sprint-2 parameters, a parameters writer, a way to run a method as a release does and a way to give dpsyn's plan
other adaptive rounds."""
import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
SPRINT2_PARAMS = FIXTURES / "sprint2_parameters.json"


def write_params(path: Path, schema: dict, runs: list | None = None) -> Path:
    runs = runs or [{"epsilon": 1.0, "delta": 1e-9, "max_records": 1000, "max_records_per_individual": 1}]
    path.write_text(json.dumps({"runs": runs, "schema": schema}))
    return path


def run_method(method: str, encoder, codes, theta: int = 1, epsilon: float = 1.0, delta: float = 1e-9,
               groups: tuple = (), max_records: int = 10 ** 6, seed: int = 0, public=None, numeric=None, **options):
    """Run a registered method on ``codes`` the way a release does (stages/run.py's synthesize_run); returns
    (codes out, ledger)."""
    import numpy as np

    from dpsyn.dataloader.inputs import PublicSide
    from dpsyn.dataloader.schema import Run, Schema
    from dpsyn.lib.privacy.private_table import PrivateRecords
    from dpsyn.method import METHODS
    from dpsyn.stages.run import RunSetup, synthesize_run

    spec = METHODS[method]
    numeric = numeric if numeric is not None else {c: np.zeros(len(codes)) for c in encoder.domain.ranges}
    run = Run(epsilon, delta, max_records, theta)
    side = PublicSide(Schema(tuple(c.column for c in encoder.coders), (run,)), encoder, public)
    out = synthesize_run(side, PrivateRecords(codes, numeric), run, RunSetup(spec, spec.make_options(options),
                                                                                  tuple(groups)),
                         np.random.SeedSequence(seed).spawn(4))
    return out.result.codes, out.ledger


def with_rounds(monkeypatch, **changes) -> None:
    """Gives dpsyn's plan adaptive rounds with ``changes`` (method/planner.py ``Rounds`` fields), as a plan of
    another tier would, on a table too small to reach it.  ``noisy_pairs()`` gives the tier where pairs are mostly
    noise and there are no public records (its 1-way rho left as planned)."""
    import dataclasses

    import dpsyn.method.dpsyn as dpsyn
    make = dpsyn.make_plan

    def changed(*args, **kwargs):
        plan = make(*args, **kwargs)
        return dataclasses.replace(plan, rounds=dataclasses.replace(plan.rounds, **changes))
    monkeypatch.setattr(dpsyn, "make_plan", changed)


def noisy_pairs() -> dict:
    """``with_rounds``' changes for the tier where pairs are mostly noise, without public records."""
    from dpsyn.lib.tuning import T
    return {"per_column": T.adaptive_many_rounds_per_column, "coarse_reads": True, "max_entropy": True}


def worker_environ() -> tuple:
    """(MALLOC_TRIM_THRESHOLD_, NUMBA_NUM_THREADS) of the process it runs in (a Dask worker's: a function the
    workers can import by name, as they have the tests' folder on their path)."""
    import os
    return os.environ.get("MALLOC_TRIM_THRESHOLD_"), os.environ.get("NUMBA_NUM_THREADS")
