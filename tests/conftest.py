"""Shared fixtures: small Sprint-2-shaped tables from the seeded generator (tests/sprint2_generator.py)."""
import json
import logging
from pathlib import Path

import pytest

from tests.sprint2_generator import generate

FIXTURES = Path(__file__).parent / "fixtures"
SPRINT2_PARAMS = FIXTURES / "sprint2_parameters.json"


@pytest.fixture(autouse=True)
def _no_stale_log_stream():
    """main.main() points the root logger at the stderr of its test (basicConfig), which pytest closes
    after it; drop that handler so later tests do not log into a closed stream."""
    yield
    for handler in [h for h in logging.root.handlers if type(h) is logging.StreamHandler]:
        logging.root.removeHandler(handler)


@pytest.fixture
def sprint2_files(tmp_path):
    """Paths of a parameters file (Sprint-2 schema, small max_records), a private and a public CSV."""
    params = json.loads(SPRINT2_PARAMS.read_text())
    for run in params["runs"]:
        run["max_records"] = 5000
    (tmp_path / "params.json").write_text(json.dumps(params))
    generate(2000, seed=1).to_csv(tmp_path / "private.csv", index=False)
    generate(1500, seed=2).drop(columns="sim_individual_id").to_csv(tmp_path / "public.csv", index=False)
    return tmp_path / "params.json", tmp_path / "private.csv", tmp_path / "public.csv"


def write_params(path: Path, schema: dict, runs: list | None = None) -> Path:
    runs = runs or [{"epsilon": 1.0, "delta": 1e-9, "max_records": 1000, "max_records_per_individual": 1}]
    path.write_text(json.dumps({"runs": runs, "schema": schema}))
    return path


def run_method(method: str, encoder, codes, theta: int = 1, epsilon: float = 1.0, delta: float = 1e-9,
               groups: tuple = (), max_records: int = 10 ** 6, seed: int = 0, public=None, numeric=None, **options):
    """Run a registered method on ``codes`` the way a release does (api.synthesize_run); returns
    (codes out, ledger)."""
    import numpy as np

    from dpsyn.api import EncodedTable, synthesize_run
    from dpsyn.dataloader.schema import Run
    from dpsyn.method import METHODS

    spec = METHODS[method]
    numeric = numeric if numeric is not None else {c: np.zeros(len(codes)) for c in encoder.domain.ranges}
    out = synthesize_run(EncodedTable(codes, numeric, None), encoder, public, Run(epsilon, delta, max_records, theta),
                         spec, spec.make_options(options), tuple(groups), 1, np.random.SeedSequence(seed).spawn(4))
    return out.result.codes, out.ledger
